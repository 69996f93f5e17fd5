"""Panic mode (`behavior.panic`, Knative's KPA semantics) in `decide()`: when it starts, what it proposes,
what still caps it, that it never scales down, when it ends, and that the HPA's own history is untouched."""

from __future__ import annotations

import dataclasses

import pytest

from autoscaler.policy import MetricObservation, Reason, RuleHistory, decide
from autoscaler.policy.decision import Decision
from autoscaler.policy.spec import DEFAULT_SCALE_DOWN, DEFAULT_SCALE_UP, MetricSpec, Panic, Rule, ScalingRules

from .support import T0, history, make_rule, recs, rules

QUEUE = MetricSpec("queue", "sum(rate(q[2m]))", "Average", 10.0, panic_query="sum(rate(q[30s]))")
SEEN = history(recommendations=recs("4@45, 4@30, 4@15"))  # steady at 4 for the last minute
SLOW_UP = rules(DEFAULT_SCALE_UP, "Pods 100/15", window=60)  # the users' slow scale-up window
DOWN = rules(DEFAULT_SCALE_DOWN, window=300)


DEFAULT_PANIC = Panic()


def panicky(panic: Panic | None = DEFAULT_PANIC, up: ScalingRules = SLOW_UP, max_replicas: int = 100) -> Rule:
    rule = make_rule(1, max_replicas, up, DOWN, metrics=(QUEUE,))
    return dataclasses.replace(rule, behavior=dataclasses.replace(rule.behavior, panic=panic))


def seen(value: float, short: float | None = None) -> list[MetricObservation]:
    return [MetricObservation("queue", value, panic_value=short)]


def run(rule: Rule, steps: list[tuple[float, float, float | None]], current: int = 4,
        start: RuleHistory = SEEN) -> list[Decision]:
    """Syncs at T0 + t with (value, panic value), each decision applied before the next."""
    decisions, state = [], start
    for t, value, short in steps:
        decision = decide(rule, current, seen(value, short), state, T0 + t)
        state = decision.history.with_scale(T0 + t, current, decision.replicas)
        current = decision.replicas
        decisions.append(decision)
    return decisions


def test_a_burst_in_the_short_window_scales_up_at_once_past_the_scale_up_window() -> None:
    hpa, = run(panicky(None), [(0, 25.0, 45.0)])
    assert (hpa.replicas, hpa.reason) == (4, Reason.ScaleUpStabilized)  # the HPA waits out its 60 s window
    burst, = run(panicky(), [(0, 25.0, 45.0)])
    assert (burst.replicas, burst.reason) == (18, Reason.PanicScaleUp)  # ceil(4 x 45/10): the short window
    assert burst.history.panic is not None and burst.history.panic.peak == 18
    assert "queue over 30s is 450% of its target" in burst.message


def test_below_the_threshold_the_hpa_decides_alone() -> None:
    calm, = run(panicky(), [(0, 19.0, 19.5)])  # 195% < 200%
    hpa, = run(panicky(None), [(0, 19.0, 19.5)])
    assert (calm.replicas, calm.reason, calm.history) == (hpa.replicas, hpa.reason, hpa.history)
    assert calm.history.panic is None


@pytest.mark.parametrize(("threshold", "panics"), [(150.0, True), (300.0, False)])
def test_the_threshold_is_the_rules(threshold: float, panics: bool) -> None:
    decision, = run(panicky(Panic(30, threshold)), [(0, 10.0, 25.0)])
    assert (decision.reason == Reason.PanicScaleUp) is panics


def test_a_metric_with_no_shorter_window_panics_on_its_own_value() -> None:
    gauge = MetricSpec("queue", "max(vllm:num_requests_waiting)", "Average", 10.0)
    rule = dataclasses.replace(panicky(), metrics=(gauge,))
    decision, = run(rule, [(0, 30.0, None)])
    assert (decision.replicas, decision.reason) == (12, Reason.PanicScaleUp)
    assert "queue is 300% of its target" in decision.message  # no window: the value is its own


def test_policies_and_max_replicas_still_cap_a_panic() -> None:
    capped = panicky(up=rules(DEFAULT_SCALE_UP, "Pods 2/60", window=60))
    first, second = run(capped, [(0, 25.0, 45.0), (15, 25.0, 45.0)])
    assert (first.replicas, first.reason) == (6, Reason.PanicScaleUp) and "Pods" in first.message
    assert (second.replicas, second.reason) == (6, Reason.PanicHold)  # the policy's period is not over
    at_max, = run(panicky(max_replicas=10), [(0, 25.0, 45.0)])
    assert at_max.replicas == 10


def test_a_panic_never_scales_down_and_ends_a_scale_down_window_after_its_last_cause() -> None:
    steps = [(0, 25.0, 45.0), (15, 5.0, 5.0), (30, 5.0, 5.0), (299, 5.0, 5.0), (300, 5.0, 5.0)]
    burst, quiet, quieter, almost, after = run(panicky(), steps)
    assert burst.replicas == 18
    for held in (quiet, quieter, almost):
        assert (held.replicas, held.reason) == (18, Reason.PanicHold), held.message
        assert held.history.panic is not None
    # 300 s without cause: the panic ends, and the HPA's own scale-down window (which saw only the HPA's raw
    # desired counts, never the panic's) has nothing above 9 in it.
    assert after.history.panic is None
    assert after.reason != Reason.PanicHold and after.replicas == 9


def test_a_new_cause_during_a_panic_extends_it_and_raises_its_peak() -> None:
    steps = [(0, 25.0, 45.0), (200, 5.0, 60.0), (450, 5.0, 5.0), (499, 5.0, 5.0)]
    _, again, held, still = run(panicky(), steps)
    assert (again.replicas, again.reason) == (100, Reason.PanicScaleUp)  # 108, capped at max
    assert again.history.panic is not None and again.history.panic.since == T0
    assert again.history.panic.last_cause == T0 + 200
    assert (held.reason, still.reason) == (Reason.PanicHold, Reason.PanicHold)


def test_the_recorded_recommendations_are_the_hpas_own() -> None:
    panic, = run(panicky(), [(0, 25.0, 45.0)])
    hpa, = run(panicky(None), [(0, 25.0, 45.0)])
    assert panic.history.recommendations == hpa.history.recommendations


def test_a_failed_sync_holds_and_keeps_the_panic() -> None:
    rule = panicky()
    burst, = run(rule, [(0, 25.0, 45.0)])
    failed = decide(rule, 18, [MetricObservation("queue", None, "timeout")], burst.history, T0 + 15)
    assert (failed.replicas, failed.reason) == (18, Reason.MetricsFailed)
    assert failed.history.panic == burst.history.panic


def test_from_zero_replicas_nothing_panics() -> None:
    rule = dataclasses.replace(panicky(), min_replicas=0)
    decision = decide(rule, 0, seen(25.0, 45.0), SEEN, T0)
    assert decision.history.panic is None and decision.reason != Reason.PanicScaleUp


def test_with_panic_off_the_engine_is_the_hpa_whatever_the_panic_values() -> None:
    steps = [(t, 5.0 + (t % 7), 100.0 * (t % 3)) for t in range(0, 600, 15)]
    with_values = run(panicky(None), steps)
    without = run(panicky(None), [(t, v, None) for t, v, _ in steps])
    assert [(d.replicas, d.reason) for d in with_values] == [(d.replicas, d.reason) for d in without]
