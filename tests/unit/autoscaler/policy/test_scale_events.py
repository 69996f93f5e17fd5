"""Scale events stored as the HPA's storeScaleEvent: outdated ones overwritten, never pruned by age."""

from __future__ import annotations

from autoscaler.policy import MetricObservation, RuleHistory, decide
from autoscaler.policy.decision import ScaleEvent
from autoscaler.policy.spec import DEFAULT_SCALE_DOWN, DEFAULT_SCALE_UP

from .hpa_reference import ReferenceHpa
from .support import T0, make_rule, rules

# a history whose rule has a longest scale-up period of 60 s and a longest scale-down period of 300 s
KNOWN = RuleHistory(longest_up_period=60, longest_down_period=300)


def up_events(*ages: float) -> RuleHistory:
    return RuleHistory(scale_up_events=tuple(ScaleEvent(T0 - a, 1) for a in ages), longest_up_period=60,
                       longest_down_period=300)


def test_the_new_event_overwrites_the_last_outdated_one_of_its_direction() -> None:
    h = up_events(100, 90, 10).with_scale(T0, 5, 8)
    # 100 and 90 are older than 60 s: both marked, the last of them (in list order) overwritten
    assert h.scale_up_events == (ScaleEvent(T0 - 100, 1, True), ScaleEvent(T0, 3), ScaleEvent(T0 - 10, 1))


def test_list_order_not_age_picks_the_overwritten_event() -> None:
    # after earlier overwrites the list is no longer in time order: upstream still takes the last position
    h = up_events(90, 100, 10).with_scale(T0, 5, 8)
    assert h.scale_up_events == (ScaleEvent(T0 - 90, 1, True), ScaleEvent(T0, 3), ScaleEvent(T0 - 10, 1))


def test_an_event_exactly_one_longest_period_old_is_not_outdated() -> None:
    # the HPA marks `timestamp.Before(now - period)`: strictly older
    h = up_events(60, 10).with_scale(T0, 5, 8)
    assert h.scale_up_events == (ScaleEvent(T0 - 60, 1), ScaleEvent(T0 - 10, 1), ScaleEvent(T0, 3))


def test_storing_one_direction_leaves_the_other_alone() -> None:
    h = up_events(100).with_scale(T0, 8, 5)
    assert h.scale_up_events == (ScaleEvent(T0 - 100, 1),)
    assert h.scale_down_events == (ScaleEvent(T0, -3),)


def test_a_marked_event_stays_marked_after_the_period_grows() -> None:
    # as upstream's flag: once outdated (under a 60 s period), overwritable even if the rule now says 300 s
    marked = up_events(100, 90).with_scale(T0, 5, 8)
    longer = RuleHistory(scale_up_events=marked.scale_up_events, longest_up_period=300)
    h = longer.with_scale(T0 + 1, 8, 9)
    assert h.scale_up_events == (ScaleEvent(T0 + 1, 1), ScaleEvent(T0, 3))


def test_without_known_periods_events_are_appended() -> None:
    h = RuleHistory(scale_up_events=(ScaleEvent(T0 - 10_000, 1),)).with_scale(T0, 1, 2)
    assert h.scale_up_events == (ScaleEvent(T0 - 10_000, 1), ScaleEvent(T0, 1))


def test_with_scale_keeps_the_periods_and_recommendations() -> None:
    h = KNOWN.with_scale(T0, 1, 3)
    assert (h.longest_up_period, h.longest_down_period, h.recommendations) == (60, 300, ())


# Up: Pods 4 per 15 s, no window. Down: Pods 2 per 120 s, no window. Load v asks for ceil(v) replicas.
CROSS = make_rule(1, 100, rules(DEFAULT_SCALE_UP, "Pods 4/15", window=0),
                  rules(DEFAULT_SCALE_DOWN, "Pods 2/120", window=0))


def replay(loads: list[tuple[int, float]], start: int) -> list[int]:
    history, current, seen = RuleHistory(), start, []
    for t, load in loads:
        d = decide(CROSS, current, [MetricObservation("load", load)], history, T0 + t)
        history, current = d.history.with_scale(T0 + t, current, d.replicas), d.replicas
        seen.append(current)
    return seen


def reference(loads: list[tuple[int, float]], start: int) -> list[int]:
    hpa, current, seen = ReferenceHpa(), start, []
    for t, load in loads:
        current = hpa.sync(CROSS, current, [load], int(T0) + t)
        seen.append(current)
    return seen


def test_an_outdated_scale_up_still_counts_for_the_longer_scale_down_period() -> None:
    """2 -> 6 at t=0. At t=45 the up event is 45 s old, past the 15 s up period but inside the 120 s down
    period: the down policy counts from 2 replicas (6 - 4), so it may go to 0 (min 1)."""
    loads = [(0, 6.0), (30, 6.0), (45, 1.0)]
    assert replay(loads, 2) == reference(loads, 2) == [6, 6, 1]


def test_an_overwritten_scale_up_no_longer_counts_for_the_scale_down_period() -> None:
    """As the HPA: the t=0 event is outdated at t=30 and the t=30 scale-up overwrites it, so at t=45 the down
    policy counts from 10 - 4 = 6 replicas and allows 4, not 1."""
    loads = [(0, 6.0), (30, 10.0), (45, 1.0)]
    assert replay(loads, 2) == reference(loads, 2) == [6, 10, 4]


def test_event_lists_stay_bounded_over_a_long_run() -> None:
    """A day of 15 s syncs flapping between loads: no pruning, yet the lists stay at a period's worth."""
    history, current = RuleHistory(), 2
    longest = 0
    for step in range(5760):
        now = T0 + 15 * step
        d = decide(CROSS, current, [MetricObservation("load", 12.0 if step % 4 < 2 else 1.0)], history, now)
        history, current = d.history.with_scale(now, current, d.replicas), d.replicas
        longest = max(longest, len(history.scale_up_events), len(history.scale_down_events))
    assert 2 <= longest <= 120 // 15 + 1
