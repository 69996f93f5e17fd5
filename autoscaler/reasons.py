"""The controller's closed vocabularies, beside the engine's `policy.Reason`: every reason a user can read.

The string values are part of the product (label values of /metrics, Kubernetes Event reasons, log fields,
`status` and the docs), so a member is renamed never and its value changed never. A rule's outcome carries a
`policy.Reason` when a plan was made (the engine's codes and the controller's pause and fallback) and a
`SyncReason` when the sync stopped before any plan.
"""

from __future__ import annotations

from enum import StrEnum

from autoscaler.errors import ScaleErrorReason
from autoscaler.policy import Reason

__all__ = ["DECISION_REASONS", "EventReason", "OutcomeReason", "ScaleErrorReason", "SyncReason"]


class SyncReason(StrEnum):
    """Why a rule's sync ended without a plan."""

    FailedGetScale = "FailedGetScale"  # the target's scale could not be read
    Error = "Error"  # the sync raised an unexpected exception (a bug): its Event is FailedSync
    UnknownEndpoint = "UnknownEndpoint"  # the rule names a Prometheus endpoint that is not configured
    Abandoned = "Abandoned"  # the controller is shutting down: the rule was not synced


OutcomeReason = Reason | SyncReason
"""The reason of one rule's outcome: the `status` WHY column, the decision log line and the metric label."""

_LATER = (Reason.PanicScaleUp, Reason.PanicHold)
"""Engine reasons added after the sync reasons were published: they come after them."""
DECISION_REASONS: tuple[OutcomeReason, ...] = (
    *(r for r in Reason if r not in _LATER), SyncReason.FailedGetScale, SyncReason.Error,
    SyncReason.UnknownEndpoint, *_LATER,
)
"""Every reason gpu_autoscaler_decision_reason pre-declares (0 or 1), in this order (a new one is appended, so
the published order never changes); an abandoned rule records no decision."""


class EventReason(StrEnum):
    """The `reason` of the Kubernetes Events the controller posts on a target."""

    ScaledUp = "ScaledUp"
    ScaledDown = "ScaledDown"
    FailedGetScale = "FailedGetScale"
    FailedGetMetrics = "FailedGetMetrics"
    FailedScale = "FailedScale"
    FailedSync = "FailedSync"
    InvalidRule = "InvalidRule"
    InvalidAnnotation = "InvalidAnnotation"
    CapacityLimited = "CapacityLimited"  # the capacity guard held a scale-up back
    FailedGetCapacity = "FailedGetCapacity"  # capacity query failed, or the Pending pods could not be listed
    EffectiveTargetChanged = "EffectiveTargetChanged"  # overloadBudget moved a metric's target by 5 % or more
    LearnedTargetChanged = "LearnedTargetChanged"  # slo learned a target, or it moved by more than 10 %
    FailedSetDeletionCost = "FailedSetDeletionCost"  # podDeletionCost: query, pod list or pod patch failed
