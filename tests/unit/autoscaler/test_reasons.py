"""Closed vocabularies: every reason a user can read is an enum member, with the promised values."""

from __future__ import annotations

import pytest

from autoscaler.cli.status import WHY
from autoscaler.errors import (
    ConflictError,
    KubeApiError,
    KubeTimeoutError,
    MalformedAnswerError,
    NamespaceNotAllowedError,
    NotFoundError,
)
from autoscaler.policy import Reason
from autoscaler.reasons import DECISION_REASONS, EventReason, ScaleErrorReason, SyncReason

OUTCOME_REASONS = [*Reason, *SyncReason]


@pytest.mark.parametrize("reason", OUTCOME_REASONS, ids=str)
def test_every_outcome_reason_has_a_why_phrase(reason: Reason | SyncReason) -> None:
    assert WHY[reason].strip(), f"status has no phrase for {reason}"


def test_why_names_no_reason_outside_the_enums() -> None:
    assert set(WHY) == set(OUTCOME_REASONS)


def test_decision_reason_labels_are_the_published_ones_in_order() -> None:
    """Label values of gpu_autoscaler_decision_reason: dashboards and alerts match on them."""
    assert [str(r) for r in DECISION_REASONS] == [
        "AboveMaxReplicas", "BelowMinReplicas", "WithinTolerance", "DesiredWithinRange", "ScaleUpStabilized",
        "ScaleDownStabilized", "ScaleUpLimit", "ScaleDownLimit", "ScalingDisabled", "TooManyReplicas",
        "TooFewReplicas", "MetricsFailed", "MetricsPartiallyFailed", "Paused", "PausedReplicas", "Fallback",
        "Activated", "Idle", "ScaledToZero", "CapacityLimited", "FailedGetScale", "Error", "UnknownEndpoint",
        "PanicScaleUp", "PanicHold",
    ]


ENUMS = [Reason, SyncReason, EventReason, ScaleErrorReason]


@pytest.mark.parametrize("enum", ENUMS, ids=lambda e: e.__name__)
def test_values_are_the_member_names(enum: type[Reason]) -> None:
    """CamelCase codes as the HPA's: what a log line, an Event or a label shows is the member's own name."""
    assert [m.value for m in enum] == [m.name for m in enum]


@pytest.mark.parametrize(("error", "label"), [
    (KubeApiError("x"), "ApiError"),
    (NotFoundError("x"), "NotFound"),
    (ConflictError("x"), "Conflict"),
    (KubeTimeoutError("x"), "Timeout"),
    (MalformedAnswerError("x"), "MalformedAnswer"),
    (NamespaceNotAllowedError("x"), "NamespaceNotAllowed"),
], ids=lambda v: type(v).__name__ if isinstance(v, Exception) else v)
def test_scale_error_labels(error: KubeApiError, label: str) -> None:
    assert isinstance(error.reason_label, ScaleErrorReason)
    assert f"{error.reason_label}" == label
