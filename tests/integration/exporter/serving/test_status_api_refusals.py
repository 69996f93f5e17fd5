"""Every 4xx under /api/ is the API's JSON, whoever answers it: the server's own refusals (a request line or
header too long for the parser, no or wrong credentials, too many failed attempts) as much as the API's, on
a running exporter (simulated NVML) behind basic auth, over raw sockets on 127.0.0.1. Other paths keep their
one plain-text line."""

from __future__ import annotations

import base64
import json
import socket
from collections.abc import Iterator
from pathlib import Path

import bcrypt
import pytest

from exporter.app import ExporterApp
from exporter.simulator.config import default_config
from exporter.simulator.nvml import SimulatedNvml
from plumbing.web import load_web_config
from tests.integration.exporter.conftest import SETTINGS

pytestmark = pytest.mark.integration

PASSWORD = "right-horse"
LONG = 9000  # past the 8190 bytes the parser reads of a line


def basic(user: str, password: str) -> str:
    return "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()


GOOD = basic("prometheus", PASSWORD)


@pytest.fixture
def port(tmp_path: Path) -> Iterator[int]:
    web = tmp_path / "web.yml"
    hashed = bcrypt.hashpw(PASSWORD.encode(), bcrypt.gensalt(4)).decode()
    web.write_text(f"basic_auth_users:\n  prometheus: '{hashed}'\n"
                   "http_server_config:\n  headers:\n    X-Content-Type-Options: nosniff\n")
    app = ExporterApp(SimulatedNvml(default_config(2), pcie_latency_seconds=0.001), "test-node", SETTINGS)
    app.bind("127.0.0.1", 0, web_config=load_web_config(web))
    server = app.start()
    try:
        yield server.port
    finally:
        app.stop()


def exchange(port: int, target: str, headers: dict[str, str]) -> tuple[int, dict[str, str], bytes]:
    """One request as written (no client library shortens or refuses it); the server closes or the answer
    is complete (Content-Length)."""
    head = f"GET {target} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n"
    head += "".join(f"{name}: {value}\r\n" for name, value in headers.items()) + "\r\n"
    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
        sock.sendall(head.encode())
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
    top, _, body = answer.partition(b"\r\n\r\n")
    lines = top.decode("latin-1").split("\r\n")
    fields = dict(line.split(": ", 1) for line in lines[1:])
    return int(lines[0].split()[1]), {name.lower(): value for name, value in fields.items()}, body


TEN_UNKNOWN = "&".join(f"p{n}=" + "x" * 900 for n in range(10))


@pytest.mark.parametrize(("target", "headers", "status", "document"), [
    ("/api/v1/gpus/0/trend?minutes=" + "1" * LONG, {"Authorization": GOOD}, 400,
     {"error": "the request line is longer than 8190 bytes", "parameter": "minutes"}),
    ("/api/v1/gpus/0/trend?" + TEN_UNKNOWN, {"Authorization": GOOD}, 400,
     {"error": "the request line is longer than 8190 bytes", "parameter": "p0"}),
    ("/api/gpu/status?gpu_id=" + "0" * LONG, {"Authorization": GOOD}, 400,
     {"success": False, "error": "the request line is longer than 8190 bytes", "parameter": "gpu_id"}),
    ("/api/v1/gpus", {"Authorization": GOOD, "X-Long": "1" * LONG}, 400,
     {"error": "a request header is longer than 8190 bytes"}),
    ("/api/v1/gpus/0/trend?minutes=5", {}, 401, {"error": "unauthorized"}),
    ("/api/gpu/status?gpu_id=0", {"Authorization": basic("prometheus", "wrong")}, 401,
     {"success": False, "error": "unauthorized"}),
    ("/api/v1/gpus/0/trend?minutes=" + "1" * 5000, {"Authorization": GOOD}, 400,
     {"error": "minutes: at most 60 (the history kept) (got '" + "1" * 40 + "')", "parameter": "minutes"}),
    ("/api/gpu/status?gpu_id=0%0A", {"Authorization": GOOD}, 400,
     {"success": False, "error": "gpu_id: expected a GPU index such as 0 or 3 (got '0\\n')",
      "parameter": "gpu_id"}),
], ids=["long-minutes", "ten-long-unknown", "long-gpu-id", "long-header", "no-credentials",
        "wrong-password-quickstart", "minutes-overflow", "gpu-id-line-end"])
def test_every_4xx_under_api_is_json_naming_the_parameter(port: int, target: str, headers: dict[str, str],
                                                           status: int, document: dict[str, object]) -> None:
    got, fields, body = exchange(port, target, headers)
    assert got == status, body[:200]
    assert fields["content-type"] == "application/json"
    assert json.loads(body) == document
    assert fields["x-content-type-options"] == "nosniff"  # the web config's headers, on refusals too
    assert ("www-authenticate" in fields) is (status == 401)


def test_other_paths_keep_a_plain_text_line(port: int) -> None:
    got, fields, body = exchange(port, "/metrics?x=" + "1" * LONG, {"Authorization": GOOD})
    assert (got, fields["content-type"], body) == (400, "text/plain; charset=utf-8",
                                                   b"the request line is longer than 8190 bytes\n")
    got, fields, body = exchange(port, "/metrics", {})
    assert (got, fields["content-type"], body) == (401, "text/plain; charset=utf-8", b"unauthorized\n")


def test_too_many_failures_is_a_json_429_with_retry_after(port: int) -> None:
    for n in range(5):
        assert exchange(port, "/api/v1/gpus", {"Authorization": basic("prometheus", f"guess-{n}")})[0] == 401
    got, fields, body = exchange(port, "/api/gpu/status", {"Authorization": basic("prometheus", "guess")})
    assert (got, fields["content-type"]) == (429, "application/json")
    assert json.loads(body)["success"] is False and int(fields["retry-after"]) >= 1
