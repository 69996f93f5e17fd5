"""Frozen values that flow into and out of the engine: observations, history, reasons, decisions.

Nothing here reads a clock: every timestamp is a `now` the caller passed in (seconds, any epoch).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from enum import StrEnum
from typing import NamedTuple

from autoscaler.policy.ages import older_than

MAX_REPLICAS = 2**31 - 1
"""The largest replica count the Kubernetes API holds (int32): a larger proposal is capped here, so a huge
finite metric value (1e308, or 1e10 against a 1e-300 target) asks for this many and the bounds say the rest,
instead of math.ceil(inf) raising OverflowError."""


class Reason(StrEnum):
    """Why a decision came out as it did: a closed set of CamelCase codes, like the HPA's conditions."""

    AboveMaxReplicas = "AboveMaxReplicas"  # current > max: corrected to max without looking at metrics
    BelowMinReplicas = "BelowMinReplicas"  # current < min: corrected to min
    WithinTolerance = "WithinTolerance"  # every valid proposal == current
    DesiredWithinRange = "DesiredWithinRange"  # desired applied unchanged by stabilization / rate / bounds
    ScaleUpStabilized = "ScaleUpStabilized"  # the scale-up window held the count below the raw desired
    ScaleDownStabilized = "ScaleDownStabilized"  # the scale-down window held the count above the raw desired
    ScaleUpLimit = "ScaleUpLimit"  # scale-up policies limited the change
    ScaleDownLimit = "ScaleDownLimit"  # scale-down policies limited the change
    ScalingDisabled = "ScalingDisabled"  # selectPolicy Disabled in the direction of change
    TooManyReplicas = "TooManyReplicas"  # clamped to maxReplicas
    TooFewReplicas = "TooFewReplicas"  # clamped to minReplicas
    MetricsFailed = "MetricsFailed"  # every metric failed: hold, record nothing
    MetricsPartiallyFailed = "MetricsPartiallyFailed"  # some failed, largest valid proposal < current: hold
    # Controller-level reasons (the engine never returns them).
    Paused = "Paused"
    PausedReplicas = "PausedReplicas"
    Fallback = "Fallback"
    # Beyond the HPA: scale to zero (KEDA's semantics) and the capacity guard; appended, as the published
    # order of the labels never changes.
    Activated = "Activated"  # at 0, a metric is above its activation target: 0 -> 1
    Idle = "Idle"  # at 0, every metric at or below its activation target: stay at 0
    ScaledToZero = "ScaledToZero"  # every metric at or below its activation target for cooldownSeconds: -> 0
    CapacityLimited = "CapacityLimited"  # the scale-up was limited or held by free GPUs or Pending replicas
    # Beyond the HPA: panic mode (Knative's semantics).
    PanicScaleUp = "PanicScaleUp"  # panicking: scaled up to the panic window's proposal at once
    PanicHold = "PanicHold"  # panicking: the count is held, never scaled down


@dataclass(frozen=True, slots=True)
class MetricObservation:
    """What one metric's query returned this sync; `value` None means the query failed (`error` says why)."""

    name: str
    value: float | None
    error: str | None = None
    panic_value: float | None = None
    """The metric over the panic window (`MetricSpec.panic_query`); None: `value` is also that."""


@dataclass(frozen=True, slots=True)
class PanicState:
    """A rule in panic: since when, the last sync that crossed the threshold, the most replicas decided."""

    since: float
    last_cause: float
    peak: int


@dataclass(frozen=True, slots=True)
class MinuteLoads:
    """One metric's largest load in each of the last minutes, oldest first (None: no value that minute), and
    what its user derived from them when `last_minute` opened (`autoscaler.policy.minutes`; None: too
    little history)."""

    name: str
    last_minute: int
    loads: tuple[float | None, ...]
    derived: float | None = None
    kept: object = field(default=None, compare=False, repr=False)
    """What the derivation keeps from one minute to the next so that a minute costs little (the overload
    budget's rises, in order), or None; a cache of `loads`, so not part of ==."""


@dataclass(frozen=True, slots=True)
class MetricProposal:
    """The replica count one metric asks for, with the numbers behind it (None fields: the metric failed)."""

    name: str
    value: float | None
    target: float
    ratio: float | None
    replicas: int | None
    error: str | None


@dataclass(frozen=True, slots=True)
class Recommendation:
    """A raw desired count (before stabilization) computed at `timestamp`."""

    timestamp: float
    replicas: int


@dataclass(frozen=True, slots=True)
class ScaleEvent:
    """A change that was applied at `timestamp`; replica_change > 0 up, < 0 down.

    `outdated`: found older than its direction's longest policy period when a later event of that direction
    was stored (the HPA's markScaleEventsOutdated). It still counts while inside a period; it only marks
    the event as one the next event of its direction may overwrite.
    """

    timestamp: float
    replica_change: int
    outdated: bool = False


@dataclass(frozen=True, slots=True)
class RuleHistory:
    """What the engine remembers about one rule between syncs (the HPA keeps the same per HPA object).

    `longest_up_period` / `longest_down_period`: the rule's longest scale-up / scale-down policy period as of
    the last sync (set by the engine; None before the first), which `with_scale` needs to store an event.
    """

    recommendations: tuple[Recommendation, ...] = ()
    scale_up_events: tuple[ScaleEvent, ...] = ()
    scale_down_events: tuple[ScaleEvent, ...] = ()
    longest_up_period: int | None = field(default=None, compare=False)  # settings, not memory: not in ==
    longest_down_period: int | None = field(default=None, compare=False)
    last_active: float | None = None
    """Scale to zero: when some metric was last above its activation target (or the rule was first seen),
    the start of the cooldown (KEDA's lastActiveTime). None until a rule that may go to zero is synced."""
    panic: PanicState | None = None
    """Set while the rule panics (`behavior.panic`); None otherwise."""
    budget: tuple[MinuteLoads, ...] = ()
    """`overloadBudget`: each metric's loads of the last day, minute by minute."""
    forecast: tuple[MinuteLoads, ...] = ()
    """`forecast`: each metric's loads of the last seasons, minute by minute."""

    def with_scale(self, now: float, from_replicas: int, to_replicas: int) -> RuleHistory:
        """This history plus the event of a change that WAS applied; unchanged when from == to.

        The controller calls it after a successful patch (a failed patch limits nothing); simulate at once.
        Stored as the HPA's storeScaleEvent: events of the change's direction older than that direction's
        longest period are marked outdated, and the new event overwrites the last outdated one (else it is
        appended). So the lists stay bounded without pruning, and an overwritten event stops counting for
        the other direction's policies too, exactly when it does in the HPA.
        """
        change = to_replicas - from_replicas
        if change > 0:
            up = _stored(self.scale_up_events, ScaleEvent(now, change), self.longest_up_period)
            return dataclasses.replace(self, scale_up_events=up)
        if change < 0:
            down = _stored(self.scale_down_events, ScaleEvent(now, change), self.longest_down_period)
            return dataclasses.replace(self, scale_down_events=down)
        return self


def _stored(events: tuple[ScaleEvent, ...], new: ScaleEvent, longest_period: int | None,
            ) -> tuple[ScaleEvent, ...]:
    """`events` with `new` stored as the HPA's storeScaleEvent does (see `RuleHistory.with_scale`)."""
    if longest_period is None:  # the rule's periods are not known yet: nothing can be called outdated
        return (*events, new)
    outdated = older_than(longest_period)
    marked = [e if e.outdated or new.timestamp - e.timestamp <= outdated
              else ScaleEvent(e.timestamp, e.replica_change, True) for e in events]
    for index in range(len(marked) - 1, -1, -1):  # the last outdated one, as the HPA's loop picks
        if marked[index].outdated:
            marked[index] = new
            return tuple(marked)
    return (*marked, new)


class Stage(NamedTuple):
    """The result of one pure stage: the count it passes on, why, and a sentence with the numbers.

    Immutable like the dataclasses here, but a NamedTuple: several are built per sync of every rule, and a
    frozen dataclass costs four times as much to construct.
    """

    replicas: int
    reason: Reason
    message: str


@dataclass(frozen=True, slots=True)
class Decision:
    """One sync's outcome for one rule.

    `desired_raw` is the largest metric proposal (None when metrics were not used or all failed);
    `history` is the input history plus this sync's recommendation, the recommendations no window can see
    dropped; scale events are added only by `RuleHistory.with_scale` once the change is applied.
    """

    current: int
    desired_raw: int | None
    replicas: int
    reason: Reason
    message: str
    proposals: tuple[MetricProposal, ...]
    history: RuleHistory

    @property
    def changed(self) -> bool:
        return self.replicas != self.current
