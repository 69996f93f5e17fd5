"""`decide()`: one sync of one rule, composed from the pure stages, with `now` passed in.

Order, as the Kubernetes HPA controller (reconcileAutoscaler + normalizeDesiredReplicasWithBehaviors):
first sight -> out-of-bounds correction -> metric proposals -> stabilization -> min/max bounds and the
policies of the direction of change (the tighter wins; at equality the bound) -> history pruned (`prune`).
The reason reported is that of the last stage that changed the count. With `behavior.panic` a burst is
met past the scale-up window (`panic`); without it, this is the HPA.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import TYPE_CHECKING

from autoscaler.policy.bounds import clamp_to_bounds, correct_out_of_bounds
from autoscaler.policy.decision import (
    MAX_REPLICAS,
    Decision,
    MetricObservation,
    MetricProposal,
    PanicState,
    Reason,
    Recommendation,
    RuleHistory,
    Stage,
)
from autoscaler.policy.history import first_sight, prune
from autoscaler.policy.panic import PanicStep, panic_proposals, panic_step, with_peak
from autoscaler.policy.proposal import combine, propose_all
from autoscaler.policy.rate import limit_rate
from autoscaler.policy.stabilization import stabilize

if TYPE_CHECKING:
    from autoscaler.policy.spec import Panic, Rule

_HOLD = (Reason.MetricsFailed, Reason.MetricsPartiallyFailed)


def decide(rule: Rule, current: int, observations: Sequence[MetricObservation], history: RuleHistory,
           now: float) -> Decision:
    """The replica count for `rule` at `now`, why, and the history to pass to the next sync."""
    behavior = rule.behavior
    history = first_sight(history, current, now)
    corrected = _corrected(rule, current, history, now)
    if corrected is not None:
        return corrected

    proposals = propose_all(rule.metrics, observations, current, behavior.scale_up.tolerance,
                            behavior.scale_down.tolerance)
    proposed = combine(proposals, current)
    if proposed.reason in _HOLD:
        return Decision(
            current=current,
            desired_raw=None,
            replicas=current,
            reason=proposed.reason,
            message=proposed.message,
            proposals=proposals,
            history=prune(history, behavior, now),
        )
    if behavior.panic is not None:
        short = panic_proposals(rule.metrics, observations, current, behavior.scale_up.tolerance,
                                behavior.scale_down.tolerance)
        step = panic_step(behavior.panic, behavior.scale_down.stabilization_window_seconds, short, current,
                          history.panic, now)
        if step.state is not None:
            return _panicking(rule, behavior.panic, step.state, current=current, proposed=proposed,
                              proposals=proposals, step=step, history=history, now=now)
        if history.panic is not None:
            history = dataclasses.replace(history, panic=None)
    return _normalize(rule, current, proposed, proposals, history, now)


def _corrected(rule: Rule, current: int, history: RuleHistory, now: float) -> Decision | None:
    """A count outside [min, max] goes to the bound before anything else (the HPA's out-of-bounds correction:
    no metrics, no stabilization, no policies); None when it is inside."""
    correction = correct_out_of_bounds(current, rule.min_replicas, rule.max_replicas)
    if correction is None:
        return None
    return Decision(
        current=current,
        desired_raw=None,
        replicas=correction.replicas,
        reason=correction.reason,
        message=correction.message,
        proposals=(),
        history=prune(history, rule.behavior, now),
    )


def _panicking(rule: Rule, panic: Panic, state: PanicState, *, current: int, proposed: Stage,
               proposals: tuple[MetricProposal, ...], step: PanicStep, history: RuleHistory, now: float,
               ) -> Decision:
    """A panicking sync: up to the largest of the panic proposal, the HPA's raw desired count and the panic's
    peak, past the scale-up window, bounds and policies applied; never down. The HPA's raw desired count is
    still the recommendation recorded, so the HPA resumes unchanged when the panic ends."""
    history = dataclasses.replace(
        history, recommendations=(*history.recommendations, Recommendation(now, proposed.replicas)))
    wanted = max(proposed.replicas, step.proposed or 0, state.peak)
    replicas, limit = current, ""
    if wanted != current:
        limited = bound_and_limit(rule, current, wanted, history, now)
        replicas = max(limited.replicas, current)
        if replicas != wanted:
            limit = f" ({limited.message})"
    cause = step.cause
    why = (f"{cause.name}{_short_window(rule, cause.name, panic)} is {100 * (cause.ratio or 0.0):.0f}% of "
           f"its target (threshold {panic.threshold_percent:g}%)" if cause is not None
           else f"last above {panic.threshold_percent:g}% {now - state.last_cause:g}s ago")
    if replicas > current:
        reason, message = Reason.PanicScaleUp, f"panic: {why}: {current} -> {replicas}{limit}"
    else:
        reason, message = Reason.PanicHold, f"panic: {why}: holding {current}{limit}"
    history = dataclasses.replace(history, panic=with_peak(state, replicas))
    return Decision(
        current=current,
        desired_raw=max(proposed.replicas, step.proposed or 0),
        replicas=replicas,
        reason=reason,
        message=message,
        proposals=proposals,
        history=prune(history, rule.behavior, now),
    )


def decide_desired(rule: Rule, current: int, desired: int, message: str, history: RuleHistory,
                   now: float) -> Decision:
    """A desired count that does not come from the metrics (the controller's fallback) through the same
    stages as a metric proposal: first sight, out-of-bounds correction, stabilization, bounds and policies.

    As KEDA's fallback, which feeds the HPA a synthetic metric so that its behavior still applies.
    """
    history = first_sight(history, current, now)
    corrected = _corrected(rule, current, history, now)
    if corrected is not None:
        return corrected
    proposed = Stage(min(max(desired, 0), MAX_REPLICAS), Reason.DesiredWithinRange, message)
    return _normalize(rule, current, proposed, (), history, now)


def _normalize(rule: Rule, current: int, proposed: Stage, proposals: tuple[MetricProposal, ...],
               history: RuleHistory, now: float) -> Decision:
    """Stabilization, then bounds and policies; records the desired count (the HPA's normalization)."""
    behavior = rule.behavior
    desired = proposed.replicas
    stable = stabilize(current, desired, history.recommendations,
                       behavior.scale_up.stabilization_window_seconds,
                       behavior.scale_down.stabilization_window_seconds, now)
    history = dataclasses.replace(
        history, recommendations=(*history.recommendations, Recommendation(now, desired)))

    outcome = proposed
    if stable.replicas != desired:
        outcome = stable
    replicas = current
    if stable.replicas != current:
        limited = bound_and_limit(rule, current, stable.replicas, history, now)
        if limited.replicas != stable.replicas:
            outcome = limited
        replicas = limited.replicas
    message = outcome.message
    if outcome.reason is Reason.DesiredWithinRange:
        message = f"{proposed.message}: {current} -> {replicas}"
    return Decision(
        current=current,
        desired_raw=desired,
        replicas=replicas,
        reason=outcome.reason,
        message=message,
        proposals=proposals,
        history=prune(history, behavior, now),
    )


def _short_window(rule: Rule, name: str, panic: Panic) -> str:
    """' over 30s' for a metric whose query was shortened; '' for one whose value is its own short window."""
    metric = next((m for m in rule.metrics if m.name == name), None)
    return f" over {panic.window_seconds}s" if metric is not None and metric.panic_query else ""


def bound_and_limit(rule: Rule, current: int, desired: int, history: RuleHistory, now: float) -> Stage:
    """min/max and the policies of the direction of change, combined as the HPA's
    convertDesiredReplicasWithBehaviorRate: the tighter limit wins; when the policy limit equals the bound,
    the bound's reason (TooManyReplicas / TooFewReplicas) is reported.
    """
    bounded = clamp_to_bounds(desired, rule.min_replicas, rule.max_replicas)
    limited = limit_rate(current, bounded.replicas, rule.behavior.scale_up, rule.behavior.scale_down, history,
                         now)
    if limited.replicas != bounded.replicas or bounded.replicas == desired:
        return limited
    return bounded
