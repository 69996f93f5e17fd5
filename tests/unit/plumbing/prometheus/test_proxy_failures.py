"""How a failure through a proxy is named: from the exception chain requests and urllib3 build, judged on the
whole chain, so the text of an outer exception (which holds object addresses) never decides it."""

from __future__ import annotations

import dataclasses

import pytest
import requests
from urllib3.exceptions import MaxRetryError, NewConnectionError
from urllib3.exceptions import ProxyError as Urllib3ProxyError

from plumbing.prometheus.config import endpoint_from_url
from plumbing.prometheus.session import describe_failure

ENDPOINT = dataclasses.replace(endpoint_from_url("https://127.0.0.1:9090"),
                               proxy_url="http://u:p@127.0.0.1:3128", proxy_display="http://u:***@127.0.0.1:3128")


def through_proxy(inner: BaseException, address: str) -> requests.exceptions.ProxyError:
    """The chain requests raises: its ProxyError around urllib3's MaxRetryError around urllib3's ProxyError
    around `inner`. `address` stands in for the `at 0x...` that urllib3's reprs put in the outer texts."""
    proxy_error = Urllib3ProxyError(f"Unable to connect to proxy ({address})", inner)
    retries = MaxRetryError(None, f"https://127.0.0.1:9090/api/v1/query ({address})",  # type: ignore[arg-type]
                            reason=proxy_error)
    return requests.exceptions.ProxyError(retries)


def refused() -> BaseException:
    wrapper = NewConnectionError(None, "Failed to establish a new connection: [Errno 111] Connection refused")  # type: ignore[arg-type]
    wrapper.__cause__ = ConnectionRefusedError(111, "Connection refused")
    return wrapper


@pytest.mark.parametrize("address", ["0x7f5e2a1b4070", "0x7f5e2a407b30", "0x7f5e2a1b9d90"])
def test_a_refused_proxy_is_refused_whatever_the_addresses_read(address: str) -> None:
    failure = describe_failure(through_proxy(refused(), address), ENDPOINT)
    assert failure.message == "proxy http://u:***@127.0.0.1:3128: connection refused"
    assert failure.unreachable and failure.retryable


@pytest.mark.parametrize(("status", "problem"), [
    ("407 Proxy Authentication Required", "407: the proxy wants credentials (user:password@ in proxy_url)"),
    ("403 Forbidden", "it refused to open a tunnel to Prometheus"),
    ("502 Bad Gateway", "it refused to open a tunnel to Prometheus"),
])
def test_a_tunnel_refusal_is_read_from_the_status_alone(status: str, problem: str) -> None:
    failure = describe_failure(through_proxy(OSError(f"Tunnel connection failed: {status}"), "0x7f407407"),
                               ENDPOINT)
    assert failure.message == f"proxy http://u:***@127.0.0.1:3128: {problem}"


def test_an_unknown_proxy_failure_says_so_even_with_407_in_its_text() -> None:
    failure = describe_failure(through_proxy(OSError("something else at 0x7f0407"), "0x407"), ENDPOINT)
    assert failure.message == "proxy http://u:***@127.0.0.1:3128: cannot connect through it"
