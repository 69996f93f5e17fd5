"""What the controller adds around the engine's decision, as a pure function: pause annotations, schedules,
fallback, scale to zero and the capacity guard.

`plan_rule` takes what a sync gathered (the scale with its annotations, the metric observations, the rule's
history, the count of consecutive all-failed syncs, the capacity seen) and one `now`, and returns the replica
count to apply with its reason. No I/O, so the precedence (paused-replicas > paused > schedules' bounds >
target at zero > fallback > scale to zero > engine, then the capacity guard on any scale-up) is tested as a
table. `plan_replicas` (everything but the annotations) is shared with `simulate` and the demo's replay.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from autoscaler.config.schedules import ScheduleBounds, apply_schedules
from autoscaler.kube.annotations import PAUSED_ANNOTATION, PAUSED_REPLICAS_ANNOTATION
from autoscaler.policy import (
    MAX_REPLICAS,
    Decision,
    MetricObservation,
    Reason,
    Rule,
    RuleHistory,
    decide,
    decide_desired,
    first_sight,
)
from autoscaler.policy import forecast as seasonal
from autoscaler.policy.activation import scale_to_zero
from autoscaler.policy.budget import BudgetedTargets, budgeted, record
from autoscaler.policy.capacity import CapacityObservation, guard_capacity
from autoscaler.policy.forecast import Forecasted

if TYPE_CHECKING:
    from autoscaler.kube.backend import ScaleState

_REPLICA_COUNT = re.compile(r"[0-9]{1,10}")
"""ASCII digits only, matched whole: str.isdigit() and int() accept Arabic-Indic and fullwidth digits and
"1_0", which no user meant as a count, and int() of thousands of digits raises."""


@dataclass(frozen=True)
class Plan:
    """The count to apply this sync and why; `history` is the rule's history if the plan is carried out."""

    current: int
    replicas: int
    reason: Reason
    message: str
    history: RuleHistory
    decision: Decision | None
    problem: str | None = None
    """A bad pause annotation, reported as a Warning event; the engine decides as if it were absent."""
    schedule: ScheduleBounds | None = None
    """The bounds of the schedule windows open at `now` (None: none is open)."""
    withheld: int = 0
    """Replicas the capacity guard held back this sync (0 when it did not limit the scale-up)."""
    budget: BudgetedTargets | None = None
    """The effective targets `overloadBudget` set this sync (None: the rule has none)."""
    forecast: Forecasted | None = None
    """What `forecast` saw and asked for this sync (None: the rule has none)."""

    @property
    def desired_raw(self) -> int | None:
        """The engine's raw desired count (the largest proposal, or the fallback count); None if not used."""
        return None if self.decision is None else self.decision.desired_raw


def paused_replicas(annotations: Mapping[str, str]) -> tuple[bool, int | None, str | None]:
    """(paused, paused replicas, problem) from the annotations; a bad value is a problem, not a pause."""
    raw_count = annotations.get(PAUSED_REPLICAS_ANNOTATION)
    if raw_count is not None:
        text = str(raw_count)
        if _REPLICA_COUNT.fullmatch(text) and int(text) <= MAX_REPLICAS:
            return True, int(text), None
        shown = repr(text) if len(text) <= 40 else f"{text[:40]!r}... ({len(text)} characters)"
        return (
            False,
            None,
            f"annotation {PAUSED_REPLICAS_ANNOTATION}={shown} is not a replica count "
            f"(ASCII digits, 0 to {MAX_REPLICAS}, no sign or spaces); ignored",
        )
    paused = str(annotations.get(PAUSED_ANNOTATION, "")).strip().lower() == "true"
    return paused, None, None


def plan_rule(
    rule: Rule,
    scale: ScaleState,
    observations: Sequence[MetricObservation],
    history: RuleHistory,
    all_failed_syncs: int,
    now: float,
    capacity: CapacityObservation | None = None,
) -> Plan:
    """The controller's plan: the pause annotations first, then `plan_replicas` (shared with simulate)."""
    current = scale.spec_replicas
    paused, pinned, problem = paused_replicas(scale.annotations)
    if pinned is not None:
        return Plan(
            current=current,
            replicas=pinned,
            reason=Reason.PausedReplicas,
            message=f"paused by {PAUSED_REPLICAS_ANNOTATION}: hold {pinned} replicas",
            history=history,
            decision=None,
        )
    if paused:
        return Plan(
            current=current,
            replicas=current,
            reason=Reason.Paused,
            message=f'paused by {PAUSED_ANNOTATION}="true": hold {current} replicas',
            history=history,
            decision=None,
        )
    plan = plan_replicas(
        rule=rule,
        current=current,
        observations=observations,
        history=history,
        all_failed_syncs=all_failed_syncs,
        now=now,
        capacity=capacity,
    )
    return dataclasses.replace(plan, problem=problem) if problem else plan


def plan_replicas(
    rule: Rule,
    current: int,
    observations: Sequence[MetricObservation],
    history: RuleHistory,
    all_failed_syncs: int,
    now: float,
    decide_fn: Callable[[Rule, int, Sequence[MetricObservation], RuleHistory, float], Decision] = decide,
    capacity: CapacityObservation | None = None,
) -> Plan:
    """Target at zero > fallback > scale to zero > engine, then the capacity guard: what the controller,
    `simulate` and the replay apply to a count.

    They all call this very function, so the what-if and the benchmark predict what the running controller
    does. `decide_fn` is the engine's `decide` (a replay's test may spy on it). `now` is also the wall-clock
    (Unix) time at which the rule's schedules are evaluated: an open window's bounds replace the rule's
    before anything else, so the HPA arithmetic and behavior apply on top (as KEDA's cron scaler).
    `capacity` is what the sync saw of free GPUs and Pending replicas; None (or a rule without `capacity`)
    leaves scale-ups unguarded. An `overloadBudget` records the sync's loads first, then divides the targets
    by the headroom they call for.
    """
    scheduled, bounds = apply_schedules(rule, now)
    targets = ahead = None
    if rule.overload_budget is not None:
        history = record(rule, rule.overload_budget, history, current, observations, now)
        scheduled, targets = budgeted(scheduled, history)
    if rule.forecast is not None:
        history = seasonal.record(rule, rule.forecast, history, current, observations, now)
        observations, ahead = seasonal.forecasted(scheduled, rule.forecast, history, current, observations)
    plan = _plan(scheduled, rule.min_replicas, current, observations, history, all_failed_syncs, now,
                 decide_fn)
    plan = _naming_schedule(plan, bounds)
    if bounds is not None or targets is not None or ahead is not None:
        plan = dataclasses.replace(plan, schedule=bounds, budget=targets, forecast=ahead)
    notes = [n for n in (targets.note if targets else None, ahead.note if ahead else None) if n]
    if notes:
        plan = dataclasses.replace(plan, message="; ".join([plan.message, *notes]))
    if rule.capacity is None or capacity is None:
        return plan
    limited = guard_capacity(rule.capacity, current, plan.replicas, capacity, now)
    if limited is None:
        return plan
    return dataclasses.replace(plan, replicas=limited.replicas, reason=limited.reason,
                               message=f"{plan.message}; {limited.message}",
                               withheld=plan.replicas - limited.replicas)


_MIN_REASONS = (Reason.TooFewReplicas, Reason.BelowMinReplicas)
_MAX_REASONS = (Reason.TooManyReplicas, Reason.AboveMaxReplicas)


def _naming_schedule(plan: Plan, bounds: ScheduleBounds | None) -> Plan:
    """The plan, its message naming the schedule when an open window's bound decided the count."""
    if bounds is None:
        return plan
    if plan.reason in _MIN_REASONS:
        note = f"minReplicas {bounds.min_replicas} from {bounds.min_from}"
    elif plan.reason in _MAX_REASONS and bounds.max_from is not None:
        note = f"maxReplicas {bounds.max_replicas} from {bounds.max_from}"
    else:
        return plan
    return dataclasses.replace(plan, message=f"{plan.message}; {note}")


def _plan(
    rule: Rule,
    own_min_replicas: int,
    current: int,
    observations: Sequence[MetricObservation],
    history: RuleHistory,
    all_failed_syncs: int,
    now: float,
    decide_fn: Callable[[Rule, int, Sequence[MetricObservation], RuleHistory, float], Decision],
) -> Plan:
    if current == 0 and own_min_replicas > 0:
        # As the HPA: a target scaled to zero by hand is left alone until someone scales it up again. The
        # HPA records its first sight (recordInitialRecommendation) before this hold, so do we: a 0. A rule
        # that allows zero (minReplicas 0) is woken up by its activation targets or an open schedule.
        return Plan(
            current=current,
            replicas=0,
            reason=Reason.ScalingDisabled,
            message="scaling is disabled since the replica count of the target is zero",
            history=first_sight(history, 0, now),
            decision=None,
        )
    fallback = rule.fallback
    if fallback is not None and all_failed_syncs > fallback.failure_threshold and observations:
        # As KEDA: the fallback count is a desired count fed through the HPA's behavior (stabilization,
        # bounds, policies), not applied directly.
        why = (
            f"every metric failed for {all_failed_syncs} consecutive syncs (> failureThreshold "
            f"{fallback.failure_threshold}): fallback to {fallback.replicas} replicas"
        )
        decision = decide_desired(rule, current, fallback.replicas, why, history, now)
        message = why if decision.replicas == fallback.replicas else f"{why}; {decision.message}"
        return Plan(
            current=current,
            replicas=decision.replicas,
            reason=Reason.Fallback,
            message=message,
            history=decision.history,
            decision=decision,
        )
    if rule.min_replicas == 0:
        stage, history = scale_to_zero(rule, current, observations, history, now)
        if stage is not None:
            return Plan(
                current=current,
                replicas=stage.replicas,
                reason=stage.reason,
                message=stage.message,
                history=history,
                decision=None,
            )
        rule = dataclasses.replace(rule, min_replicas=1)  # KEDA: the HPA decides between 1 and max
    decision = decide_fn(rule, current, observations, history, now)
    return Plan(
        current=current,
        replicas=decision.replicas,
        reason=decision.reason,
        message=decision.message,
        history=decision.history,
        decision=decision,
    )


def count_all_failed(previous: int, observations: Sequence[MetricObservation]) -> int:
    """Consecutive syncs in which every metric failed, after this one (the fallback's counter)."""
    all_failed = bool(observations) and all(o.value is None for o in observations)
    return previous + 1 if all_failed else 0


def describe_metrics(rule: Rule, observations: Sequence[MetricObservation]) -> str:
    """'gpu_utilization=95 (target 80), queue=failed NoSeries (target 50)' for events, logs and status."""
    targets = {m.name: m for m in rule.metrics}
    parts = []
    for o in observations:
        spec = targets.get(o.name)
        target = f"{spec.target:g}{'/replica' if spec.type == 'Total' else ''}" if spec else "?"
        if o.value is not None:
            parts.append(f"{o.name}={o.value:g} (target {target})")
        else:
            reason = (o.error or "failed").split(":", 1)[0]
            parts.append(f"{o.name}=failed {reason} (target {target})")
    return ", ".join(parts)
