"""A 401 or 403 from an auth proxy comes with a login page, not JSON: every client of a Prometheus endpoint
(the controller's instant queries, `tune`'s range queries, `gpu-fleet`) says to check that endpoint's
credentials, whatever the body, never "not valid JSON". A real HTTP server on 127.0.0.1 answers."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fleet.errors import PrometheusError
from fleet.querying.prom import FleetPrometheus
from plumbing.prometheus.config import endpoint_from_url
from plumbing.prometheus.range_query import RangeQueryError, RangeSettings, query_range
from plumbing.prometheus.runner import PromQLRunner, PromQLSettings
from plumbing.prometheus.session import EndpointSession
from tests.support import QuietHandler, http_server

pytestmark = pytest.mark.integration


class Refusing:
    """The server's next answer: a status and a body."""

    status = 401
    body = b"<html><body>Sign in</body></html>"


@pytest.fixture(scope="module")
def proxy() -> Iterator[tuple[str, type[Refusing]]]:
    class Handler(QuietHandler):
        def do_GET(self) -> None:
            self.answer(Refusing.status, Refusing.body, "text/html")

        do_POST = do_GET

    with http_server(Handler) as url:
        yield url, Refusing


EXPECTED = {401: "401 from Prometheus: check the credentials of endpoint default",
            403: "403 from Prometheus: endpoint default's credentials are not allowed to query"}


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(status=st.sampled_from([401, 403]), body=st.binary(max_size=2000))
def test_every_client_names_the_endpoints_credentials(proxy: tuple[str, type[Refusing]], status: int,
                                                     body: bytes) -> None:
    url, answer = proxy
    answer.status, answer.body = status, body
    endpoint = endpoint_from_url(url)

    runner = PromQLRunner(PromQLSettings(url, query_timeout=5.0, budget=10.0, max_attempts=1))
    try:
        result = runner.run_queries(["up"])["up"]
    finally:
        runner.close()
    assert result.value is None and result.error is not None and result.error.startswith(EXPECTED[status])

    with pytest.raises(RangeQueryError) as ranged:
        query_range(EndpointSession(endpoint), "up", 0.0, 60.0, 15.0, RangeSettings(timeout=5.0))
    assert str(ranged.value).startswith(EXPECTED[status])

    with FleetPrometheus(endpoint, timeout=5.0) as fleet, pytest.raises(PrometheusError) as fleet_error:
        fleet.vector("up")
    assert str(fleet_error.value).startswith(EXPECTED[status])
