"""`gpu-fleet status` keeps its memory bounded whatever Prometheus sends: each instant answer is size-checked
as it streams (8 MiB), the answers of one command together (32 MiB), and a large answer is parsed while no
other is. Run as the installed command, its peak resident memory (tests/measure.py) stays under 256 MiB: an
endless answer, answers that each fit but together do not, and a fleet of 25,000 GPUs that is served."""

from __future__ import annotations

import json
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from tests.measure import run_measured

pytestmark = pytest.mark.integration

FLEET = str(Path(sys.executable).parent / "gpu-fleet")
MAX_RSS_MIB = 256


def vector(series: int) -> bytes:
    return json.dumps({"status": "success", "data": {"resultType": "vector", "result": [
        {"metric": {"node": f"node-{i // 8}", "uuid": f"GPU-{i:08d}", "gpu": str(i % 8)}, "value": [1, "0.5"]}
        for i in range(series)]}}).encode()


def serving(body: bytes | None) -> Iterator[str]:
    """Every query answered with `body`; None: an endless answer without Content-Length."""

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.0"

        def do_GET(self) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            if body is not None:
                self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            try:
                if body is not None:
                    self.wfile.write(body)
                    return
                self.wfile.write(b'{"status": "success", "data": {"resultType": "vector", "result": [')
                chunk = b'{"metric": {}, "value": [1, "1"]}, ' * 2000
                for _ in range(2000):  # ~140 MB, bounded
                    self.wfile.write(chunk)
            except OSError:  # the client stopped reading
                return

        def log_message(self, format: str, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


@pytest.mark.parametrize(("series", "code", "expected"), [
    (None, 2, "larger than"),  # one answer past 8 MiB, or the 11 together past 32 MiB first
    (85_000, 2, "the answers together are larger than 33,554,432 bytes"),
    (25_000, 0, "node-3124"),
], ids=["endless", "each-fits-not-together", "25000-gpus"])
def test_status_stays_under_256_mib(series: int | None, code: int, expected: str, tmp_path: Path) -> None:
    for url in serving(None if series is None else vector(series)):
        result = run_measured([FLEET, "status", "--prometheus", url, "--query-timeout", "60s"], tmp_path,
                              timeout=120)
    assert result.returncode == code, result.output[-2000:]
    assert expected in result.output and "Traceback" not in result.output, result.output[-2000:]
    assert result.max_rss_mib < MAX_RSS_MIB, f"{result.max_rss_mib:.0f} MiB"
