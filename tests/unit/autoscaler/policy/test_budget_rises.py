"""The overload budget's rises kept in order from minute to minute (`budget.Rises`): the headroom after every
sync is the one computed from the loads alone (`headroom`, which sorts every rise: the reference), whatever
the loads, gaps, failed minutes, the series' length and the start-up horizon."""

from __future__ import annotations

import dataclasses

from hypothesis import given, settings
from hypothesis import strategies as st

from autoscaler.policy import MetricObservation, RuleHistory
from autoscaler.policy.budget import Rises, headroom, kept_minutes, record
from autoscaler.policy.spec import MetricSpec, OverloadBudget, Rule

from .support import T0, make_rule

RATE = MetricSpec("rate", "sum(rate(r[1m]))", "Total", 9.0)
MINUTE_T0 = (T0 // 60) * 60


def budget_rule(budget: OverloadBudget) -> Rule:
    return dataclasses.replace(make_rule(metrics=(RATE,)), overload_budget=budget)


loads_st = st.one_of(st.none(), st.sampled_from([0.0, 1.0, 2.0, 3.0]),
                     st.floats(0, 1e6, allow_nan=False), st.floats(1e-300, 1e300))
sync_st = st.tuples(st.sampled_from([0.0, 0.25, 1.0, 1.0, 1.0, 1.0, 2.0, 7.0, 90.0]), loads_st)


def check(budget: OverloadBudget, syncs: list[tuple[float, float | None]]) -> None:
    rule = budget_rule(budget)
    horizon = max(1, -(-budget.startup_seconds // 60))
    history = RuleHistory()
    minute = 0.0
    for step, value in syncs:
        minute += step
        now = MINUTE_T0 + 60 * minute
        history = record(rule, budget, history, 4, [MetricObservation("rate", value)], now)
        [series] = history.budget
        closed = series.loads[:-1]
        assert series.derived == headroom(closed, horizon, budget.percent_of_minutes)
        assert isinstance(series.kept, Rises)
        assert list(series.kept.ordered) == sorted(later / earlier for earlier, later
                                                   in zip(closed, closed[horizon:], strict=False)
                                                   if earlier is not None and later is not None
                                                   and earlier > 0)
        assert len(series.loads) <= kept_minutes(budget)


@settings(max_examples=60, deadline=None)
@given(syncs=st.lists(sync_st, min_size=1, max_size=400), startup=st.sampled_from([0, 60, 61, 180, 600]),
       percent=st.sampled_from([0.5, 5.0, 10.0, 50.0]))
def test_the_kept_rises_give_the_headroom_the_loads_give(syncs: list[tuple[float, float | None]],
                                                         startup: int, percent: float) -> None:
    check(OverloadBudget(percent_of_minutes=percent, startup_seconds=startup), syncs)


def test_past_a_day_each_minute_adds_one_rise_and_drops_one() -> None:
    """A day and a half of minutes, so the series is full and slides: still the reference's headroom."""
    budget = OverloadBudget(percent_of_minutes=5.0, startup_seconds=120)
    syncs = [(1.0, 10.0 + (minute * 37) % 23 if minute % 97 else None) for minute in range(2_200)]
    check(budget, syncs)
