"""How long a new replica of the target takes to serve, measured from its recorded history: what `tune`
counts as start-up when no `--startup-seconds` is given.

A scale-up shows in kube-state-metrics as the workload's spec count rising; its replicas serve once the ready
count reaches the new spec. The start-up of one scale-up is the time between the first sample showing the rise
and the first showing enough ready replicas. Scale-ups that overlap an earlier one's loading are counted with
that one; one cut short (a scale-down, a gap in the series, the end of the range) is not counted. The median
over the scale-ups is the measure, robust to a replica that hung on an image pull.

Pure: the queries are built here, fetched by the caller (`autoscaler/cli/tune.py`).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping
from dataclasses import dataclass

from autoscaler.policy import TargetRef

__all__ = ["StartupMeasure", "measure_startup", "startup_queries"]

_SERIES = {
    "Deployment": ("kube_deployment_spec_replicas", "kube_deployment_status_replicas_ready", "deployment"),
    "StatefulSet": ("kube_statefulset_replicas", "kube_statefulset_status_replicas_ready", "statefulset"),
}
"""kube-state-metrics' spec and ready counts of the kinds it knows, and the label naming the workload."""


@dataclass(frozen=True, slots=True)
class StartupMeasure:
    """The median start-up over `scale_ups` measured scale-ups."""

    seconds: float
    scale_ups: int


def startup_queries(target: TargetRef) -> tuple[str, str] | None:
    """The PromQL of the target's spec and ready replica counts (kube-state-metrics), or None for a kind it
    does not export. `max` keeps one series when two kube-state-metrics replicas are scraped."""
    series = _SERIES.get(target.kind) if target.api_version == "apps/v1" else None
    if series is None:
        return None
    spec, ready, label = series
    selector = f'{{namespace="{target.namespace}",{label}="{target.name}"}}'
    return f"max({spec}{selector})", f"max({ready}{selector})"


def _count(value: float | None) -> float | None:
    """A replica count, or None for a missing or impossible sample (a gap: nothing is measured across it)."""
    return value if value is not None and math.isfinite(value) and value >= 0 else None


def measure_startup(spec: Mapping[float, float | None], ready: Mapping[float, float | None],
                    ) -> StartupMeasure | None:
    """The median time from a rise of the spec count to enough ready replicas; None if no scale-up was
    measured."""
    durations: list[float] = []
    rise: tuple[float, float] | None = None  # (when the rise showed, the count it asked for)
    previous: float | None = None
    for t in sorted(set(spec) | set(ready)):
        wanted, serving = _count(spec.get(t)), _count(ready.get(t))
        if wanted is None or serving is None:
            rise, previous = None, None
            continue
        if rise is not None:
            if serving >= rise[1]:
                durations.append(t - rise[0])
                rise = None
            elif wanted < rise[1]:  # scaled down before it served: not a start-up
                rise = None
        if rise is None and previous is not None and wanted > previous and serving < wanted:
            rise = (t, wanted)
        previous = wanted
    if not durations:
        return None
    return StartupMeasure(statistics.median(durations), len(durations))
