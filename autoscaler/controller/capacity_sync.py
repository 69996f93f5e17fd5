"""The I/O half of the capacity guard: per sync, the free GPUs (the rule's capacity query, already run with
the metrics) and the target's replicas Pending as unschedulable (listed by the controller's pool with the
scale read).

Either can fail; the failure is counted (query_errors_total{metric="capacity"}, scale_errors_total), told in
`problem` for a FailedGetCapacity Event, and limits nothing: the HPA decision goes ahead, as a Prometheus or
API hiccup must not freeze a service under load. The guard itself is pure (`autoscaler.policy.capacity`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace

from autoscaler.controller.capacity_ledger import PoolLedger, PoolShare
from autoscaler.controller.decision_log import ref_text
from autoscaler.controller.observe import CAPACITY_METRIC, capacity_seen
from autoscaler.controller.self_metrics import ControllerMetrics
from autoscaler.controller.sources import QueryKey
from autoscaler.errors import KubeError
from autoscaler.policy import Rule
from autoscaler.policy.capacity import CapacityObservation
from plumbing.prometheus.runner import QueryErrorReason, QueryResult

__all__ = ["GatheredCapacity", "gather_capacity", "shared"]


@dataclass(frozen=True, slots=True)
class GatheredCapacity:
    seen: CapacityObservation
    pending: int | None
    """Replicas Pending as unschedulable (None: they could not be listed)."""
    problem: str | None = None
    """What failed, for the FailedGetCapacity Event (None: nothing)."""
    pool: PoolShare | None = None
    """Set when other rules read the same pool: `seen.free_gpus` is then this rule's share of it."""


def gather_capacity(rule: Rule, listed: tuple[float, ...] | Exception,
                    results: Mapping[QueryKey, QueryResult], metrics: ControllerMetrics,
                    ) -> GatheredCapacity | None:
    """None for a rule without a capacity guard. `listed` is what listing the target's Pending-unschedulable
    pods gave: since when each has been so, or the error (a KubeError is told here; any other is raised, a
    failed sync of the rule)."""
    if rule.capacity is None:
        return None
    result = results.get((rule.prometheus, rule.capacity.query))
    if result is None or result.value is None:
        reason = (result.error_reason if result is not None else None) or QueryErrorReason.UNREACHABLE
        metrics.query_error(rule, CAPACITY_METRIC, reason)
    problems = []
    pending: int | None = None
    since: tuple[float, ...] = ()
    if isinstance(listed, KubeError):
        problems.append(f"cannot list the Pending pods of {ref_text(rule.target)}: {listed}")
        metrics.scale_error(rule, listed.reason_label)
    elif isinstance(listed, Exception):
        raise listed
    else:
        since, pending = listed, len(listed)
    seen = capacity_seen(result, since)
    if seen.error is not None:
        problems.insert(0, f"capacity query failed: {seen.error}")
    problem = "; ".join(problems) + " (scale-ups are not limited by it this sync)" if problems else None
    return GatheredCapacity(seen, pending, problem)


def shared(capacity: GatheredCapacity | None, rule: Rule, pool: PoolLedger | None) -> GatheredCapacity | None:
    """`capacity` with the free GPUs the rule's pool leaves it this sync, when other rules read that pool."""
    if capacity is None or pool is None or capacity.seen.free_gpus is None:
        return capacity
    share = pool.share(rule, capacity.seen.free_gpus)
    if share is None:
        return capacity
    return replace(capacity, seen=replace(capacity.seen, free_gpus=share.free), pool=share)
