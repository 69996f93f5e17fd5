"""Process wiring: the Prometheus runners and the Controller that `run`, `status` and the demo each build.

The three differ only in what they pass (the scale backend, the query budget, the controller settings, the
metrics); building and closing live here so a new resource (a pool, a session) is opened and closed in one
place instead of three, and a process that fails half-way (a busy /metrics port) closes what was built.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from types import TracebackType

from autoscaler.config.rules import RuleSet
from autoscaler.controller.loop import Controller, ControllerSettings
from autoscaler.controller.self_metrics import ControllerMetrics
from autoscaler.kube.backend import ScaleBackend
from plumbing.prometheus.config import PrometheusConfig
from plumbing.prometheus.runner import PromQLRunner, PromQLSettings, runners


@dataclass
class Wiring:
    """The controller and the runners it queries; `close()` (or leaving the `with`) shuts both down."""

    controller: Controller
    sources: dict[str, PromQLRunner] = field(default_factory=dict)
    """One runner per Prometheus endpoint name, as the controller routes rules to them."""

    def close(self) -> None:
        """Controller first: its pools may still be waiting on a runner's answer."""
        self.controller.close()
        for runner in self.sources.values():
            runner.close()

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
) -> Wiring:
    """A runner per endpoint of `prometheus` (each with `queries`, its url replaced by the endpoint's) and a
    Controller over them and `backend`; the caller owns the result and closes it."""
    sources = runners(prometheus, queries)
    try:
        controller = Controller(backend, sources, rules, clock, settings=settings, metrics=metrics,
                                is_leader=is_leader)
    except BaseException:
        for runner in sources.values():
            runner.close()
        raise
    return Wiring(controller, sources)
