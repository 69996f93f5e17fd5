"""How a decision is told: the ScaledUp/ScaledDown event message, the one log line per decision (or per
failed, abandoned or raising rule sync) and the structured fields those lines carry (so `--log-format json`
can be filtered by rule).

A line's arguments and fields are built only when the logger is enabled for its level: at 10,000 rules the
INFO decision lines cost a tenth of a sync even when the level filters them out."""

from __future__ import annotations

import logging

from autoscaler.planning.plan import Plan, describe_metrics
from autoscaler.policy import MetricObservation, Rule, TargetRef
from autoscaler.reasons import OutcomeReason, SyncReason

log = logging.getLogger("autoscaler.controller.loop")  # the decision lines keep the controller's logger name
DECISION = "decision"
"""The attribute that marks a decision line's log record (`WithoutDecisionLines`)."""


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
    if not log.isEnabledFor(logging.INFO):
        return
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
        extra={"fields": fields, DECISION: True},
    )


class WithoutDecisionLines(logging.Filter):
    """Leaves out the INFO decision lines, for a terminal on which `run --assume-replicas` already prints each
    decision on stdout: each decision shows once (a pipe or a file on stdout keeps both)."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not getattr(record, DECISION, False)


def log_abandoned(rule: Rule, plan: Plan, observations: tuple[MetricObservation, ...], why: str,
                  dry_run: bool) -> None:
    if not log.isEnabledFor(logging.WARNING):
        return
    log.warning(
        "rule %s: not patching %s %d -> %d: %s",
        rule.name,
        ref_text(rule.target),
        plan.current,
        plan.replicas,
        why,
        extra={"fields": decision_fields(rule, plan.current, plan.replicas, plan.reason, plan.message,
                                         "abandoned", dry_run, observations, error=why)},
    )


def log_read_failed(rule: Rule, error: Exception, reason: str, observations: tuple[MetricObservation, ...],
                    dry_run: bool) -> None:
    if not log.isEnabledFor(logging.WARNING):
        return
    log.warning(
        "rule %s: cannot read the scale of %s: %s",
        rule.name,
        ref_text(rule.target),
        error,
        extra={"fields": decision_fields(rule, None, None, SyncReason.FailedGetScale, str(error), "failed",
                                         dry_run, observations, error=str(error), error_reason=reason)},
    )


def log_patch_failed(rule: Rule, plan: Plan, observations: tuple[MetricObservation, ...], error: Exception,
                     reason: str, dry_run: bool) -> None:
    if not log.isEnabledFor(logging.WARNING):
        return
    log.warning(
        "rule %s: failed to scale %s %d -> %d (%s): %s",
        rule.name,
        ref_text(rule.target),
        plan.current,
        plan.replicas,
        reason,
        error,
        extra={"fields": decision_fields(rule, plan.current, plan.replicas, plan.reason, plan.message,
                                         "failed", dry_run, observations, error=str(error),
                                         error_reason=reason)},
    )


def log_sync_error(rule: Rule, message: str, error: Exception, dry_run: bool) -> None:
    """A rule whose sync raised: its traceback, with the fields of any failed decision."""
    if not log.isEnabledFor(logging.ERROR):
        return
    log.error(
        "rule %s: %s",
        rule.name,
        message,
        exc_info=error,
        extra={"fields": decision_fields(rule, None, None, SyncReason.Error, message, "failed", dry_run,
                                         error=str(error), error_reason=type(error).__name__)},
    )
