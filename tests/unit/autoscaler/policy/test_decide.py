"""decide() on one rule: proposals, tolerance, failed metrics, corrections, first sight, history."""

from __future__ import annotations

import pytest

from autoscaler.policy import MetricObservation, Reason, Recommendation, RuleHistory, decide
from autoscaler.policy.decision import ScaleEvent
from autoscaler.policy.proposal import propose
from autoscaler.policy.spec import DEFAULT_SCALE_DOWN, DEFAULT_SCALE_UP, MetricSpec

from .support import T0, history, make_rule, recs, rules

UTIL = MetricSpec("util", "avg(util)", "Average", 80.0)
QUEUE = MetricSpec("queue", "sum(queue)", "Total", 50.0)
SEEN = history(recommendations=recs("1@100000"))  # a rule seen long ago: no first-sight record, no window
FAST = make_rule(
    1,
    100,
    rules(DEFAULT_SCALE_UP, "Pods 1000/15", window=0),
    rules(DEFAULT_SCALE_DOWN, window=0),
    metrics=(UTIL, QUEUE),
)


def obs(util: float | None = None, queue: float | None = None) -> list[MetricObservation]:
    return [
        MetricObservation("util", util, None if util is not None else "timeout"),
        MetricObservation("queue", queue, None if queue is not None else "no series"),
    ]


# id, metric, value, current, expected proposal
PROPOSALS = [
    ("average-up", UTIL, 120.0, 4, 6),  # ratio 1.5 -> ceil(1.5*4)
    ("average-down", UTIL, 40.0, 4, 2),
    ("average-inside-upper-band", UTIL, 88.0, 4, 4),  # ratio 1.1 == 1 + tolerance: inside
    ("average-inside-lower-band", UTIL, 72.0, 4, 4),  # ratio 0.9 == 1 - tolerance: inside
    ("average-just-above-band", UTIL, 88.1, 4, 5),
    ("total-up", QUEUE, 410.0, 4, 9),  # ratio 410/200 -> ceil(410/50)
    ("total-down", QUEUE, 20.0, 4, 1),
    ("total-inside-band", QUEUE, 210.0, 4, 4),  # ratio 1.05
    ("total-from-zero-replicas", QUEUE, 120.0, 0, 3),
    ("average-from-zero-replicas", UTIL, 120.0, 0, 2),  # HPA: ceil(ratio) when current is 0
    ("average-from-zero-no-tolerance-band", UTIL, 80.0, 0, 1),  # ratio 1.0 still proposes 1, not 0
    ("average-zero-load-at-zero", UTIL, 0.0, 0, 0),
    ("negative-value-proposes-zero", UTIL, -5.0, 4, 0),
]


@pytest.mark.parametrize(
    ("id_", "metric", "value", "current", "expected"), PROPOSALS, ids=[p[0] for p in PROPOSALS]
)
def test_proposal(id_: str, metric: MetricSpec, value: float, current: int, expected: int) -> None:
    proposal = propose(metric, MetricObservation(metric.name, value), current, 0.1, 0.1)
    assert proposal.replicas == expected
    assert proposal.error is None


def test_asymmetric_tolerance_uses_scale_up_above_and_scale_down_below() -> None:
    assert propose(UTIL, MetricObservation("util", 100.0), 4, 0.3, 0.0).replicas == 4  # 1.25 <= 1.3
    assert propose(UTIL, MetricObservation("util", 79.0), 4, 0.3, 0.0).replicas == 4  # ceil(3.95)
    assert propose(UTIL, MetricObservation("util", 60.0), 4, 0.3, 0.0).replicas == 3


def test_largest_proposal_wins() -> None:
    decision = decide(FAST, 4, obs(util=120.0, queue=410.0), SEEN, T0)  # 6 and 9
    assert (decision.desired_raw, decision.replicas, decision.reason) == (9, 9, Reason.DesiredWithinRange)
    assert [p.replicas for p in decision.proposals] == [6, 9]
    assert "queue = 410 (target 50) proposes 9: 4 -> 9" in decision.message


def test_within_tolerance_holds_and_records() -> None:
    decision = decide(FAST, 4, obs(util=84.0, queue=190.0), SEEN, T0)
    assert (decision.replicas, decision.reason, decision.desired_raw) == (4, Reason.WithinTolerance, 4)
    assert decision.history.recommendations[-1] == Recommendation(T0, 4)


def test_failed_metric_does_not_block_scale_up() -> None:
    decision = decide(FAST, 3, obs(util=None, queue=200.0), SEEN, T0)  # queue proposes 4
    assert (decision.replicas, decision.reason) == (4, Reason.DesiredWithinRange)
    assert decision.proposals[0].error == "timeout"


def test_failed_metric_blocks_scale_down_and_records_nothing() -> None:
    decision = decide(FAST, 5, obs(util=None, queue=150.0), SEEN, T0)  # queue proposes 3 < 5
    assert (decision.replicas, decision.reason, decision.desired_raw) == (
        5,
        Reason.MetricsPartiallyFailed,
        None,
    )
    assert decision.history == SEEN
    assert "no series" not in decision.message and "timeout" in decision.message


def test_failed_metric_with_largest_equal_to_current_proceeds() -> None:
    decision = decide(FAST, 4, obs(util=None, queue=200.0), SEEN, T0)
    assert decision.reason is Reason.WithinTolerance


def test_every_metric_failed_holds_and_records_nothing() -> None:
    decision = decide(FAST, 5, obs(), SEEN, T0)
    assert (decision.replicas, decision.reason, decision.desired_raw) == (5, Reason.MetricsFailed, None)
    assert decision.history == SEEN
    assert "util: timeout" in decision.message and "queue: no series" in decision.message


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), float("-inf")], ids=["nan", "inf", "-inf"])
def test_non_finite_value_is_a_failed_metric(bad: float) -> None:
    decision = decide(FAST, 5, obs(util=bad, queue=None), SEEN, T0)
    assert decision.reason is Reason.MetricsFailed


def test_missing_observation_is_a_failed_metric() -> None:
    decision = decide(FAST, 5, [MetricObservation("queue", 500.0)], SEEN, T0)
    assert decision.replicas == 10
    assert decision.proposals[0].error == "no value for this metric"


@pytest.mark.parametrize(
    ("current", "replicas", "reason"),
    [(12, 10, Reason.AboveMaxReplicas), (1, 2, Reason.BelowMinReplicas), (0, 2, Reason.BelowMinReplicas)],
    ids=["above-max", "below-min", "zero-below-min"],
)
def test_out_of_bounds_corrected_without_metrics(current: int, replicas: int, reason: Reason) -> None:
    rule = make_rule(2, 10, metrics=(UTIL,))
    # Metrics failing, windows and policies would all say "hold": the correction ignores them.
    decision = decide(rule, current, [MetricObservation("util", None, "down")], SEEN, T0)
    assert (decision.replicas, decision.reason, decision.desired_raw) == (replicas, reason, None)
    assert decision.history.recommendations == SEEN.recommendations  # nothing recorded
    assert f"{current}" in decision.message


def test_first_sync_records_current_so_no_scale_down_before_one_window() -> None:
    rule = make_rule(1, 10, metrics=(UTIL,))  # default scale-down window 300 s
    first = decide(rule, 8, [MetricObservation("util", 10.0)], RuleHistory(), T0)
    assert (first.replicas, first.reason) == (8, Reason.ScaleDownStabilized)
    assert first.history.recommendations == (Recommendation(T0, 8), Recommendation(T0, 1))
    later = decide(rule, 8, [MetricObservation("util", 10.0)], first.history, T0 + 299)
    assert later.replicas == 8
    after_window = decide(rule, 8, [MetricObservation("util", 10.0)], later.history, T0 + 300)
    assert after_window.replicas == 1  # the first-sight 8 and the 1s only; default policy allows 100 %


def test_first_sync_records_current_even_when_metrics_fail() -> None:
    rule = make_rule(1, 10, metrics=(UTIL,))
    decision = decide(rule, 8, [MetricObservation("util", None)], RuleHistory(), T0)
    assert decision.history.recommendations == (Recommendation(T0, 8),)


def test_first_sync_does_not_hold_scale_up() -> None:
    rule = make_rule(1, 10, metrics=(UTIL,))
    decision = decide(rule, 2, [MetricObservation("util", 160.0)], RuleHistory(), T0)
    assert decision.replicas == 4


@pytest.mark.parametrize(
    ("direction", "current", "value", "reason"),
    [("up", 4, 400.0, Reason.ScalingDisabled), ("down", 4, 10.0, Reason.ScalingDisabled)],
)
def test_select_policy_disabled_blocks_that_direction_only(
    direction: str, current: int, value: float, reason: Reason
) -> None:
    up = rules(DEFAULT_SCALE_UP, select="Disabled" if direction == "up" else None, window=0)
    down = rules(DEFAULT_SCALE_DOWN, select="Disabled" if direction == "down" else None, window=0)
    rule = make_rule(1, 100, up, down, metrics=(UTIL,))
    blocked = decide(rule, current, [MetricObservation("util", value)], SEEN, T0)
    assert (blocked.replicas, blocked.reason) == (current, reason)
    other_value = 10.0 if direction == "up" else 400.0
    allowed = decide(rule, current, [MetricObservation("util", other_value)], SEEN, T0)
    assert allowed.replicas != current


@pytest.mark.parametrize(
    ("age", "limit"),
    [(59.0, 10), (59.999, 10), (60.0, 12), (61.0, 12)],
    ids=["inside", "just-inside", "exactly-period", "outside"],
)
def test_scale_event_counts_while_age_strictly_less_than_period(age: float, limit: int) -> None:
    rule = make_rule(
        1,
        100,
        rules(DEFAULT_SCALE_UP, "Pods 2/60", window=0),
        rules(DEFAULT_SCALE_DOWN, window=0),
        metrics=(UTIL,),
    )
    given = RuleHistory(SEEN.recommendations, (ScaleEvent(T0 - age, 2),))  # 8 -> 10 `age` seconds ago
    decision = decide(rule, 10, [MetricObservation("util", 800.0)], given, T0)
    assert decision.replicas == limit
    assert decision.reason is Reason.ScaleUpLimit


def test_recommendations_are_pruned_to_the_windows_and_scale_events_are_kept() -> None:
    """Scale events are not pruned by age: an event past its own direction's longest period still counts
    for a longer period of the other direction (here the scale-down at 90 s for the 120 s scale-up
    policy). `with_scale` bounds them by overwriting outdated ones, as the HPA."""
    rule = make_rule(
        1,
        100,
        rules(DEFAULT_SCALE_UP, "Pods 4/120 + Percent 50/30", window=0),
        rules(DEFAULT_SCALE_DOWN, "Percent 50/60", window=300),
        metrics=(UTIL,),
    )
    given = RuleHistory(
        (Recommendation(T0 - 400, 3), Recommendation(T0 - 300, 4), Recommendation(T0 - 299, 6)),
        (ScaleEvent(T0 - 130, 1), ScaleEvent(T0 - 59, 1)),
        (ScaleEvent(T0 - 90, -1), ScaleEvent(T0 - 89, -1)),
    )
    decision = decide(rule, 5, [MetricObservation("util", 80.0)], given, T0)
    assert decision.history.recommendations == (Recommendation(T0 - 299, 6), Recommendation(T0, 5))
    assert decision.history.scale_up_events == given.scale_up_events
    assert decision.history.scale_down_events == given.scale_down_events
    # a second later, 5 replicas with +1 and -2 within 120 s: the Pods policy counts from 6 and allows 10
    later = decide(rule, 5, [MetricObservation("util", 800.0)], decision.history, T0 + 1)
    assert (later.replicas, later.reason) == (10, Reason.ScaleUpLimit)


def test_pruning_keeps_the_newest_recommendation_as_a_seen_marker() -> None:
    rule = make_rule(
        1, 100, rules(DEFAULT_SCALE_UP, window=0), rules(DEFAULT_SCALE_DOWN, window=0), metrics=(UTIL,)
    )
    decision = decide(rule, 5, [MetricObservation("util", None)], SEEN, T0)
    assert decision.history.recommendations == SEEN.recommendations


def test_with_scale_records_direction_and_size() -> None:
    h = RuleHistory().with_scale(T0, 3, 5).with_scale(T0 + 1, 5, 2)
    assert h.scale_up_events == (ScaleEvent(T0, 2),)
    assert h.scale_down_events == (ScaleEvent(T0 + 1, -3),)
    assert h.with_scale(T0 + 2, 2, 2) is h


def test_decision_history_never_contains_scale_events_of_this_sync() -> None:
    decision = decide(FAST, 4, obs(util=160.0, queue=None), SEEN, T0)
    assert decision.replicas == 8
    assert decision.history.scale_up_events == ()


def test_policy_limits_count_applied_events_across_syncs() -> None:
    rule = make_rule(
        1,
        100,
        rules(DEFAULT_SCALE_UP, "Pods 2/60", window=0),
        rules(DEFAULT_SCALE_DOWN, window=0),
        metrics=(UTIL,),
    )
    h, current, seen = SEEN, 2, []
    for step in range(6):
        now = T0 + 15 * step
        d = decide(rule, current, [MetricObservation("util", 800.0)], h, now)
        h, current = d.history.with_scale(now, current, d.replicas), d.replicas
        seen.append(current)
    assert seen == [4, 4, 4, 4, 6, 6]  # 2 pods per 60 s, counted from the period's start


def test_min_zero_average_rule_scales_up_from_zero() -> None:
    rule = make_rule(0, 10, metrics=(UTIL,))
    decision = decide(rule, 0, [MetricObservation("util", 200.0)], RuleHistory(), T0)
    # as the HPA's getUsageRatioReplicaCount at 0 replicas: ceil(200/80) = 3, no tolerance band
    assert (decision.desired_raw, decision.replicas) == (3, 3)
    idle = decide(rule, 0, [MetricObservation("util", 0.0)], RuleHistory(), T0)
    assert (idle.replicas, idle.reason) == (0, Reason.WithinTolerance)
