"""The engine's inputs: a rule (target, bounds, metrics, HPA `behavior`, fallback), frozen and trusted.

The policy package owns these types because it is what consumes them; `autoscaler.config.rules` (the YAML
loader) only builds and validates them. Defaults are the autoscaling/v2 HPA API's.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

__all__ = [
    "APPS_V1", "DEFAULT_BEHAVIOR", "DEFAULT_COOLDOWN_SECONDS", "DEFAULT_PENDING_GRACE_SECONDS",
    "DEFAULT_SCALE_DOWN", "DEFAULT_SCALE_UP", "DEFAULT_TOLERANCE", "Behavior", "Capacity", "Fallback",
    "MetricSpec", "MetricType", "PodDeletionCost", "PolicyType", "Rule", "ScalingPolicy", "ScalingRules",
    "Schedule", "SelectPolicy", "Slo", "SloMode", "TargetRef", "WhenEmpty",
]

PolicyType = Literal["Pods", "Percent"]
SelectPolicy = Literal["Max", "Min", "Disabled"]
MetricType = Literal["Average", "Total"]
WhenEmpty = Literal["fail", "zero"]
ForecastMode = Literal["scaleUp", "observe"]
SloMode = Literal["scale", "observe"]

DEFAULT_TOLERANCE = 0.1  # kube-controller-manager --horizontal-pod-autoscaler-tolerance
DEFAULT_COOLDOWN_SECONDS = 300  # KEDA's cooldownPeriod
DEFAULT_PENDING_GRACE_SECONDS = 300
"""How long a new replica may stay Pending as unschedulable before the capacity guard stops further scale-ups:
long enough for a cluster autoscaler to bring up a GPU node, short enough not to pile up Pending pods."""
APPS_V1 = "apps/v1"


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


DEFAULT_PANIC_WINDOW_SECONDS = 30
"""Knative's panic window is 6 s (10% of its 60 s stable window) over per-second samples; over Prometheus'
scrapes a rate needs two samples, so 30 s is the shortest window that works at the common 15 s interval."""
DEFAULT_PANIC_THRESHOLD_PERCENT = 200.0  # Knative's panic-threshold-percentage


@dataclass(frozen=True, slots=True)
class Panic:
    """Knative's panic mode: when some metric over the short `window_seconds` is at `threshold_percent` of its
    target or more, the rule scales up to that short window's proposal at once (no scale-up stabilization;
    bounds and policies still apply) and never scales down until the threshold has not been crossed for a
    scale-down stabilization window (at least `window_seconds`)."""

    window_seconds: int = DEFAULT_PANIC_WINDOW_SECONDS
    threshold_percent: float = DEFAULT_PANIC_THRESHOLD_PERCENT

    def leave_after(self, scale_down_window_seconds: int) -> int:
        """How long without cause ends a panic."""
        return max(scale_down_window_seconds, self.window_seconds)


@dataclass(frozen=True, slots=True)
class Behavior:
    """The HPA `behavior` block: how fast each direction may move and how long it waits; `panic` (None: off,
    the HPA exactly) is the one addition."""

    scale_up: ScalingRules
    scale_down: ScalingRules
    panic: Panic | None = None


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
    activation_target: float = 0.0
    """Scale to zero (KEDA's activation threshold): at 0 replicas the rule wakes up only when some metric is
    above its activation target; it goes to 0 only when every metric has stayed at or below it."""
    when_empty: WhenEmpty = "fail"
    """What an empty query result is: a failed metric (the default), or 0 (a series that only exists while
    there is traffic, as KEDA's ignoreNullValues)."""
    panic_query: str = ""
    """With `behavior.panic`: the query over the panic window (its range selectors shortened); "" when the
    query has no range to shorten, so its value is already its short-window value."""


@dataclass(frozen=True, slots=True)
class TargetRef:
    """The workload a rule scales, through its scale subresource; the history follows it across edits.

    Any kind with a /scale subresource: Deployment and StatefulSet (apps/v1, the default), an Argo Rollout,
    a LeaderWorkerSet, a user's custom resource; the controller finds its resource through API discovery.
    """

    kind: str
    namespace: str
    name: str
    api_version: str = APPS_V1

    @property
    def group(self) -> str:
        """The API group ('' for the core group's 'v1')."""
        return self.api_version.rpartition("/")[0]

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
    `autoscaler.config.schedules`); the caller passes the bounds in effect at `now`.
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
class Capacity:
    """The capacity guard: a scale-up adds at most floor(free / gpus_per_replica) replicas per sync, `free`
    being what `query` returns this sync; and none while replicas added earlier have been Pending as
    unschedulable for longer than `pending_grace_seconds`.

    Only data here: the caller passes the free GPUs and the Pending replicas it observed.
    """

    query: str
    gpus_per_replica: int
    pending_grace_seconds: int = DEFAULT_PENDING_GRACE_SECONDS
    line: int = 0
    pool: str | None = None
    """The query's normal form (plumbing.prometheus.syntax.normal_form), which names its pool: rules on the
    same endpoint whose forms are equal share their free GPUs. None: it does not parse, its text names it."""


@dataclass(frozen=True, slots=True)
class PodDeletionCost:
    """Before a scale-down, each pod of the target gets `controller.kubernetes.io/pod-deletion-cost` from its
    value in `query` (one series per pod, the pod's name in label `pod_label`): its in-flight requests, so the
    ReplicaSet removes the idlest pods. The controller acts on it; `decide()` never reads it."""

    query: str
    pod_label: str = "pod"
    line: int = 0


@dataclass(frozen=True, slots=True)
class OverloadBudget:
    """Instead of the hand-picked headroom of a target: keep the headroom that the load's recent rises over
    `startup_seconds` require for the rule to be overloaded in at most `percent_of_minutes` % of the minutes
    (`autoscaler.policy.budget`)."""

    percent_of_minutes: float
    startup_seconds: int


@dataclass(frozen=True, slots=True)
class Forecast:
    """Scale for the load `lead_seconds` ahead, predicted from the same time in the last `lookback_seasons`
    seasons of `season_seconds` (`autoscaler.policy.forecast`); `mode: observe` only publishes it."""

    season_seconds: int = 86_400
    lead_seconds: int = 120
    lookback_seasons: int = 1
    mode: ForecastMode = "scaleUp"

    @property
    def season_minutes(self) -> int:
        return max(1, round(self.season_seconds / 60))

    @property
    def lead_minutes(self) -> int:
        return max(1, round(self.lead_seconds / 60))


@dataclass(frozen=True, slots=True)
class Slo:
    """A latency objective: the per-replica target of metric `learn` is learned from `lookback_seconds` of
    the service's own history, as the highest per-replica load at which `latency` stayed within
    `objective_seconds` (`autoscaler.policy.slo`), kept within [`bound_min`, `bound_max`]; `mode: observe`
    only publishes it."""

    latency: str
    objective_seconds: float
    learn: str
    lookback_seconds: int
    bound_min: float
    bound_max: float
    mode: SloMode = "scale"
    line: int = 0


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
    cooldown_seconds: int = DEFAULT_COOLDOWN_SECONDS
    """Scale to zero (min_replicas 0): how long every metric must stay at or below its activation target
    before the count goes from 1 or more to 0 (KEDA's cooldownPeriod)."""
    capacity: Capacity | None = None
    """The capacity guard; None: scale-ups are not limited by free GPUs (the HPA)."""
    batch: bool = True
    """False: the rule's queries are sent to Prometheus alone, never batched with others (`batch: false`).
    How queries are sent; `decide()` never reads it."""
    overload_budget: OverloadBudget | None = None
    """Targets divided by the headroom the load's volatility needs; None: the targets as given."""
    priority: int = 0
    """Among rules whose capacity guards read the same pool: the higher is given free GPUs first."""
    forecast: Forecast | None = None
    """Scale ahead of a seasonal load; None: reactive only."""
    slo: Slo | None = None
    """A latency objective whose learned target replaces metric `slo.learn`'s; None: the targets as given."""
    pod_deletion_cost: PodDeletionCost | None = None
    """Rank the pods by in-flight work before a scale-down; None: the ReplicaSet picks as it would."""
