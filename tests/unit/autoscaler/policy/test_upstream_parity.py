"""The engine against upstream: same replica count at every sync as a literal port of the HPA controller
(hpa_reference.py), and decisions that do not depend on how often the rule is synced where upstream's do not.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from hypothesis import example, given, settings
from hypothesis import strategies as st

from autoscaler.planning.plan import plan_replicas
from autoscaler.policy import MetricObservation, Reason, Recommendation, RuleHistory
from autoscaler.policy.spec import (
    DEFAULT_SCALE_DOWN,
    DEFAULT_SCALE_UP,
    MetricSpec,
    Rule,
)
from tests.rules import SHORT, rule_st

from .hpa_reference import ReferenceHpa
from .support import TOTAL, make_rule, rules

START = 1_700_000_000  # integer seconds: exact for the engine's floats and the port's ints alike


@dataclass(frozen=True)
class Sync:
    """One sync of a trace: seconds since the previous one, each metric's value (None: failed), and a count
    someone sets by hand after the sync (None: nobody does)."""

    gap: int
    values: tuple[float | None, ...]
    set_by_hand: int | None = None


def run_engine(rule: Rule, start: int, syncs: Sequence[Sync]) -> list[tuple[int, int]]:
    """(time, replicas after the sync) for every sync, through the controller's own plan."""
    history, current, now, seen = RuleHistory(), start, START, []
    for sync in syncs:
        now += sync.gap
        obs = [MetricObservation(m.name, v) for m, v in zip(rule.metrics, sync.values, strict=True)]
        plan = plan_replicas(
            rule=rule, current=current, observations=obs, history=history, all_failed_syncs=0, now=float(now)
        )
        history, current = plan.history.with_scale(float(now), current, plan.replicas), plan.replicas
        seen.append((now, current))
        if sync.set_by_hand is not None:
            current = sync.set_by_hand
    return seen


def run_reference(rule: Rule, start: int, syncs: Sequence[Sync]) -> list[tuple[int, int]]:
    hpa, current, now, seen = ReferenceHpa(), start, START, []
    for sync in syncs:
        now += sync.gap
        current = hpa.sync(rule, current, sync.values, now)
        seen.append((now, current))
        if sync.set_by_hand is not None:
            current = sync.set_by_hand
    return seen


# The audit's repro: scale-up Pods 4/60, the default scale-down (100 % per 15 s), no windows, 10 replicas.
REPRO = make_rule(1, 100, rules(DEFAULT_SCALE_UP, "Pods 4/60", window=0), rules(DEFAULT_SCALE_DOWN, window=0))


def test_a_scale_down_keeps_counting_for_a_longer_scale_up_period() -> None:
    """10 -> 5 at t=0; at t=30 the 4-per-60s policy counts from the count 60 s ago: 10 + 4 = 14, as the HPA.
    A no-op sync at t=15, after the scale-down's own 15 s period, must not make the engine forget it."""
    plain = run_engine(REPRO, 10, [Sync(0, (5,)), Sync(30, (20,))])
    with_extra_sync = run_engine(REPRO, 10, [Sync(0, (5,)), Sync(15, (5,)), Sync(15, (20,))])
    assert [r for _, r in plain] == [5, 14]
    assert [r for _, r in with_extra_sync] == [5, 5, 14]
    assert run_reference(REPRO, 10, [Sync(0, (5,)), Sync(15, (5,)), Sync(15, (20,))]) == with_extra_sync


def test_first_sight_at_zero_replicas_records_zero_as_the_hpa() -> None:
    """Upstream records the current count before the 'target at zero' hold: a target scaled up by hand
    later finds a recommendation of 0, not of its new count, in the scale-down window."""
    rule = make_rule(2, 10)  # default behavior: 300 s scale-down window
    held = plan_replicas(
        rule=rule,
        current=0,
        observations=[MetricObservation("load", 8.0)],
        history=RuleHistory(),
        all_failed_syncs=0,
        now=float(START),
    )
    assert (held.replicas, held.reason) == (0, Reason.ScalingDisabled)
    assert held.history.recommendations == (Recommendation(START, 0),)
    # someone scales it to 8 by hand; 60 s later the load asks for 3: nothing in the window holds 8
    later = plan_replicas(
        rule=rule,
        current=8,
        observations=[MetricObservation("load", 3.0)],
        history=held.history,
        all_failed_syncs=0,
        now=float(START + 60),
    )
    assert later.replicas == 3
    assert run_engine(rule, 0, [Sync(0, (8.0,), 8), Sync(60, (3.0,))]) == run_reference(
        rule, 0, [Sync(0, (8.0,), 8), Sync(60, (3.0,))]
    )


def test_a_second_sync_at_zero_does_not_record_first_sight_again() -> None:
    rule = make_rule(2, 10)
    first = plan_replicas(
        rule=rule,
        current=0,
        observations=[MetricObservation("load", 8.0)],
        history=RuleHistory(),
        all_failed_syncs=0,
        now=float(START),
    )
    second = plan_replicas(
        rule=rule,
        current=0,
        observations=[MetricObservation("load", 8.0)],
        history=first.history,
        all_failed_syncs=0,
        now=float(START + 15),
    )
    assert second.history.recommendations == (Recommendation(START, 0),)


@st.composite
def trace_st(draw: st.DrawFn, rule: Rule, by_hand: bool = True) -> list[Sync]:
    syncs = []
    for _ in range(draw(st.integers(1, 60))):
        gap = draw(st.sampled_from([1, 5, 14, 15, 15, 16, 30, 60]))
        values = tuple(
            None if draw(st.integers(0, 9)) == 0 else float(draw(st.integers(0, int(m.target) * 40)))
            for m in rule.metrics
        )
        hand = draw(st.integers(0, 35)) if by_hand and draw(st.integers(0, 19)) == 0 else None
        syncs.append(Sync(gap, values, hand))
    return syncs


@st.composite
def scenario_st(draw: st.DrawFn) -> tuple[Rule, int, list[Sync]]:
    rule = draw(rule_st())
    return rule, draw(st.integers(0, 35)), draw(trace_st(rule))


@settings(max_examples=100, deadline=None)
@given(scenario_st())
def test_same_replicas_as_the_hpa_controller_at_every_sync(scenario: tuple[Rule, int, list[Sync]]) -> None:
    rule, start, syncs = scenario
    assert run_engine(rule, start, syncs) == run_reference(rule, start, syncs)


def no_op_value(metric: MetricSpec, current: int) -> float:
    """A value that proposes exactly `current`: ratio 1, or 0 at 0 replicas (no tolerance band there)."""
    if current == 0:
        return 0.0
    return metric.target * (current if metric.type == "Total" else 1)


def with_extra_syncs(rule: Rule, start: int, syncs: Sequence[Sync], extra: Sequence[int],
                     failed: bool) -> tuple[list[Sync], list[int]]:
    """`syncs` with `extra[i]` no-op syncs spread over the gap before sync i (none before the first sync: that
    one is first sight); returns the new trace and the positions of the original syncs in it."""
    replayed = run_engine(rule, start, syncs)
    out: list[Sync] = []
    kept: list[int] = []
    for i, sync in enumerate(syncs):
        count = min(extra[i], sync.gap - 1) if 0 < i < len(extra) else 0
        if count > 0:
            values = tuple(None if failed else no_op_value(m, replayed[i - 1][1]) for m in rule.metrics)
            step = sync.gap // (count + 1)
            out.extend(Sync(step, values) for _ in range(count))
            out.append(Sync(sync.gap - step * count, sync.values))
        else:
            out.append(sync)
        kept.append(len(out) - 1)
    return out, kept


@st.composite
def cadence_st(draw: st.DrawFn, windows: Sequence[int]) -> tuple[Rule, int, list[Sync], list[int]]:
    """A rule, a start count within its bounds, a trace nobody scales by hand, extra syncs per gap."""
    rule = draw(rule_st(SHORT._replace(windows=st.sampled_from(list(windows)))))
    start = draw(st.integers(rule.min_replicas, rule.max_replicas))
    syncs = draw(trace_st(rule, by_hand=False))
    extra = draw(st.lists(st.integers(0, 3), min_size=len(syncs), max_size=len(syncs)))
    return rule, start, syncs, extra


REPRO_CADENCE = (REPRO, 10, [Sync(0, (5,)), Sync(30, (20,))], [0, 1])


@settings(max_examples=50, deadline=None)
@given(cadence_st(windows=(0, 0, 15, 30, 60, 120, 300)))
@example(REPRO_CADENCE)
def test_a_sync_whose_metrics_all_failed_changes_no_later_decision(
        case: tuple[Rule, int, list[Sync], list[int]]) -> None:
    """Upstream records nothing when every metric fails, whatever the windows: such a sync is invisible."""
    rule, start, syncs, extra = case
    extended, kept = with_extra_syncs(rule, start, syncs, extra, failed=True)
    replayed = run_engine(rule, start, extended)
    assert [replayed[i] for i in kept] == run_engine(rule, start, syncs)


@settings(max_examples=50, deadline=None)
@given(cadence_st(windows=(0,)))
@example(REPRO_CADENCE)
def test_a_no_op_sync_changes_no_later_decision_without_windows(
        case: tuple[Rule, int, list[Sync], list[int]]) -> None:
    """A sync whose metrics propose the current count changes nothing, so more frequent syncs must not
    change any later decision. Only without stabilization windows: a sync with windows records a
    recommendation that later syncs see (upstream too), so there cadence matters by design."""
    rule, start, syncs, extra = case
    extended, kept = with_extra_syncs(rule, start, syncs, extra, failed=False)
    replayed = run_engine(rule, start, extended)
    assert [replayed[i] for i in kept] == run_engine(rule, start, syncs)
    assert all(replayed[i][1] == replayed[i - 1][1] for i in range(1, len(replayed)) if i not in kept)


def test_the_repro_trace_is_the_simplest_case_of_the_property() -> None:
    rule, start, syncs, extra = REPRO_CADENCE
    extended, kept = with_extra_syncs(rule, start, syncs, extra, failed=False)
    assert extended == [Sync(0, (5,)), Sync(15, (5.0,)), Sync(15, (20,))]
    assert kept == [0, 2]


def test_reference_port_uses_the_rule_as_given() -> None:
    # guard against a vacuous oracle: the port limits a scale-up as the engine's own vectors say
    up, down = rules(DEFAULT_SCALE_UP, "Pods 2/60", window=0), rules(DEFAULT_SCALE_DOWN, window=0)
    rule = make_rule(1, 100, up, down, metrics=(TOTAL,))
    trace = [Sync(0, (80.0,))] + [Sync(15, (80.0,))] * 5
    assert [r for _, r in run_reference(rule, 2, trace)] == [4, 4, 4, 4, 6, 6]
