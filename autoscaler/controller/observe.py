"""One sync's answers turned into the engine's inputs: metric observations and what the capacity guard sees.

Pure: the controller passes the query results and the Pending replicas it listed; the only policy here is how
an answer reads (`whenEmpty: zero` turns an empty result into 0, as KEDA's ignoreNullValues), so the
controller and `check` read an answer the same way.
"""

from __future__ import annotations

from dataclasses import dataclass

from autoscaler.policy import MetricObservation, MetricSpec
from autoscaler.policy.capacity import CapacityObservation
from plumbing.prometheus.answer import QueryErrorReason
from plumbing.prometheus.runner import QueryResult

__all__ = ["CAPACITY_METRIC", "Observed", "capacity_seen", "observe"]

CAPACITY_METRIC = "capacity"
"""The `metric` label of a failed capacity query in gpu_autoscaler_query_errors_total (a reserved name)."""
_NO_RESULT = QueryResult(None, QueryErrorReason.UNREACHABLE, "no result")


@dataclass(frozen=True, slots=True)
class Observed:
    """A metric's observation, and the reason its query failed (None: it gave a value, or read as 0)."""

    observation: MetricObservation
    failed: str | None = None


def observe(metric: MetricSpec, result: QueryResult | None) -> Observed:
    result = result or _NO_RESULT
    if result.value is not None:
        return Observed(MetricObservation(metric.name, result.value))
    reason = result.error_reason or QueryErrorReason.HTTP_ERROR
    if reason == QueryErrorReason.NO_SERIES and metric.when_empty == "zero":
        return Observed(MetricObservation(metric.name, 0.0))
    return Observed(MetricObservation(metric.name, None, f"{reason}: {result.error or 'failed'}"), reason)


def capacity_seen(result: QueryResult | None, unschedulable_since: tuple[float, ...]) -> CapacityObservation:
    """The free GPUs (None when the capacity query failed, `error` saying why) and the Pending replicas."""
    result = result or _NO_RESULT
    if result.value is not None:
        return CapacityObservation(result.value, unschedulable_since)
    reason = result.error_reason or QueryErrorReason.HTTP_ERROR
    return CapacityObservation(None, unschedulable_since, f"{reason}: {result.error or 'failed'}")
