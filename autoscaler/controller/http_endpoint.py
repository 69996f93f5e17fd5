"""The controller's HTTP endpoint: /metrics (its private registry), /healthz (liveness), /readyz (readiness).

Served by the shared server of plumbing/web (aiohttp, one event-loop thread, TLS and basic auth from a
`--web-config-file`): prometheus_client's own server has no health route, and the probes must ask the
controller (liveness: the sync loop is alive; readiness: and a first sync completed). The probes answer on
the event loop, never queued behind scrapes, and without basic auth so the kubelet can call them. Binding
happens in the constructor, so a busy or forbidden port raises ListenError before anything starts.
"""

from __future__ import annotations

from collections.abc import Callable

from prometheus_client import CONTENT_TYPE_LATEST

from plumbing.web import WebConfig
from plumbing.web.server import Answer, HttpServer, Route, ServerSettings

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
        web_config: WebConfig | None = None,
    ) -> None:
        routes = {
            "/metrics": Route(lambda _: Answer(200, exposition(), CONTENT_TYPE_LATEST)),
            "/healthz": Route(_probe(health), blocking=False, public=True),
            "/readyz": Route(_probe(readiness or health), blocking=False, public=True),
        }
        self._server = HttpServer(host, port, routes, ServerSettings(name="metrics-http"), web_config,
                                  not_found=b"not found: try /metrics, /healthz or /readyz\n")

    @property
    def port(self) -> int:
        return self._server.port

    @property
    def scheme(self) -> str:
        return self._server.scheme

    def start(self) -> MetricsServer:
        self._server.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()


def _probe(check: Probe) -> Callable[[object], Answer]:
    def answer(_: object) -> Answer:
        ok, message = check()
        return Answer(200 if ok else 503, (message + "\n").encode())

    return answer
