"""Invariants of the engine over random rules, histories and observations (hypothesis)."""

from __future__ import annotations

from hypothesis import assume, given, settings
from hypothesis import strategies as st

from autoscaler.policy import (
    Behavior,
    MetricObservation,
    MetricSpec,
    Reason,
    Rule,
    RuleHistory,
    ScalingPolicy,
    ScalingRules,
    decide,
)
from tests.rules import RuleSpace, rule_st

from .support import T0, TARGET

CORRECTIONS = (Reason.AboveMaxReplicas, Reason.BelowMinReplicas)

WIDE = RuleSpace(
    policy_values=st.integers(1, 300),
    periods=st.integers(1, 1800),
    windows=st.integers(0, 600),
    selects=st.sampled_from(["Max", "Min", "Disabled"]),
    tolerances=st.sampled_from([0.0, 0.05, 0.1, 0.5]),
    min_replicas=st.integers(0, 20),
    max_replicas=60,
    targets=st.floats(0.5, 500),
)
"""Any bounds, windows and periods (up to the API's), minReplicas 0 included."""


@st.composite
def history_st(draw: st.DrawFn) -> RuleHistory:
    from autoscaler.policy.decision import Recommendation, ScaleEvent

    ages = st.floats(0, 2000)
    recs = draw(
        st.lists(st.builds(lambda a, r: Recommendation(T0 - a, r), ages, st.integers(0, 80)), max_size=8)
    )
    ups = draw(st.lists(st.builds(lambda a, c: ScaleEvent(T0 - a, c), ages, st.integers(1, 20)), max_size=5))
    downs = draw(
        st.lists(st.builds(lambda a, c: ScaleEvent(T0 - a, -c), ages, st.integers(1, 20)), max_size=5)
    )
    return RuleHistory(tuple(recs), tuple(ups), tuple(downs))


values_st = st.one_of(st.none(), st.floats(0, 5000, allow_nan=False, allow_infinity=False))


@settings(max_examples=150, deadline=None)
@given(rule_st(WIDE), st.integers(0, 80), history_st(), st.lists(values_st, min_size=3, max_size=3))
def test_result_always_within_min_max(
    rule: Rule, current: int, history: RuleHistory, values: list[float | None]
) -> None:
    obs = [MetricObservation(m.name, v) for m, v in zip(rule.metrics, values, strict=False)]
    decision = decide(rule, current, obs, history, T0)
    if decision.reason in (Reason.MetricsFailed, Reason.MetricsPartiallyFailed):
        assert decision.replicas == current and rule.min_replicas <= current <= rule.max_replicas
    assert rule.min_replicas <= decision.replicas <= rule.max_replicas


@st.composite
def in_bounds_st(draw: st.DrawFn) -> tuple[Rule, int]:
    rule = draw(rule_st(WIDE))
    return rule, draw(st.integers(rule.min_replicas, rule.max_replicas))


@settings(max_examples=150, deadline=None)
@given(in_bounds_st(), history_st(), st.lists(values_st, min_size=3, max_size=3))
def test_never_moves_away_from_or_past_the_desired_count(
    case: tuple[Rule, int], history: RuleHistory, values: list[float | None]
) -> None:
    rule, current = case
    obs = [MetricObservation(m.name, v) for m, v in zip(rule.metrics, values, strict=False)]
    decision = decide(rule, current, obs, history, T0)
    assert decision.reason not in CORRECTIONS
    desired = decision.desired_raw
    if desired is None:  # metrics failed: hold
        assert decision.replicas == current
        return
    bounded = min(max(desired, rule.min_replicas), rule.max_replicas)
    assert min(current, bounded) <= decision.replicas <= max(current, bounded)
    if any(v is None for v in values[: len(rule.metrics)]):
        assert decision.replicas >= current  # a failed metric never causes a scale-down


@settings(max_examples=150, deadline=None)
@given(in_bounds_st(), history_st(), st.lists(st.floats(-1, 1), min_size=3, max_size=3))
def test_no_change_inside_the_tolerance_band(
    case: tuple[Rule, int], history: RuleHistory, positions: list[float]
) -> None:
    rule, current = case
    assume(current > 0)
    up, down = rule.behavior.scale_up.tolerance, rule.behavior.scale_down.tolerance
    obs = []
    for metric, pos in zip(rule.metrics, positions, strict=False):
        ratio = 1 + (pos * up if pos > 0 else pos * down)
        scale = metric.target * (current if metric.type == "Total" else 1)
        value = ratio * scale
        assume(1 - down <= value / scale <= 1 + up)
        obs.append(MetricObservation(metric.name, value))
    decision = decide(rule, current, obs, history, T0)
    assert decision.replicas == current
    assert decision.reason is Reason.WithinTolerance


@settings(max_examples=150, deadline=None)
@given(
    st.integers(1, 20),
    st.integers(1, 300),
    st.integers(1, 20),
    st.integers(1, 300),
    st.integers(1, 40),
    st.lists(st.floats(0, 400), min_size=5, max_size=60),
    st.sampled_from([5.0, 15.0, 30.0]),
)
def test_never_faster_than_the_policies_allow(
    up_pods: int,
    up_period: int,
    down_pods: int,
    down_period: int,
    start: int,
    loads: list[float],
    interval: float,
) -> None:
    """Over a run, the change within any policy period never exceeds the policy's value."""
    behavior = Behavior(
        ScalingRules(0, "Max", 0.1, (ScalingPolicy("Pods", up_pods, up_period),)),
        ScalingRules(0, "Max", 0.1, (ScalingPolicy("Pods", down_pods, down_period),)),
    )
    rule = Rule("r", TARGET, 1, 50, (MetricSpec("m", "q", "Total", 10.0),), behavior, None, 1)
    history, current = RuleHistory(), min(start, 50)
    applied: list[tuple[float, int]] = []  # (time, change), kept by the test itself
    for step, load in enumerate(loads):
        now = T0 + step * interval
        decision = decide(rule, current, [MetricObservation("m", load)], history, now)
        if decision.reason not in CORRECTIONS:
            if decision.replicas > current:
                window = [c for t, c in applied if now - t < up_period]
                period_start = current - sum(c for c in window if c > 0) - sum(c for c in window if c < 0)
                assert decision.replicas - period_start <= up_pods
            if decision.replicas < current:
                window = [c for t, c in applied if now - t < down_period]
                period_start = current - sum(c for c in window if c > 0) - sum(c for c in window if c < 0)
                assert period_start - decision.replicas <= down_pods
        history = decision.history.with_scale(now, current, decision.replicas)
        if decision.replicas != current:
            applied.append((now, decision.replicas - current))
        current = decision.replicas
