"""`overloadBudget` (autoscaler.policy.budget): loads kept minute by minute, the headroom as the percentile of
the rises over the start-up time, and the targets divided by it."""

from __future__ import annotations

import dataclasses

import pytest

from autoscaler.policy import MetricObservation, RuleHistory
from autoscaler.policy.budget import (
    LOOKBACK_MINUTES,
    MAX_HEADROOM,
    MIN_HISTORY_MINUTES,
    budgeted,
    headroom,
    record,
)
from autoscaler.policy.spec import MetricSpec, OverloadBudget, Rule

from .support import T0, make_rule

RATE = MetricSpec("rate", "sum(rate(r[1m]))", "Total", 9.0)
UTIL = MetricSpec("util", "avg(u)", "Average", 90.0)
BUDGET = OverloadBudget(percent_of_minutes=10.0, startup_seconds=120)
MINUTE_T0 = (T0 // 60) * 60


def budget_rule(*metrics: MetricSpec, budget: OverloadBudget = BUDGET) -> Rule:
    return dataclasses.replace(make_rule(metrics=metrics or (RATE,)), overload_budget=budget)


def test_the_headroom_is_the_rise_only_the_budgets_share_of_minutes_exceeds() -> None:
    # 100 rises over one minute: every tenth is 1.5, the others 1.0
    loads = [10.0]
    for minute in range(100):
        loads.append(loads[-1] * (1.5 if minute % 10 == 0 else 1.0))
    assert headroom(loads, 1, 10.0) == 1.0  # 10 % of the minutes may rise past it: the 1.5 rises may
    assert headroom(loads, 1, 5.0) == 1.5  # 5 %: half of them must be covered
    assert headroom(loads, 1, 0.5) == 1.5
    assert headroom([10.0] * 92, 2, 10.0) == 1.0


def test_a_falling_load_needs_no_headroom_and_a_wild_one_gets_at_most_the_cap() -> None:
    assert headroom([float(100 - m) for m in range(90)], 2, 1.0) == 1.0  # never above the target
    assert headroom([1.0, 100.0] * 45, 1, 50.0) == MAX_HEADROOM


def test_too_little_history_is_no_headroom() -> None:
    assert headroom([10.0] * (MIN_HISTORY_MINUTES + 1), 2, 5.0) is None  # 59 rises
    assert headroom([10.0] * (MIN_HISTORY_MINUTES + 2), 2, 5.0) == 1.0
    assert headroom([None, 0.0] * 100, 1, 5.0) is None  # unknown or zero loads make no rise


def sync(rule: Rule, history: RuleHistory, minute: float, value: float | None, current: int = 4,
         ) -> RuleHistory:
    observations = [MetricObservation(m.name, value) for m in rule.metrics]
    return record(rule, BUDGET, history, current, observations, MINUTE_T0 + 60 * minute)


def test_each_minute_keeps_its_largest_load_and_a_gap_is_unknown() -> None:
    rule = budget_rule()
    history = RuleHistory()
    for minute, value in [(0, 5.0), (0.25, 8.0), (0.5, 6.0), (0.75, None), (1, 7.0), (3.5, 2.0)]:
        history = sync(rule, history, minute, value)
    [series] = history.budget
    assert series.loads == (8.0, 7.0, None, 2.0)


def test_an_average_metric_is_kept_as_load_value_times_replicas() -> None:
    rule = budget_rule(UTIL)
    history = sync(rule, RuleHistory(), 0, 50.0, current=6)
    assert history.budget[0].loads == (300.0,)


def test_a_clock_that_goes_back_changes_nothing_and_a_day_is_kept_at_most() -> None:
    rule = budget_rule()
    history = RuleHistory()
    for minute in range(LOOKBACK_MINUTES + 50):
        history = sync(rule, history, minute, 10.0 + minute % 3)
    kept = history.budget
    assert len(kept[0].loads) == LOOKBACK_MINUTES + 2  # a day of rises over 2 minutes
    assert sync(rule, history, 5, 99.0).budget == kept


def test_targets_are_divided_by_the_headroom_once_there_is_history() -> None:
    rule = budget_rule(RATE, UTIL)
    history = RuleHistory()
    for minute in range(MIN_HISTORY_MINUTES + 3):
        history = sync(rule, history, minute, 10.0 if minute % 4 else 20.0)  # a doubling every 4 minutes
    early, note = budgeted(rule, sync(rule, RuleHistory(), 0, 10.0))
    assert [m.target for m in early.metrics] == [9.0, 90.0] and note.note is not None
    assert "under 60 min of history for rate, util" in note.note
    late, targets = budgeted(rule, history)
    assert targets.note is None
    assert [m.target for m in late.metrics] == pytest.approx([4.5, 45.0])  # headroom 2x: a quarter doubles
    assert targets.targets == (("rate", pytest.approx(4.5)), ("util", pytest.approx(45.0)))
