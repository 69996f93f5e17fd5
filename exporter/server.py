"""The HTTP server: /metrics (Prometheus text or OpenMetrics, gzip when asked), /healthz, /readyz, and the
JSON status API under /api/v1/ (answered by an injected `ApiHandler`, see exporter/status_service.py).

/healthz is liveness: 200 while the process serves HTTP, whatever NVML does, so a node without a driver
never crash-loops the DaemonSet. /readyz is 200 once the server serves and the first NVML init attempt has
been made, whatever its outcome (the body says `nvml up` or `nvml down: <reason>`): a driverless node's pod
must still become Ready, or scrapes through Service endpoints never collect its `gpu_exporter_nvml_up 0`.
Alert on gpu_exporter_nvml_up, not on readiness.

Only GET and HEAD are served (`status_api.ALLOWED_METHODS`). Any other method gets 405 with
`Allow: GET, HEAD`: JSON from the status API on /api/v1/..., one plain-text line on the other paths (an
unknown path stays 404). BaseHTTPRequestHandler would answer an HTML 501 for a method without a `do_*`.
A request body is read and dropped when it is small (up to MAX_DISCARDED_BODY_BYTES), so a keep-alive
connection stays in step; a larger, chunked or malformed one is not read at all: the answer says
`Connection: close` and the connection is closed, so no handler waits for bytes it does not need.

The listen address may be IPv4 or IPv6 (`::`, `::1`): the family comes from getaddrinfo. Each connection
has a socket timeout, so an idle keep-alive client does not hold a handler thread forever.
"""

from __future__ import annotations

import gzip
import logging
import socket
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Protocol

from prometheus_client import CollectorRegistry
from prometheus_client.exposition import choose_encoder

from exporter.errors import ServeError
from exporter.status_api import ALLOWED_METHODS, API_PREFIX, encode

# (path without query, raw query string, method) -> (HTTP status, JSON body)
ApiHandler = Callable[[str, str, str], tuple[int, dict[str, Any]]]

log = logging.getLogger(__name__)


DEFAULT_HANDLER_TIMEOUT_SECONDS = 30.0
# A request body up to this size is read and dropped (nothing here takes one); a larger one closes the
# connection instead of being read.
MAX_DISCARDED_BODY_BYTES = 64 * 1024
ALLOW = ", ".join(ALLOWED_METHODS)
_PLAIN = "text/plain; charset=utf-8"
_PATHS = frozenset({"/metrics", "/healthz", "/readyz", "/"})


class Readiness(Protocol):
    @property
    def ready(self) -> bool: ...

    @property
    def init_attempted(self) -> bool: ...

    @property
    def nvml_error(self) -> str | None: ...


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    registry: CollectorRegistry
    readiness: Readiness
    scrape_failures: int
    failures_lock: threading.Lock
    handler_timeout: float
    api: ApiHandler | None


class _Server6(_Server):
    address_family = socket.AF_INET6


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    protocol_version = "HTTP/1.1"

    def setup(self) -> None:
        self.timeout = self.server.handler_timeout  # read by StreamRequestHandler.setup: settimeout
        super().setup()

    def __getattr__(self, name: str) -> Any:
        """`do_<METHOD>` for every method but GET and HEAD, so each gets our 405 rather than a 501 page."""
        if name.startswith("do_"):
            return self._not_allowed
        raise AttributeError(name)

    def _not_allowed(self) -> None:
        self._drop_body()
        path, _, query = self.path.partition("?")
        if path.startswith(API_PREFIX) and self.server.api is not None:
            self._api(path, query)  # the API answers 405 for its resources, 404 for unknown ones
        elif path in _PATHS:
            body = f"method {self.command} not allowed on {path}; use {' or '.join(ALLOWED_METHODS)}\n"
            self._send(405, body.encode(), _PLAIN)
        else:
            self._send(404, b"not found\n", _PLAIN)

    def _drop_body(self) -> None:
        """Read and drop a small request body; for anything else, close the connection after the answer."""
        length = self.headers.get("Content-Length")
        if self.headers.get("Transfer-Encoding") is not None:
            self.close_connection = True
        elif length is not None:
            size = int(length) if length.strip().isascii() and length.strip().isdigit() else -1
            if not 0 <= size <= MAX_DISCARDED_BODY_BYTES:
                self.close_connection = True
            elif size:
                try:
                    self.rfile.read(size)
                except OSError:  # the client stopped sending (socket timeout) or went away
                    self.close_connection = True

    def do_GET(self) -> None:
        self._drop_body()
        path, _, query = self.path.partition("?")
        if path.startswith(API_PREFIX) and self.server.api is not None:
            self._api(path, query)
        elif path == "/metrics":
            self._metrics()
        elif path == "/healthz":
            self._send(200, b"ok\n", "text/plain; charset=utf-8")
        elif path == "/readyz":
            self._readyz()
        elif path == "/":
            body = b"<html><body><h1>gpu-exporter</h1><a href='/metrics'>/metrics</a></body></html>\n"
            self._send(200, body, "text/html; charset=utf-8")
        else:
            self._send(404, b"not found\n", "text/plain; charset=utf-8")

    def _readyz(self) -> None:
        readiness = self.server.readiness
        if not readiness.init_attempted:
            self._send(503, b"not ready: NVML init not attempted yet\n", "text/plain; charset=utf-8")
        elif readiness.ready:
            self._send(200, b"ready: nvml up\n", "text/plain; charset=utf-8")
        else:
            reason = readiness.nvml_error or "NVML not answering"
            self._send(200, f"ready: nvml down: {reason}\n".encode(), "text/plain; charset=utf-8")

    def _metrics(self) -> None:
        encoder, content_type = choose_encoder(self.headers.get("Accept", ""))
        try:
            body = encoder(self.server.registry)
        except Exception:  # the one broad handler: a collector bug must not kill the server
            with self.server.failures_lock:
                self.server.scrape_failures += 1
                failures = self.server.scrape_failures
            if failures == 1 or failures % 100 == 0:
                log.exception("scrape failed (%d so far)", failures)
            self._send(500, b"scrape failed; see the exporter log\n", "text/plain; charset=utf-8")
            return
        encoding = None
        if "gzip" in self.headers.get("Accept-Encoding", ""):
            body = gzip.compress(body, compresslevel=1)
            encoding = "gzip"
        self._send(200, body, content_type, encoding)

    def _api(self, path: str, query: str) -> None:
        api = self.server.api
        assert api is not None
        try:
            status, document = api(path, query, self.command)
        except Exception:  # a bug in the API must not kill the server; /metrics keeps working
            log.exception("status API request %s failed", path)
            status, document = 500, {"error": "internal error; see the exporter log"}
        self._send(status, encode(document) + b"\n", "application/json")

    def _send(self, status: int, body: bytes, content_type: str, encoding: str | None = None) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        if encoding:
            self.send_header("Content-Encoding", encoding)
        if status == 405:
            self.send_header("Allow", ALLOW)
        if self.close_connection:
            self.send_header("Connection", "close")
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    do_HEAD = do_GET

    def log_message(self, format: str, *args: object) -> None:
        log.debug("%s " + format, self.address_string(), *args)


class ExporterServer:
    """Binds at construction (so a port in use fails before anything starts), serves in a thread."""

    def __init__(self, address: str, port: int, registry: CollectorRegistry, readiness: Readiness,
                 api: ApiHandler | None = None,
                 handler_timeout_seconds: float = DEFAULT_HANDLER_TIMEOUT_SECONDS) -> None:
        shown = f"[{address}]:{port}" if ":" in address else f"{address}:{port}"
        try:
            family = socket.getaddrinfo(address or None, port, type=socket.SOCK_STREAM,
                                        flags=socket.AI_PASSIVE)[0][0]
            server_class = _Server6 if family == socket.AF_INET6 else _Server
            server = server_class((address, port), _Handler)
        except socket.gaierror as exc:
            raise ServeError(f"cannot listen on {shown}: {exc.strerror or exc}") from exc
        except OSError as exc:
            raise ServeError(f"cannot listen on {shown}: {exc.strerror or exc}") from exc
        server.registry = registry
        server.readiness = readiness
        server.scrape_failures = 0
        server.failures_lock = threading.Lock()
        server.handler_timeout = handler_timeout_seconds
        server.api = api
        self._server = server
        self._thread: threading.Thread | None = None
        self._serving = threading.Event()

    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    @property
    def scrape_failures(self) -> int:
        return self._server.scrape_failures

    @property
    def address(self) -> str:
        return str(self._server.server_address[0])

    def serve_forever(self) -> None:
        self._serving.set()
        self._server.serve_forever(poll_interval=0.2)

    def start(self) -> None:
        """Serve in a background thread (tests, the demo)."""
        self._thread = threading.Thread(target=self.serve_forever, name="exporter-http", daemon=True)
        self._thread.start()

    def shutdown(self) -> None:
        """Stop serving and close the socket; safe to call whether or not serving started."""
        if self._serving.is_set():
            self._server.shutdown()
            self._serving.clear()
        self._server.server_close()
        if self._thread is not None:
            self._thread.join(5)
            self._thread = None
