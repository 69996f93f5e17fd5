"""What an overloaded minute is: one definition for `tune`, `simulate` and the benchmarks.

Documented once, in docs/rules.md#overloaded-minutes. A step is **overloaded** when the work the service
receives, in replicas' worth (1.0: one replica 100 % busy), is more than `OVERLOAD_LINE` (95 %) of what its
*ready* replicas serve: near saturation latency climbs steeply and requests queue. Replicas still loading
their model serve nothing; with work and no ready replica, the step is overloaded. Overloaded minutes are the
overloaded steps times the step.

The benchmarks know the work (their traces are in GPUs' worth). `tune` and `simulate` see only a rule's
metrics, so each metric's value is turned into work with what one replica serves, its target /
`busy_at_target`: the shipped rules' targets are what one replica serves at 90 % GPU (docs/benchmarks.md),
so a replica serves target / 0.9 at 100 %. A Total metric (the whole service's rate, a queue) is work as it
is; an Average metric's value is per reporting replica, times the replicas that reported it. The work is the
largest any metric gives (metrics without a value give none).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence

from autoscaler.policy import MetricObservation, MetricSpec

__all__ = ["BUSY_AT_TARGET", "OVERLOAD_LINE", "is_overloaded", "metric_work", "overloaded_minutes",
           "work_per_ready"]

OVERLOAD_LINE = 0.95
"""Overloaded above this share of what the ready replicas serve."""
BUSY_AT_TARGET = 0.9
"""The share of one replica's capacity a metric's target stands for (the shipped rules: 90 % GPU)."""


def work_per_ready(work: float, ready: int) -> float:
    """The work each ready replica carries (1.0: saturated); inf with work and no ready replica."""
    if ready <= 0:
        return math.inf if work > 0 else 0.0
    return work / ready


def is_overloaded(work: float, ready: int, line: float = OVERLOAD_LINE) -> bool:
    """Whether `ready` replicas would need to be busier than `line` to serve `work` (replicas' worth)."""
    return work_per_ready(work, ready) > line


def overloaded_minutes(per_ready: Iterable[float], step_seconds: float, line: float = OVERLOAD_LINE) -> float:
    """The minutes of the steps whose work per ready replica (`work_per_ready`) is above `line`."""
    return sum(1 for share in per_ready if share > line) * step_seconds / 60.0


def metric_work(specs: Sequence[MetricSpec], seen: Sequence[MetricObservation], reporting: int | None,
                busy_at_target: float = BUSY_AT_TARGET) -> float:
    """The work a rule's metrics say the service receives, in replicas' worth (see the module docstring).

    `reporting`: the replicas an Average metric's value is the mean over (None: one). The specs give the
    targets: `tune` passes the current rule's, so a candidate cannot hide overload behind a higher target.
    """
    work = 0.0
    for spec, observation in zip(specs, seen, strict=True):
        if observation.value is None or not spec.target > 0:
            continue
        replicas = observation.value / (spec.target / busy_at_target)
        if spec.type == "Average":
            replicas *= max(reporting if reporting is not None else 1, 1)
        work = max(work, replicas)
    return work
