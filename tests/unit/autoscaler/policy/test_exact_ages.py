"""Windows and periods compared exactly for decimal timestamps (simulate's `t`), at the boundary both ways.

16.4 - 1.4 is 14.999999999999998 in floats and 16.03 - 1.03 is 15.000000000000002: an entry exactly 15 s old
must be outside a 15 s window or period (the HPA: `timestamp.After(now - 15s)` is false), and one 15 s old
must not be outdated for a 15 s longest period (`timestamp.Before(now - 15s)` is false).
"""

from __future__ import annotations

import pytest

from autoscaler.policy import MetricObservation, Reason, Recommendation, RuleHistory, decide
from autoscaler.policy.ages import older_than, younger_than
from autoscaler.policy.decision import ScaleEvent
from autoscaler.policy.spec import DEFAULT_SCALE_DOWN, DEFAULT_SCALE_UP

from .support import T0, make_rule, rules

SHORT_WINDOW = make_rule(1, 100, rules(DEFAULT_SCALE_UP, "Pods 100/15", window=0),
                         rules(DEFAULT_SCALE_DOWN, "Percent 100/15", window=15))
SHORT_PERIOD = make_rule(1, 100, rules(DEFAULT_SCALE_UP, "Pods 4/15", window=0),
                         rules(DEFAULT_SCALE_DOWN, window=0))


def load(value: float) -> list[MetricObservation]:
    return [MetricObservation("load", value)]


@pytest.mark.parametrize(
    ("then", "now", "counted"),
    [(1.4, 16.4, False), (1.4, 16.399999, True), (1.03, 16.03, False), (T0 + 1.4, T0 + 16.4, False),
     (T0 + 1.4, T0 + 16.399999, True)],
    ids=["exactly-15s-float-below", "a-microsecond-inside", "exactly-15s-float-above", "epoch-exactly-15s",
         "epoch-a-microsecond-inside"],
)
def test_a_recommendation_exactly_one_window_old_is_outside_it(
        then: float, now: float, counted: bool) -> None:
    history = RuleHistory((Recommendation(then, 10),))
    decision = decide(SHORT_WINDOW, 10, load(2.0), history, now)
    expected = (10, Reason.ScaleDownStabilized) if counted else (2, Reason.DesiredWithinRange)
    assert (decision.replicas, decision.reason) == expected


@pytest.mark.parametrize(
    ("then", "now", "counted"),
    [(1.4, 16.4, False), (1.4, 16.399999, True), (T0 + 1.4, T0 + 16.4, False)],
    ids=["exactly-15s", "a-microsecond-inside", "epoch-exactly-15s"],
)
def test_a_scale_event_exactly_one_period_old_no_longer_counts(
        then: float, now: float, counted: bool) -> None:
    history = RuleHistory((Recommendation(then, 6),), (ScaleEvent(then, 4),))  # 6 -> 10 at `then`
    decision = decide(SHORT_PERIOD, 10, load(50.0), history, now)
    assert decision.replicas == (10 if counted else 14)


@pytest.mark.parametrize(
    ("then", "now", "outdated"),
    [(1.03, 16.03, False), (1.03, 16.030001, True), (1.4, 16.4, False), (T0 + 1.03, T0 + 16.03, False)],
    ids=["exactly-15s-float-above", "a-microsecond-past", "exactly-15s-float-below", "epoch-exactly-15s"],
)
def test_an_event_is_outdated_only_when_strictly_older_than_the_longest_period(
        then: float, now: float, outdated: bool) -> None:
    history = RuleHistory(scale_up_events=(ScaleEvent(then, 4),), longest_up_period=15)
    stored = history.with_scale(now, 10, 12).scale_up_events
    assert stored == ((ScaleEvent(now, 2),) if outdated else (ScaleEvent(then, 4), ScaleEvent(now, 2)))


def test_a_recommendation_one_window_old_is_pruned_however_the_float_rounds() -> None:
    history = RuleHistory((Recommendation(1.4, 10), Recommendation(2.0, 9)))
    decision = decide(SHORT_WINDOW, 10, load(2.0), history, 16.4)
    assert decision.history.recommendations[0] == Recommendation(2.0, 9)


@pytest.mark.parametrize(
    ("then", "now", "age"),
    [(1.4, 16.4, 15), (1.03, 16.03, 15), (T0 + 1.4, T0 + 16.4, 15), (T0, T0 + 0.000_001, 0.000_001)],
)
def test_bounds_compare_the_decimal_age(then: float, now: float, age: float) -> None:
    difference = now - then
    assert not difference < younger_than(age) and difference >= younger_than(age)
    assert not difference > older_than(age)
    assert difference < younger_than(age + 0.000_001) and difference > older_than(age - 0.000_001)


def test_the_premise_of_this_file() -> None:
    assert 16.4 - 1.4 < 15 and 16.03 - 1.03 > 15
