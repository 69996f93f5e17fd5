"""The capacity guard (autoscaler.policy.capacity): scale-ups limited to what fits, none while replicas are
stuck Pending; scale-downs and failed capacity queries pass unchanged."""

from __future__ import annotations

import dataclasses

import pytest

from autoscaler.planning.plan import plan_replicas
from autoscaler.policy import Fallback, MetricObservation, Reason, RuleHistory
from autoscaler.policy.capacity import CapacityObservation, guard_capacity
from autoscaler.policy.spec import Capacity, MetricSpec

from .support import make_rule

T0 = 1_700_000_000.0
TWO_PER_REPLICA = Capacity("free", gpus_per_replica=2, pending_grace_seconds=300)


@pytest.mark.parametrize(("current", "wanted", "free", "expected"), [
    (4, 10, 20.0, None),  # 6 more need 12 GPUs: 20 free, fits
    (4, 10, 12.0, None),  # exactly fits
    (4, 10, 11.0, 9),  # floor(11 / 2) = 5 more
    (4, 10, 1.0, 4),  # not one more replica fits: hold
    (4, 10, 0.0, 4),
    (4, 10, -3.0, 4),  # requests above allocatable (overcommitted): nothing fits, never a scale-down
    (4, 10, 1e308, None),  # a huge finite answer is plenty, never an overflow
    (4, 4, 0.0, None),  # no change: nothing to guard
    (6, 2, 0.0, None),  # scale-downs are never limited
    (0, 1, 1.0, 0),  # scale from zero needs a whole replica's GPUs
    (0, 1, 2.0, None),
])
def test_room_for_more_replicas(current: int, wanted: int, free: float, expected: int | None) -> None:
    stage = guard_capacity(TWO_PER_REPLICA, current, wanted, CapacityObservation(free), T0)
    if expected is None:
        assert stage is None
    else:
        assert stage is not None and stage.replicas == expected and stage.reason is Reason.CapacityLimited
        assert f"{free:g} free GPU(s), 2 per replica" in stage.message


def test_a_failed_capacity_query_limits_nothing() -> None:
    assert guard_capacity(TWO_PER_REPLICA, 4, 10, CapacityObservation(None, (), "Timeout: slow"), T0) is None


@pytest.mark.parametrize(("ages", "held"), [
    ((), False),
    ((299.0,), False),  # within the grace: a cluster autoscaler may be adding a node
    ((300.0,), False),  # exactly the grace: not beyond it
    ((300.001,), True),
    ((10.0, 900.0), True),
])
def test_replicas_pending_beyond_the_grace_hold_every_scale_up(ages: tuple[float, ...], held: bool) -> None:
    seen = CapacityObservation(100.0, tuple(T0 - age for age in ages))
    stage = guard_capacity(TWO_PER_REPLICA, 4, 6, seen, T0)
    if held:
        assert stage is not None and stage.replicas == 4 and "Pending as unschedulable" in stage.message
    else:
        assert stage is None
    assert guard_capacity(TWO_PER_REPLICA, 4, 3, seen, T0) is None  # a scale-down is never held


RULE = dataclasses.replace(make_rule(1, 20, metrics=(MetricSpec("load", "q", "Total", 10.0),)),
                           capacity=TWO_PER_REPLICA)


def test_the_plan_applies_the_guard_after_the_engine_and_keeps_the_recommendation() -> None:
    load = (MetricObservation("load", 100.0),)  # the HPA wants 10 replicas
    free = CapacityObservation(6.0)  # room for 3 more
    plan = plan_replicas(
        rule=RULE,
        current=4,
        observations=load,
        history=RuleHistory(),
        all_failed_syncs=0,
        now=T0,
        capacity=free,
    )
    # the engine's own rate limit allows 4 -> 8; the guard lets 3 more in: 1 withheld
    assert (plan.replicas, plan.reason, plan.withheld) == (7, Reason.CapacityLimited, 1)
    assert plan.desired_raw == 10  # what the metrics asked for stays visible and recorded
    assert plan.history.recommendations[-1].replicas == 10
    assert "4 -> 7 (not 8)" in plan.message
    unguarded = plan_replicas(
        rule=RULE, current=4, observations=load, history=RuleHistory(), all_failed_syncs=0, now=T0
    )
    assert (unguarded.replicas, unguarded.withheld) == (8, 0)  # the HPA's own limit: 4 + 4 pods per 15 s


def test_the_guard_does_not_touch_pauses_or_rules_without_capacity() -> None:
    load = (MetricObservation("load", 100.0),)
    plain = dataclasses.replace(RULE, capacity=None)
    plan = plan_replicas(
        rule=plain,
        current=4,
        observations=load,
        history=RuleHistory(),
        all_failed_syncs=0,
        now=T0,
        capacity=CapacityObservation(0.0),
    )
    assert plan.replicas == 8 and plan.reason is not Reason.CapacityLimited


def test_a_fallback_scale_up_is_guarded_too() -> None:
    rule = dataclasses.replace(RULE, fallback=Fallback(1, 9))
    failed = (MetricObservation("load", None, "NoSeries: none"),)
    plan = plan_replicas(
        rule=rule,
        current=4,
        observations=failed,
        history=RuleHistory(),
        all_failed_syncs=2,
        now=T0,
        capacity=CapacityObservation(2.0),
    )
    assert (plan.replicas, plan.reason) == (5, Reason.CapacityLimited)
    assert plan.message.startswith("every metric failed")
