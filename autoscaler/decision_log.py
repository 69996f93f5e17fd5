"""How a decision is told: the ScaledUp/ScaledDown event message and the one log line per decision."""

from __future__ import annotations

import logging

from autoscaler.plan import Plan, describe_metrics
from autoscaler.policy import MetricObservation
from autoscaler.rules import Rule, TargetRef

log = logging.getLogger("autoscaler.controller")  # the decision lines keep the controller's logger name


def ref_text(ref: TargetRef) -> str:
    return f"{ref.kind}/{ref.namespace}/{ref.name}"


def scale_message(plan: Plan, observations: tuple[MetricObservation, ...], rule: Rule) -> str:
    """ScaledUp/ScaledDown message: HPA-style "New size", from -> to, the limiting reason, every metric."""
    return (
        f"New size: {plan.replicas} ({plan.current} -> {plan.replicas}); reason: {plan.reason}: "
        f"{plan.message}; metrics: {describe_metrics(rule, observations)}"
    )


def log_decision(
    rule: Rule, plan: Plan, observations: tuple[MetricObservation, ...], verb: str, dry_run: bool
) -> None:
    fields = {
        "rule": rule.name,
        "target": ref_text(rule.target),
        "current": plan.current,
        "desired": plan.replicas,
        "reason": str(plan.reason),
        "message": plan.message,
        "dry_run": dry_run,
        "action": verb,
        "metrics": {o.name: (o.value if o.value is not None else None) for o in observations},
        "metric_errors": {o.name: o.error for o in observations if o.error},
    }
    log.info(
        "rule %s: %s %s %d -> %d: %s: %s [%s]",
        rule.name,
        verb,
        ref_text(rule.target),
        plan.current,
        plan.replicas,
        plan.reason,
        plan.message,
        describe_metrics(rule, observations),
        extra={"fields": fields},
    )
