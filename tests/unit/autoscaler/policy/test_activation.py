"""Scale to zero with KEDA's semantics (autoscaler.policy.activation), through the controller's own plan."""

from __future__ import annotations

import dataclasses

import pytest

from autoscaler.planning.plan import plan_replicas
from autoscaler.policy import MetricObservation, Reason, RuleHistory
from autoscaler.policy.activation import activity, scale_to_zero
from autoscaler.policy.spec import MetricSpec, Schedule

from .support import make_rule

T0 = 1_700_000_000.0
RPS = MetricSpec("rps", "q", "Total", 10.0, activation_target=0.5)
QUEUE = MetricSpec("queue", "q2", "Average", 4.0)  # activation target 0 (the default)
RULE = dataclasses.replace(make_rule(0, 8, metrics=(RPS, QUEUE)), cooldown_seconds=300)


def obs(rps: float | None, queue: float | None = 0.0) -> tuple[MetricObservation, ...]:
    return (MetricObservation("rps", rps, None if rps is not None else "NoSeries: none"),
            MetricObservation("queue", queue, None if queue is not None else "Timeout: slow"))


@pytest.mark.parametrize(("rps", "queue", "active", "idle"), [
    (0.0, 0.0, False, True),
    (0.5, 0.0, False, True),  # at the activation target: not above it
    (0.51, 0.0, True, False),
    (0.0, 0.01, True, False),  # the default activation target is 0: any queue wakes it up
    (None, 0.0, False, False),  # a failed metric is neither active nor idle (KEDA's isError)
    (0.7, None, True, False),  # active wins over a failed metric
])
def test_activity(rps: float | None, queue: float | None, active: bool, idle: bool) -> None:
    seen = activity(RULE.metrics, obs(rps, queue))
    assert (seen.active, seen.idle) == (active, idle)


@pytest.mark.parametrize(("rps", "queue", "expected"), [
    (0.0, 0.0, (0, Reason.Idle)),
    (0.5, 0.0, (0, Reason.Idle)),
    (0.7, 0.0, (1, Reason.Activated)),  # to 1, not to the 1 the HPA would compute from 0.7/10
    (50.0, 0.0, (1, Reason.Activated)),  # KEDA goes 0 -> 1; the HPA takes over from the next sync
    (None, 0.0, (0, Reason.MetricsFailed)),
])
def test_at_zero_only_an_activation_wakes_the_rule(rps: float | None, queue: float | None,
                                                    expected: tuple[int, Reason]) -> None:
    plan = plan_replicas(
        rule=RULE, current=0, observations=obs(rps, queue), history=RuleHistory(), all_failed_syncs=0, now=T0
    )
    assert (plan.replicas, plan.reason) == expected
    assert plan.history.last_active == T0  # the first sight starts the cooldown clock


def replay(start: int, values: list[tuple[float | None, int]], step: float = 15.0,
           ) -> list[tuple[int, Reason]]:
    """(replicas, reason) after each sync of (rps, queue=0) values, every `step` seconds, applied at once."""
    history, current, out = RuleHistory(), start, []
    for i, (rps, _) in enumerate(values):
        now = T0 + i * step
        plan = plan_replicas(
            rule=RULE, current=current, observations=obs(rps), history=history, all_failed_syncs=0, now=now
        )
        history, current = plan.history.with_scale(now, current, plan.replicas), plan.replicas
        out.append((current, plan.reason))
    return out


def test_goes_to_zero_only_after_a_full_cooldown_of_idle_syncs() -> None:
    # active at t=0 (rps 20 at 2 replicas: the HPA keeps 2), then idle; cooldown 300 s = 20 syncs of 15 s
    steps = replay(2, [(20.0, 0)] + [(0.0, 0)] * 21)
    assert all(r >= 1 for r, _ in steps[:20]), steps  # t=15..285: idle for less than 300 s
    assert steps[20] == (0, Reason.ScaledToZero)  # t=300: idle for exactly cooldownSeconds
    assert steps[21] == (0, Reason.Idle)


def test_a_failed_metric_never_starts_a_scale_to_zero() -> None:
    steps = replay(2, [(20.0, 0)] + [(None, 0)] * 40)
    assert all(r >= 1 for r, _ in steps), steps


def test_an_activation_during_the_cooldown_restarts_it() -> None:
    steps = replay(1, [(20.0, 0)] + [(0.0, 0)] * 10 + [(0.6, 0)] + [(0.0, 0)] * 20)
    assert steps[30][0] == 1  # t=450 : only 285 s since the activation at t=165
    assert steps[31] == (0, Reason.ScaledToZero)  # t=465: 300 s since t=165


def test_between_one_and_max_the_hpa_decides_with_a_floor_of_one() -> None:
    history = RuleHistory()
    plan = plan_replicas(
        rule=RULE, current=4, observations=obs(0.2, 0.0), history=history, all_failed_syncs=0, now=T0
    )  # rps 0.2 -> HPA wants 1; not yet idle long
    assert plan.reason is not Reason.ScaledToZero and plan.replicas >= 1
    assert plan.decision is not None  # the engine decided


def test_the_cooldown_starts_at_first_sight_so_a_restart_waits_a_full_cooldown() -> None:
    stage, history = scale_to_zero(RULE, 3, obs(0.0), RuleHistory(), T0)
    assert stage is None and history.last_active == T0
    stage, _ = scale_to_zero(RULE, 3, obs(0.0), history, T0 + 299.9)
    assert stage is None
    stage, _ = scale_to_zero(RULE, 3, obs(0.0), history, T0 + 300)
    assert stage is not None and stage.replicas == 0


def test_a_rule_with_min_replicas_above_zero_never_scales_to_zero() -> None:
    rule = dataclasses.replace(RULE, min_replicas=1)
    history, current = RuleHistory(), 1
    for i in range(60):
        plan = plan_replicas(
            rule=rule,
            current=current,
            observations=obs(0.0),
            history=history,
            all_failed_syncs=0,
            now=T0 + 15 * i,
        )
        history, current = plan.history.with_scale(T0 + 15 * i, current, plan.replicas), plan.replicas
    assert current == 1


def test_a_schedule_raising_the_minimum_wakes_a_rule_at_zero() -> None:
    rule = dataclasses.replace(RULE, schedules=(Schedule("0 9 * * *", "UTC", 3600, 3, None),))
    nine = 1_700_038_800.0  # 2023-11-15T09:00:00Z
    plan = plan_replicas(
        rule=rule, current=0, observations=obs(0.0), history=RuleHistory(), all_failed_syncs=0, now=nine + 60
    )
    assert (plan.replicas, plan.reason) == (3, Reason.BelowMinReplicas)
    assert "minReplicas 3 from schedules[0]" in plan.message and plan.schedule is not None
    after = plan_replicas(
        rule=rule,
        current=0,
        observations=obs(0.0),
        history=RuleHistory(),
        all_failed_syncs=0,
        now=nine + 3600 + 60,
    )
    assert (after.replicas, after.reason) == (0, Reason.Idle)
