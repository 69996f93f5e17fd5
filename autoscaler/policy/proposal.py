"""Stage 1: what each metric asks for, and the largest of those (the HPA's computeReplicasForMetrics)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING

from autoscaler.policy.decision import MAX_REPLICAS, MetricObservation, MetricProposal, Reason, Stage

if TYPE_CHECKING:
    from autoscaler.policy.spec import MetricSpec


def propose(metric: MetricSpec, observation: MetricObservation | None, current: int,
            up_tolerance: float, down_tolerance: float) -> MetricProposal:
    """One metric's replica count.

    Average: ratio = value/target, proposes ceil(ratio*current). Total: ratio = value/(target*current),
    proposes ceil(value/target). Inside 1-down_tolerance <= ratio <= 1+up_tolerance it proposes `current`.
    From 0 replicas there is no tolerance band (as the HPA's getUsageRatioReplicaCount): Average proposes
    ceil(ratio), so a rule with minReplicas 0 can scale up from zero; Total proposes ceil(value/target).
    A count above MAX_REPLICAS (a ratio that overflowed to inf included) is proposed as MAX_REPLICAS.
    """
    if observation is None:
        return MetricProposal(
            name=metric.name,
            value=None,
            target=metric.target,
            ratio=None,
            replicas=None,
            error="no value for this metric",
        )
    value = observation.value
    if value is None:
        error = observation.error or "query failed"
        return MetricProposal(
            name=metric.name, value=None, target=metric.target, ratio=None, replicas=None, error=error
        )
    if not math.isfinite(value):
        return MetricProposal(
            name=metric.name,
            value=None,
            target=metric.target,
            ratio=None,
            replicas=None,
            error=f"value is {value}",
        )
    if not (math.isfinite(metric.target) and metric.target > 0):  # the rules file refuses it; never divide
        return MetricProposal(
            name=metric.name,
            value=None,
            target=metric.target,
            ratio=None,
            replicas=None,
            error=f"target is {metric.target}",
        )
    if metric.type == "Average":
        ratio = value / metric.target
    elif current > 0:
        ratio = value / (metric.target * current)
    else:  # no replicas: any load is infinitely above target; ceil(value/target) still applies
        ratio = math.inf if value > 0 else 0.0
    if current == 0:
        replicas = ceil_count(ratio) if metric.type == "Average" else ceil_count(value / metric.target)
    elif 1.0 - down_tolerance <= ratio <= 1.0 + up_tolerance:
        replicas = current
    elif metric.type == "Average":
        replicas = ceil_count(ratio * current)
    else:
        replicas = ceil_count(value / metric.target)
    return MetricProposal(
        name=metric.name, value=value, target=metric.target, ratio=ratio, replicas=replicas, error=None
    )


def ceil_count(x: float) -> int:
    """ceil(x) as a replica count: 0 at most below, MAX_REPLICAS at most above (inf included)."""
    if x >= MAX_REPLICAS:
        return MAX_REPLICAS
    return math.ceil(x) if x > 0 else 0


def propose_all(metrics: Sequence[MetricSpec], observations: Sequence[MetricObservation], current: int,
                up_tolerance: float, down_tolerance: float) -> tuple[MetricProposal, ...]:
    by_name = {o.name: o for o in observations}
    return tuple(propose(m, by_name.get(m.name), current, up_tolerance, down_tolerance) for m in metrics)


def combine(proposals: Sequence[MetricProposal], current: int) -> Stage:
    """The largest valid proposal; MetricsFailed / MetricsPartiallyFailed when the sync must hold.

    As the HPA: if every metric failed, or some failed and the largest valid proposal is below `current`,
    nothing changes (a failed metric must never cause a scale-down).
    """
    best: MetricProposal | None = None
    lowest: int | None = None
    failed: list[MetricProposal] = []
    for p in proposals:  # one pass: this runs at every sync of every rule
        replicas = p.replicas
        if replicas is None:
            failed.append(p)
            continue
        if best is None or replicas > (best.replicas or 0):
            best = p
        if lowest is None or replicas < lowest:
            lowest = replicas
    if best is None or best.replicas is None:
        errors = "; ".join(f"{p.name}: {p.error}" for p in failed)
        return Stage(current, Reason.MetricsFailed, f"every metric failed ({errors}); holding {current}")
    if failed and best.replicas < current:
        errors = "; ".join(f"{p.name}: {p.error}" for p in failed)
        return Stage(current, Reason.MetricsPartiallyFailed,
                     f"{best.name} proposes {best.replicas} < {current} but {errors}; holding {current}")
    if best.replicas == current and lowest == current:
        return Stage(current, Reason.WithinTolerance,
                     f"every metric is within tolerance of its target at {current}")
    return Stage(best.replicas, Reason.DesiredWithinRange,
                 f"{best.name} = {best.value:g} (target {best.target:g}) proposes {best.replicas}")
