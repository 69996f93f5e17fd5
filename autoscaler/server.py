"""The controller's HTTP endpoint: /metrics (its private registry), /healthz (liveness), /readyz (readiness).

A plain ThreadingHTTPServer in a daemon thread: prometheus_client's own server has no health route, and the
probes must ask the controller (liveness: the sync loop is alive; readiness: and a first sync completed).
Binding happens in the constructor, so a busy or forbidden port raises OSError before anything starts.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from prometheus_client import CONTENT_TYPE_LATEST

log = logging.getLogger(__name__)

_TEXT = "text/plain; charset=utf-8"


Probe = Callable[[], tuple[bool, str]]
"""A health check: (ok, one line saying why) -> 200 or 503 with that line."""


class MetricsServer:
    """Serves `exposition()` on /metrics, `health()` on /healthz and `readiness()` (default: `health`) on
    /readyz."""

    def __init__(
        self,
        exposition: Callable[[], bytes],
        health: Probe,
        port: int,
        host: str = "0.0.0.0",
        readiness: Probe | None = None,
    ) -> None:
        handler = _handler(exposition, {"/healthz": health, "/readyz": readiness or health})
        self._server = ThreadingHTTPServer((host, port), handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, args=(0.1,), name="metrics-http",
                                        daemon=True)

    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    def start(self) -> MetricsServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()


def _handler(exposition: Callable[[], bytes], probes: dict[str, Probe]) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            path = self.path.split("?", 1)[0]
            if path == "/metrics":
                self._answer(200, exposition(), CONTENT_TYPE_LATEST)
            elif path in probes:
                ok, message = probes[path]()
                self._answer(200 if ok else 503, (message + "\n").encode(), _TEXT)
            else:
                self._answer(404, b"not found: try /metrics, /healthz or /readyz\n", _TEXT)

        def _answer(self, status: int, body: bytes, content_type: str) -> None:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:
            log.debug("http: " + format, *args)

    return Handler
