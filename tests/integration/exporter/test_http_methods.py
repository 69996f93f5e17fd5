"""Methods other than GET and HEAD over real HTTP on 127.0.0.1: a JSON 405 on the status API, a plain 405 on
/metrics and the probes, both with `Allow: GET, HEAD`, and a request body never hangs the connection."""

from __future__ import annotations

import http.client
import json
import socket
from collections.abc import Iterator

import pytest
from prometheus_client import CollectorRegistry

from exporter.app import ExporterApp
from exporter.serving.http_endpoint import ExporterServer
from exporter.simulator.config import default_config
from exporter.simulator.nvml import SimulatedNvml
from tests.integration.exporter.conftest import SETTINGS, get

pytestmark = pytest.mark.integration

METHODS = ["POST", "PUT", "DELETE", "PATCH", "OPTIONS", "TRACE", "PROPFIND"]


def request(base: str, method: str, path: str,
            body: bytes | None = None) -> tuple[int, bytes, dict[str, str]]:
    host, port = base.removeprefix("http://").rsplit(":", 1)
    connection = http.client.HTTPConnection(host, int(port), timeout=10)
    try:
        connection.request(method, path, body=body)
        response = connection.getresponse()
        return response.status, response.read(), dict(response.getheaders())
    finally:
        connection.close()


@pytest.fixture(scope="module")
def base() -> Iterator[str]:
    """One running exporter (simulated GPU, status API) for the module: these tests only send requests."""
    app = ExporterApp(SimulatedNvml(default_config(1), pcie_latency_seconds=0.0), "test-node", SETTINGS)
    server = app.start("127.0.0.1", 0)
    try:
        yield f"http://127.0.0.1:{server.port}"
    finally:
        app.stop()


def exchange(port: int, raw: bytes, timeout: float = 5.0) -> bytes:
    """Send raw bytes on one connection and read until the server closes it (bounded by `timeout`)."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as client:
        client.sendall(raw)
        received = b""
        while chunk := client.recv(65536):
            received += chunk
        return received


@pytest.mark.parametrize("path", ["/api/v1/gpus", "/api/v1/gpus/0", "/api/v1/gpus/0/trend?minutes=1"])
def test_the_status_api_answers_json_405_with_allow(base: str, path: str) -> None:
    for method in METHODS:
        status, body, headers = request(base, method, path, b'{"index": 0}' if method != "TRACE" else None)
        assert status == 405 and headers["Allow"] == "GET, HEAD", (method, status, body, headers)
        assert headers["Content-Type"] == "application/json"
        assert json.loads(body) == {"error": f"method {method} not allowed; use GET or HEAD"}


def test_an_unknown_api_resource_is_404_whatever_the_method(base: str) -> None:
    status, body, headers = request(base, "POST", "/api/v1/nothing", b"{}")
    assert status == 404 and "error" in json.loads(body) and "Allow" not in headers


@pytest.mark.parametrize("path", ["/metrics", "/healthz", "/readyz", "/"])
def test_other_paths_answer_a_plain_405_with_allow(base: str, path: str) -> None:
    for method in METHODS:
        status, body, headers = request(base, method, path, b"x=1")
        assert (status, headers.get("Allow")) == (405, "GET, HEAD"), (method, status, body, headers)
        assert headers["Content-Type"] == "text/plain; charset=utf-8"
        assert body == f"method {method} not allowed on {path}; use GET or HEAD\n".encode()
        assert request(base, method, "/nope", b"x=1")[0] == 404  # no such path: 404, as for GET


def test_get_and_head_are_unchanged(base: str) -> None:
    assert request(base, "HEAD", "/api/v1/gpus")[:2] == (200, b"")
    status, body, headers = request(base, "GET", "/api/v1/gpus")
    assert status == 200 and "Allow" not in headers and len(json.loads(body)["gpus"]) == 1
    assert get(base + "/healthz")[:2] == (200, b"ok\n")


def test_a_body_is_read_so_the_keep_alive_connection_serves_the_next_request(base: str) -> None:
    port = int(base.rsplit(":", 1)[1])
    body = b'{"index": 0, "padding": "' + b"x" * 5000 + b'"}'
    raw = (b"POST /api/v1/gpus HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
           b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body
           + b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    received = exchange(port, raw)
    first, _, second = received.partition(b"HTTP/1.1 200")
    assert first.startswith(b"HTTP/1.1 405") and b"Allow: GET, HEAD" in first, received
    assert second.endswith(b"ok\n"), received  # the body was not parsed as a request line


@pytest.mark.parametrize(("headers", "status"), [
    (b"Content-Length: 100000000\r\n", b"405"),  # far too large to read: never sent anyway
    (b"Transfer-Encoding: chunked\r\n", b"405"),
    (b"Content-Length: lots\r\n", b"400"),  # a malformed request: the HTTP parser refuses it
], ids=["huge", "chunked", "invalid-length"])
def test_a_body_not_worth_reading_is_answered_at_once_and_the_connection_closed(headers: bytes,
                                                                                 status: bytes) -> None:
    """The server must neither wait for those bytes (30 s handler timeout here, 5 s client timeout) nor parse
    them as the next request: it answers at once, says `Connection: close` and hangs up."""
    server = ExporterServer("127.0.0.1", 0, CollectorRegistry(), _Ready())
    server.start()
    try:
        received = exchange(server.port, b"POST /metrics HTTP/1.1\r\nHost: x\r\n" + headers + b"\r\n")
        assert received.split(b"\r\n")[0].split(b" ")[1] == status, received
        assert status == b"400" or b"Allow: GET, HEAD\r\n" in received, received
        # exchange() returned: the server hung up; an HTTP/1.0 answer (the 400) says so without a header
        assert b"Connection: close\r\n" in received or received.startswith(b"HTTP/1.0 400")
        assert received.count(b"HTTP/1.") == 1
    finally:
        server.shutdown()


def test_a_body_shorter_than_announced_ends_with_the_handler_timeout() -> None:
    server = ExporterServer("127.0.0.1", 0, CollectorRegistry(), _Ready(), handler_timeout_seconds=0.3)
    server.start()
    try:
        received = exchange(server.port, b"PUT /healthz HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\nabc")
        assert received == b"" or received.startswith(b"HTTP/1.1 405"), received
    finally:
        server.shutdown()


class _Ready:
    init_attempted = True
    ready = True
    nvml_error = None
