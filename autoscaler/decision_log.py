"""How a decision is told: the ScaledUp/ScaledDown event message, the one log line per decision and the
structured fields that decision and failure lines carry (so `--log-format json` can be filtered by rule)."""

from __future__ import annotations

import logging

from autoscaler.plan import Plan, describe_metrics
from autoscaler.policy import MetricObservation, Rule, TargetRef
from autoscaler.reasons import OutcomeReason

log = logging.getLogger("autoscaler.controller")  # the decision lines keep the controller's logger name


def ref_text(ref: TargetRef) -> str:
    return f"{ref.kind}/{ref.namespace}/{ref.name}"


def scale_message(plan: Plan, observations: tuple[MetricObservation, ...], rule: Rule) -> str:
    """ScaledUp/ScaledDown message: HPA-style "New size", from -> to, the limiting reason, every metric."""
    return (
        f"New size: {plan.replicas} ({plan.current} -> {plan.replicas}); reason: {plan.reason}: "
        f"{plan.message}; metrics: {describe_metrics(rule, observations)}"
    )


def decision_fields(
    rule: Rule,
    current: int | None,
    desired: int | None,
    reason: OutcomeReason,
    message: str,
    action: str,
    dry_run: bool,
    observations: tuple[MetricObservation, ...] = (),
    **extra: object,
) -> dict[str, object]:
    """The structured fields of a decision line (top-level keys with --log-format json), failures included."""
    return {
        "rule": rule.name,
        "target": ref_text(rule.target),
        "current": current,
        "desired": desired,
        "reason": str(reason),
        "message": message,
        "dry_run": dry_run,
        "action": action,
        "metrics": {o.name: o.value for o in observations},
        "metric_errors": {o.name: o.error for o in observations if o.error},
        **extra,
    }


def log_decision(
    rule: Rule, plan: Plan, observations: tuple[MetricObservation, ...], verb: str, dry_run: bool
) -> None:
    fields = decision_fields(
        rule, plan.current, plan.replicas, plan.reason, plan.message, verb, dry_run, observations
    )
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
