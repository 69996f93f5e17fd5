"""Hostile or malformed Prometheus answers are refused whole, never read as numbers; a good vector is read."""

from __future__ import annotations

import json
import threading
from collections import Counter

import pytest
import responses

from fleet.errors import PrometheusError, Unreachable
from fleet.placing.selection import Request, Selection
from fleet.placing.waiting import wait_for
from fleet.querying.prom import FleetPrometheus
from plumbing.prometheus.config import endpoint_from_url

URL = "http://prometheus.test:9090"


def answer(result: object, kind: str = "vector") -> dict[str, object]:
    return {"status": "success", "data": {"resultType": kind, "result": result}}


def vector(body: object, status: int = 200) -> list[object]:
    with responses.RequestsMock() as mock, FleetPrometheus(endpoint_from_url(URL), timeout=2) as client:
        raw = body if isinstance(body, bytes) else json.dumps(body).encode()
        mock.add(responses.GET, f"{URL}/api/v1/query", body=raw, status=status)
        return list(client.vector("gpu_info"))


def test_a_vector_is_read_with_its_labels_and_nan_is_dropped() -> None:
    samples = vector(answer([{"metric": {"gpu": "0"}, "value": [1.0, "0.5"]},
                             {"metric": {"gpu": "1"}, "value": [1.0, "NaN"]}]))
    assert [(s.labels, s.value) for s in samples] == [({"gpu": "0"}, 0.5)]  # type: ignore[attr-defined]


HOSTILE = {
    "not-json": b"<html>hello</html>",
    "error-status": {"status": "error", "data": {}},
    "result-not-list": answer({"a": 1}),
    "value-a-number": answer([{"metric": {}, "value": [1.0, 0.5]}]),
    "value-an-object": answer([{"metric": {}, "value": [1.0, {"x": 1}]}]),
    "value-not-a-number": answer([{"metric": {}, "value": [1.0, "1e999999x"]}]),
    "label-not-a-string": answer([{"metric": {"gpu": 0}, "value": [1.0, "1"]}]),
    "no-timestamp": answer([{"metric": {}, "value": ["now", "1"]}]),
    "matrix": answer([], kind="matrix"),
    "huge-value": answer([{"metric": {}, "value": [1.0, "9" * 500]}]),
}


@pytest.mark.parametrize("body", HOSTILE.values(), ids=HOSTILE.keys())
def test_a_hostile_answer_is_refused(body: object) -> None:
    with pytest.raises(PrometheusError) as caught:
        vector(body)
    assert not isinstance(caught.value, Unreachable)


def test_an_http_error_names_the_status() -> None:
    with pytest.raises(PrometheusError, match=r"^401 from Prometheus: check the credentials of endpoint "):
        vector({"status": "error", "errorType": "auth", "error": "no"}, status=401)
    with pytest.raises(PrometheusError, match=r"HTTP 500 from .*: bad_data: no"):
        vector({"status": "error", "errorType": "bad_data", "error": "no"}, status=500)


@pytest.mark.parametrize("status", [502, 503, 504])
def test_a_prometheus_not_there_yet_is_unreachable_whatever_its_body(status: int) -> None:
    """A Prometheus still starting answers 503 "Service Unavailable" (not JSON); a proxy without its
    upstream 502 or 504: `wait` keeps waiting on them, as on a refused connection, not calling them
    malformed."""
    with pytest.raises(Unreachable, match=f"HTTP {status} from"):
        vector(b"Service Unavailable", status=status)


def test_wait_retries_until_enough_and_stops_at_the_deadline() -> None:
    clock = [0.0]
    lines: list[str] = []
    stop = threading.Event()
    outcomes = [Selection((), 0, Counter(), Request(1))]

    def attempt() -> Selection:
        clock[0] += 10
        if len(lines) == 1:
            raise Unreachable("cannot reach Prometheus")
        return outcomes[0]

    stop.wait = lambda timeout=None: False  # type: ignore[method-assign]
    outcome = wait_for(attempt, timeout=25, interval=1, stop=stop,
                       progress=lambda n, line: lines.append(line), monotonic=lambda: clock[0])
    assert outcome.selection is None and outcome.attempts == 3
    assert lines[1].startswith("cannot reach Prometheus") and lines[2].endswith("0s left")
