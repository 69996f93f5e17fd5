"""The engine's inputs: a rule (target, bounds, metrics, HPA `behavior`, fallback), frozen and trusted.

The policy package owns these types because it is what consumes them; `autoscaler.rules` (the YAML loader)
only builds and validates them. Defaults are the autoscaling/v2 HPA API's.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

__all__ = [
    "DEFAULT_BEHAVIOR", "DEFAULT_SCALE_DOWN", "DEFAULT_SCALE_UP", "DEFAULT_TOLERANCE", "Behavior", "Fallback",
    "MetricSpec", "MetricType", "PolicyType", "Rule", "ScalingPolicy", "ScalingRules", "Schedule",
    "SelectPolicy", "TargetKind", "TargetRef",
]

PolicyType = Literal["Pods", "Percent"]
SelectPolicy = Literal["Max", "Min", "Disabled"]
MetricType = Literal["Average", "Total"]
TargetKind = Literal["Deployment", "StatefulSet"]

DEFAULT_TOLERANCE = 0.1  # kube-controller-manager --horizontal-pod-autoscaler-tolerance


@dataclass(frozen=True, slots=True)
class ScalingPolicy:
    """At most `value` pods (Pods) or percent (Percent) of change per `period_seconds`."""

    type: PolicyType
    value: int
    period_seconds: int


@dataclass(frozen=True, slots=True)
class ScalingRules:
    """One direction of the HPA `behavior` block."""

    stabilization_window_seconds: int
    select_policy: SelectPolicy
    tolerance: float
    policies: tuple[ScalingPolicy, ...]

    @property
    def longest_period_seconds(self) -> int:
        return max((p.period_seconds for p in self.policies), default=0)


@dataclass(frozen=True, slots=True)
class Behavior:
    """The HPA `behavior` block: how fast each direction may move and how long it waits."""

    scale_up: ScalingRules
    scale_down: ScalingRules


DEFAULT_SCALE_UP = ScalingRules(0, "Max", DEFAULT_TOLERANCE, (ScalingPolicy("Pods", 4, 15),
                                                              ScalingPolicy("Percent", 100, 15)))
DEFAULT_SCALE_DOWN = ScalingRules(300, "Max", DEFAULT_TOLERANCE, (ScalingPolicy("Percent", 100, 15),))
DEFAULT_BEHAVIOR = Behavior(DEFAULT_SCALE_UP, DEFAULT_SCALE_DOWN)


@dataclass(frozen=True, slots=True)
class MetricSpec:
    """One PromQL query that must return exactly one number, and the value it should settle at.

    Average: the query returns the mean per replica, `target` is that mean (HPA Pods metric, External
    target.value, KEDA metricType Value). Total: the query returns a total for the whole service, `target` is
    per replica (HPA External target.averageValue, KEDA AverageValue).
    """

    name: str
    query: str
    type: MetricType
    target: float
    line: int = 0  # line of the metric in its file, for messages (an addition to the contract; defaulted)


@dataclass(frozen=True, slots=True)
class TargetRef:
    """The workload a rule scales, through its scale subresource; the history follows it across edits."""

    kind: TargetKind
    namespace: str
    name: str

    def __str__(self) -> str:
        return f"{self.kind}/{self.namespace}/{self.name}"


@dataclass(frozen=True, slots=True)
class Fallback:
    """KEDA-style: after more than `failure_threshold` syncs with every metric failed, go to `replicas`."""

    failure_threshold: int
    replicas: int


@dataclass(frozen=True, slots=True)
class Schedule:
    """A recurring window (KEDA's cron scaler): from each `cron` fire time in `timezone`, for
    `duration_seconds`, `min_replicas` (and `max_replicas` when given) replace the rule's bounds.

    Only data here: the engine never evaluates cron (that needs calendars and time zones, a job for
    `autoscaler.schedules`); the caller passes the bounds in effect at `now`.
    """

    cron: str
    timezone: str
    duration_seconds: int
    min_replicas: int
    max_replicas: int | None
    line: int = 0  # line of the schedule in its file, for messages

    def __str__(self) -> str:
        return f"{self.cron!r} {self.timezone}"


@dataclass(frozen=True, slots=True)
class Rule:
    """One autoscaled workload: everything `decide()` needs besides the observations, history and `now`."""

    name: str
    target: TargetRef
    min_replicas: int
    max_replicas: int
    metrics: tuple[MetricSpec, ...]
    behavior: Behavior
    fallback: Fallback | None
    line: int  # line of the rule in its file, for messages
    prometheus: str = "default"
    """Name of the endpoint (in --prometheus-config) its queries go to."""
    schedules: tuple[Schedule, ...] = ()
    """Windows that replace min/maxReplicas while open; none (the default) is the plain HPA."""
