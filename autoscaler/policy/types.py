"""Frozen values that flow into and out of the engine: observations, history, reasons, decisions.

Nothing here reads a clock: every timestamp is a `now` the caller passed in (seconds, any epoch).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import NamedTuple


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


@dataclass(frozen=True, slots=True)
class MetricObservation:
    """What one metric's query returned this sync; `value` None means the query failed (`error` says why)."""

    name: str
    value: float | None
    error: str | None = None


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
    """A change that was applied at `timestamp`; replica_change > 0 up, < 0 down."""

    timestamp: float
    replica_change: int


@dataclass(frozen=True, slots=True)
class RuleHistory:
    """What the engine remembers about one rule between syncs (the HPA keeps the same per HPA object)."""

    recommendations: tuple[Recommendation, ...] = ()
    scale_up_events: tuple[ScaleEvent, ...] = ()
    scale_down_events: tuple[ScaleEvent, ...] = ()

    def with_scale(self, now: float, from_replicas: int, to_replicas: int) -> RuleHistory:
        """This history plus the event of a change that WAS applied; unchanged when from == to.

        The controller calls it after a successful patch (a failed patch limits nothing); simulate at once.
        """
        change = to_replicas - from_replicas
        if change > 0:
            return RuleHistory(self.recommendations, (*self.scale_up_events, ScaleEvent(now, change)),
                               self.scale_down_events)
        if change < 0:
            return RuleHistory(self.recommendations, self.scale_up_events,
                               (*self.scale_down_events, ScaleEvent(now, change)))
        return self


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
    `history` is the input history plus this sync's recommendation, pruned; scale events are added only by
    `RuleHistory.with_scale` once the change is applied.
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
