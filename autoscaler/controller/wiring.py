"""Process wiring: the Prometheus runners and the Controller that `run`, `status` and the demo each build, and
`run`'s /metrics, /healthz and /readyz endpoint over that controller.

The three differ only in what they pass (the scale backend, the query budget, the controller settings, the
metrics, an endpoint); building and closing live here so a new resource (a pool, a session) is opened and
closed in one place instead of three, and a process that fails half-way (a busy /metrics port) closes what
was built. The demo serves its metrics itself: its Prometheus must know their port before the controller
exists.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from types import TracebackType

from autoscaler.config.rules import RuleSet
from autoscaler.controller.http_endpoint import MetricsServer
from autoscaler.controller.loop import Controller, ControllerSettings
from autoscaler.controller.self_metrics import ControllerMetrics
from autoscaler.kube.backend import ScaleBackend
from plumbing.prometheus.config import PrometheusConfig
from plumbing.prometheus.runner import PromQLRunner, PromQLSettings, runners
from plumbing.web import WebConfig


@dataclass(frozen=True)
class Endpoint:
    """Where `run` serves /metrics, /healthz and /readyz."""

    port: int
    interval: float
    """The sync interval, seconds: the probes call the loop stuck after 3 of them without progress."""
    host: str = "0.0.0.0"
    web_config: WebConfig | None = None
    """TLS and basic auth (--web-config-file); None: plain HTTP."""


@dataclass
class Wiring:
    """The controller, the runners it queries and its endpoint; `close()` (or leaving the `with`) shuts them
    down."""

    controller: Controller
    sources: dict[str, PromQLRunner] = field(default_factory=dict)
    """One runner per Prometheus endpoint name, as the controller routes rules to them."""
    server: MetricsServer | None = None
    """/metrics, /healthz and /readyz, serving until `close()` (None: no endpoint asked for)."""

    def close(self) -> None:
        """Controller first: its pools may still be waiting on a runner's answer; the endpoint last, so the
        probes answer while the loop winds down."""
        self.controller.close()
        for runner in self.sources.values():
            runner.close()
        if self.server is not None:
            self.server.stop()

    def __enter__(self) -> Wiring:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        self.close()


def wire(
    rules: RuleSet,
    backend: ScaleBackend,
    prometheus: PrometheusConfig,
    queries: PromQLSettings,
    settings: ControllerSettings | None = None,
    *,
    metrics: ControllerMetrics | None = None,
    is_leader: Callable[[], bool] = lambda: True,
    clock: Callable[[], float] = time.time,
    endpoint: Endpoint | None = None,
) -> Wiring:
    """A runner per endpoint of `prometheus` (each with `queries`, its url replaced by the endpoint's), a
    Controller over them and `backend`, and with `endpoint` its HTTP endpoint, started; the caller owns the
    result and closes it. A port that cannot be served raises ListenError, everything built closed."""
    sources = runners(prometheus, queries)
    try:
        controller = Controller(backend, sources, rules, clock, settings=settings, metrics=metrics,
                                is_leader=is_leader)
    except BaseException:
        for runner in sources.values():
            runner.close()
        raise
    wiring = Wiring(controller, sources)
    if endpoint is not None:
        try:
            wiring.server = _serve(controller, endpoint)
        except BaseException:
            wiring.close()
            raise
    return wiring


def _serve(controller: Controller, endpoint: Endpoint) -> MetricsServer:
    """The controller's metrics; liveness: the loop alive; readiness: and a first sync completed."""

    def alive() -> tuple[bool, str]:
        health = controller.health(endpoint.interval)
        return health.alive, health.message

    def ready() -> tuple[bool, str]:
        health = controller.health(endpoint.interval)
        return health.ready, health.message

    return MetricsServer(controller.metrics.exposition, alive, endpoint.port, endpoint.host, readiness=ready,
                         web_config=endpoint.web_config).start()
