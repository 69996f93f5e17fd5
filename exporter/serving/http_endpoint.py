"""The exporter's HTTP endpoints: /metrics (Prometheus text or OpenMetrics, gzip when asked; rendered once
per sweep and served as bytes between sweeps, see exporter/serving/exposition.py), /healthz,
/readyz, and the JSON status API under /api/v1/ (answered by an injected `ApiHandler`, see
exporter/serving/status_service.py), served by the shared server of plumbing/web (aiohttp; TLS and basic
auth from a `--web-config-file`).

/healthz is liveness: 200 while the process serves HTTP, whatever NVML does, so a node without a driver
never crash-loops the DaemonSet. /readyz is 200 once the server serves and the first NVML init attempt has
been made, whatever its outcome (the body says `nvml up` or `nvml down: <reason>`): a driverless node's pod
must still become Ready, or scrapes through Service endpoints never collect its `gpu_exporter_nvml_up 0`.
Alert on gpu_exporter_nvml_up, not on readiness. Both probes answer on the event loop, never queued behind a
slow NVML sweep, and without basic auth (they reveal nothing), so the kubelet can probe them.

Only GET and HEAD are served (`status_api.ALLOWED_METHODS`). Any other method gets 405 with
`Allow: GET, HEAD`: JSON from the status API on /api/v1/..., one plain-text line on the other paths (an
unknown path stays 404). A request body up to 64 KiB is read and dropped, so a keep-alive connection stays in
step; a larger or chunked one is not read: the answer says `Connection: close` and the connection closes.
The listen address may be IPv4 or IPv6 (`::`, `::1`).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from typing import Any, Protocol

from prometheus_client import CollectorRegistry

from exporter.errors import ServeError
from exporter.serving.exposition import Exposition, StateKey
from exporter.serving.status_api import API_PREFIX, QUICKSTART_PATH, encode, refusal
from plumbing.web import WebConfig
from plumbing.web.server import (
    PLAIN,
    Answer,
    HttpServer,
    ListenError,
    Refusal,
    Request,
    Route,
    ServerSettings,
)

# (path without query, raw query string, method) -> (HTTP status, JSON body)
ApiHandler = Callable[[str, str, str], tuple[int, dict[str, Any]]]

log = logging.getLogger(__name__)

DEFAULT_HANDLER_TIMEOUT_SECONDS = 30.0
"""Idle keep-alive and request-body timeout; the request head has min(this, 10 s)."""
API_LINKS = ("/api/v1/gpus", QUICKSTART_PATH)
"""The JSON API's entry points the home page links (each GPU's and trend pages are linked from there)."""


def home_page(paths: Sequence[str]) -> bytes:
    """The page at `/`: a link to each endpoint the server answers, so a browser finds them all."""
    links = "".join(f"<li><a href='{path}'>{path}</a></li>" for path in paths)
    return f"<html><body><h1>gpu-exporter</h1><ul>{links}</ul></body></html>\n".encode()


class Readiness(Protocol):
    @property
    def ready(self) -> bool: ...

    @property
    def init_attempted(self) -> bool: ...

    @property
    def nvml_error(self) -> str | None: ...


class ExporterServer:
    """Binds at construction (so a port in use fails before anything starts), serves in a thread.

    `state` keys the rendered /metrics body (see exporter/serving/exposition.py); without it every scrape
    renders."""

    def __init__(self, address: str, port: int, registry: CollectorRegistry, readiness: Readiness,
                 api: ApiHandler | None = None,
                 handler_timeout_seconds: float = DEFAULT_HANDLER_TIMEOUT_SECONDS,
                 web_config: WebConfig | None = None, state: StateKey | None = None) -> None:
        self.exposition = Exposition(registry, state)
        self._readiness = readiness
        self._api = api
        self._failures = 0
        self._failures_lock = threading.Lock()
        routes = {
            "/metrics": Route(self._metrics),
            "/healthz": Route(lambda _: Answer(200, b"ok\n"), blocking=False, public=True),
            "/readyz": Route(self._readyz, blocking=False, public=True),
        }
        if api is not None:
            routes[API_PREFIX] = Route(self._api_answer, any_method=True, prefix=True, refusals=_api_refusal)
        home = home_page([path for path in routes if path != API_PREFIX] + list(API_LINKS if api else ()))
        routes["/"] = Route(lambda _: Answer(200, home, "text/html; charset=utf-8"), blocking=False)
        settings = ServerSettings(idle_timeout=handler_timeout_seconds, body_timeout=handler_timeout_seconds,
                                  header_timeout=min(handler_timeout_seconds, 10.0), name="exporter-http",
                                  workers=2)  # scrapes share one NVML sweep; a second thread serves the API
        try:
            self._server = HttpServer(address, port, routes, settings, web_config)
        except ListenError as exc:
            raise ServeError(str(exc)) from exc

    @property
    def port(self) -> int:
        return self._server.port

    @property
    def address(self) -> str:
        return self._server.address

    @property
    def scheme(self) -> str:
        return self._server.scheme

    @property
    def scrape_failures(self) -> int:
        return self._failures

    def start(self) -> None:
        """Serve in a background thread."""
        self._server.start()

    def shutdown(self) -> None:
        """Stop serving and close the socket; safe to call whether or not serving started."""
        self._server.shutdown()

    def _readyz(self, request: Request) -> Answer:
        readiness = self._readiness
        if not readiness.init_attempted:
            return Answer(503, b"not ready: NVML init not attempted yet\n")
        if readiness.ready:
            return Answer(200, b"ready: nvml up\n")
        reason = readiness.nvml_error or "NVML not answering"
        return Answer(200, f"ready: nvml down: {reason}\n".encode())

    def _metrics(self, request: Request) -> Answer:
        want_gzip = "gzip" in request.headers.get("Accept-Encoding", "")
        try:
            body, content_type = self.exposition.body(request.headers.get("Accept", ""), want_gzip)
        except Exception:  # the one broad handler: a collector bug must not kill the server
            with self._failures_lock:
                self._failures += 1
                failures = self._failures
            if failures == 1 or failures % 100 == 0:
                log.exception("scrape failed (%d so far)", failures)
            return Answer(500, b"scrape failed; see the exporter log\n", PLAIN)
        if want_gzip:
            return Answer(200, body, content_type, {"Content-Encoding": "gzip"})
        return Answer(200, body, content_type)

    def _api_answer(self, request: Request) -> Answer:
        assert self._api is not None
        try:
            status, document = self._api(request.path, request.query, request.method)
        except Exception:  # a bug in the API must not kill the server; /metrics keeps working
            log.exception("status API request %s failed", request.path)
            status, document = 500, {"error": "internal error; see the exporter log"}
        return _json(status, document)


def _api_refusal(path: str, refused: Refusal) -> Answer:
    """The server's own 400, 401 and 429 under /api/ in the API's JSON (status_api.refusal)."""
    return _json(*refusal(path, refused.status, refused.message, refused.parameter))


def _json(status: int, document: dict[str, Any]) -> Answer:
    return Answer(status, encode(document) + b"\n", "application/json")
