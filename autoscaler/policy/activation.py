"""Scale to zero with KEDA's semantics, as a pure stage: activation targets, the cooldown, 0 <-> 1.

KEDA splits the range: its operator moves a workload between 0 and 1 replicas from the scalers' activation
thresholds, and the HPA decides between 1 and maxReplicas. So here, for a rule whose minReplicas (in effect)
is 0: at 0 replicas the count goes to 1 only when some metric is above its activation target; from 1 or more
it goes straight to 0 (no behavior policies, as KEDA) once every metric has stayed at or below its activation
target for `cooldownSeconds`; otherwise the HPA arithmetic decides with a floor of 1. A failed metric is
neither active nor idle: at 0 it holds, above 0 it never starts a scale to zero (KEDA's isError).

The cooldown runs from `RuleHistory.last_active`: the last sync with a metric above its activation target, or
the rule's first sync, so a controller restarted on an idle service waits a full cooldown before going to 0.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from autoscaler.policy.ages import younger_than
from autoscaler.policy.decision import MetricObservation, Reason, RuleHistory, Stage

if TYPE_CHECKING:
    from autoscaler.policy.spec import MetricSpec, Rule


@dataclass(frozen=True, slots=True)
class Activity:
    """What the metrics say about activation this sync."""

    active: bool
    """Some metric is above its activation target."""
    idle: bool
    """Every metric answered and is at or below its activation target."""
    detail: str
    """The numbers: 'rps=0.7 > activation 0.5', or the failed metrics."""


def activity(metrics: Sequence[MetricSpec], observations: Sequence[MetricObservation]) -> Activity:
    specs = {m.name: m for m in metrics}
    above, failed, quiet = [], [], []
    for o in observations:
        spec = specs.get(o.name)
        threshold = spec.activation_target if spec is not None else 0.0
        if o.value is None:
            failed.append(o.name)
        elif o.value > threshold:
            above.append(f"{o.name}={o.value:g} > activation {threshold:g}")
        else:
            quiet.append(f"{o.name}={o.value:g} <= activation {threshold:g}")
    if above:
        return Activity(True, False, ", ".join(above))
    if failed:
        return Activity(False, False, f"failed: {', '.join(failed)}")
    return Activity(False, True, ", ".join(quiet) or "no metric")


def scale_to_zero(rule: Rule, current: int, observations: Sequence[MetricObservation], history: RuleHistory,
                  now: float) -> tuple[Stage | None, RuleHistory]:
    """The 0 <-> 1 decision for a rule with minReplicas 0, and the history with `last_active` moved on.

    None: the count is 1 or more and stays so; the HPA arithmetic decides, with minReplicas 1.
    """
    seen = activity(rule.metrics, observations)
    last_active = history.last_active
    if seen.active or last_active is None:
        last_active = now
    if last_active != history.last_active:
        history = dataclasses.replace(history, last_active=last_active)
    return _stage(rule, current, seen, now - last_active), history


def _stage(rule: Rule, current: int, seen: Activity, idle_for: float) -> Stage | None:
    if current == 0:
        if seen.active:
            return Stage(1, Reason.Activated, f"activated ({seen.detail}): 0 -> 1")
        if not seen.idle:
            return Stage(0, Reason.MetricsFailed, f"at 0 replicas, metrics {seen.detail}: hold 0")
        return Stage(0, Reason.Idle, f"idle ({seen.detail}): stay at 0")
    if seen.idle and idle_for >= younger_than(rule.cooldown_seconds):
        return Stage(0, Reason.ScaledToZero, f"idle for {idle_for:.0f}s >= cooldownSeconds "
                                             f"{rule.cooldown_seconds} ({seen.detail}): {current} -> 0")
    return None
