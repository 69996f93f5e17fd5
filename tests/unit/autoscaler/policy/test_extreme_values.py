"""The engine never overflows: huge finite values, tiny targets, huge policy values give counts, not errors.

A proposal above the API's int32 is capped at MAX_REPLICAS and then bounded like any other: maxReplicas with
TooManyReplicas when no policy is tighter, the policy's limit (ScaleUpLimit) when one is. Nothing raises
OverflowError (math.ceil(inf)) and no inf or NaN reaches a replica count.
"""

from __future__ import annotations

import math
import re
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from autoscaler.planning.plan import plan_replicas
from autoscaler.policy import (
    MAX_REPLICAS,
    Fallback,
    MetricObservation,
    MetricSpec,
    Reason,
    Rule,
    RuleHistory,
    ScalingPolicy,
    ScalingRules,
    decide,
    decide_desired,
)
from autoscaler.policy.proposal import propose
from autoscaler.policy.rate import scale_down_limit, scale_up_limit
from tests.rules import RuleSpace, rule_st

from .support import T0, TARGET, at_age, make_rule, rules

UNLIMITED_UP = ScalingRules(
    0, "Max", 0.1, (ScalingPolicy("Percent", 10**400, 15), ScalingPolicy("Pods", 10**400, 15))
)
UNLIMITED_DOWN = ScalingRules(0, "Max", 0.1, (ScalingPolicy("Percent", 10**400, 15),))
FLOAT_MAX = sys.float_info.max


def one_metric(type_: str, target: float, max_replicas: int = 10, up: ScalingRules = UNLIMITED_UP) -> Rule:
    return make_rule(1, max_replicas, up, UNLIMITED_DOWN, (MetricSpec("m", "q", type_, target),))  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("type_", "value", "target", "current"),
    [
        ("Average", 1e308, 1.0, 3),
        ("Average", 1e10, 1e-300, 3),
        ("Average", FLOAT_MAX, 5e-324, 1),
        ("Total", 1e308, 1.0, 3),
        ("Total", 1e10, 1e-300, 3),
        ("Total", FLOAT_MAX, 5e-324, 10),
        ("Average", 1e308, 1e-300, 1),
    ],
    ids=["avg-1e308", "avg-tiny-target", "avg-float-max", "total-1e308", "total-tiny-target",
         "total-float-max", "avg-ratio-inf"],
)
def test_huge_value_proposes_max_replicas(type_: str, value: float, target: float, current: int) -> None:
    rule = one_metric(type_, target)
    decision = decide(rule, current, [MetricObservation("m", value)], RuleHistory(), T0)
    assert decision.desired_raw == MAX_REPLICAS
    if current < rule.max_replicas:
        assert (decision.replicas, decision.reason) == (10, Reason.TooManyReplicas)
        assert f"desired {MAX_REPLICAS} is above maxReplicas: limited to 10" in decision.message
    else:
        assert decision.replicas == 10


@pytest.mark.parametrize("type_", ["Average", "Total"])
def test_huge_value_from_zero_replicas(type_: str) -> None:
    rule = make_rule(0, 10, UNLIMITED_UP, UNLIMITED_DOWN, (MetricSpec("m", "q", type_, 1e-300),))  # type: ignore[arg-type]
    decision = decide(rule, 0, [MetricObservation("m", 1e10)], RuleHistory(), T0)
    assert (decision.replicas, decision.reason) == (10, Reason.TooManyReplicas)
    assert decision.desired_raw == MAX_REPLICAS


def test_huge_value_is_still_rate_limited() -> None:
    """The cap is a proposal like any other: the default scale-up policy (4 pods or 100% per 15 s) holds."""
    from autoscaler.policy.spec import DEFAULT_SCALE_UP

    rule = one_metric("Average", 1e-300, max_replicas=1000, up=DEFAULT_SCALE_UP)
    decision = decide(rule, 3, [MetricObservation("m", 1e10)], RuleHistory(), T0)
    assert (decision.replicas, decision.reason) == (7, Reason.ScaleUpLimit)


def test_huge_negative_value_proposes_zero_not_an_error() -> None:
    p = propose(MetricSpec("m", "q", "Average", 1e-300), MetricObservation("m", -1e10), 4, 0.1, 0.1)
    assert p.replicas == 0


@pytest.mark.parametrize("target", [math.inf, 0.0, -1.0, math.nan])
def test_invalid_target_is_a_failed_metric_not_a_division(target: float) -> None:
    p = propose(MetricSpec("m", "q", "Total", target), MetricObservation("m", 5.0), 4, 0.1, 0.1)
    assert p.replicas is None and p.error is not None and "target" in p.error


@pytest.mark.parametrize("percent", [10**12, 10**308, 10**400])
def test_huge_percent_policies_never_raise(percent: int) -> None:
    up = rules(UNLIMITED_UP, f"Percent {percent}/60")
    down = rules(UNLIMITED_DOWN, f"Percent {percent}/60")
    history = RuleHistory((), (at_age(3, 10),), (at_age(-2, 20),))
    up_limit, _ = scale_up_limit(MAX_REPLICAS, up, history, T0)
    down_limit, _ = scale_down_limit(MAX_REPLICAS, down, history, T0)
    assert up_limit >= MAX_REPLICAS and down_limit <= 0
    rule = make_rule(1, MAX_REPLICAS, up, down, (MetricSpec("m", "q", "Total", 1e-300),))
    assert decide(rule, 5, [MetricObservation("m", 1e10)], history, T0).replicas == MAX_REPLICAS
    assert decide(rule, 5, [MetricObservation("m", 0.0)], history, T0).replicas == 1


def test_fallback_to_a_huge_count_is_capped_then_bounded() -> None:
    rule = make_rule(1, 10, UNLIMITED_UP, UNLIMITED_DOWN)
    decision = decide_desired(rule, 3, 10**400, "fallback", RuleHistory(), T0)
    assert (decision.replicas, decision.reason) == (10, Reason.TooManyReplicas)
    assert decision.desired_raw == MAX_REPLICAS
    with_fallback = Rule("r", TARGET, 1, 10, rule.metrics, rule.behavior, Fallback(1, 10**400), 1)
    failed = [MetricObservation("load", None, "NoSeries")]
    plan = plan_replicas(
        rule=with_fallback, current=3, observations=failed, history=RuleHistory(), all_failed_syncs=5, now=T0
    )
    assert (plan.replicas, str(plan.reason)) == (10, "Fallback")


# --- properties over extreme floats -------------------------------------------------------------------------

extreme_values = st.one_of(
    st.floats(allow_nan=False, allow_infinity=False),
    st.sampled_from([FLOAT_MAX, -FLOAT_MAX, 5e-324, 1e308, 1e-308, 0.0, -0.0]),
)
extreme_targets = st.one_of(
    st.floats(min_value=5e-324, allow_nan=False, allow_infinity=False, exclude_min=False),
    st.sampled_from([5e-324, 1e-300, FLOAT_MAX]),
)
EXTREME = RuleSpace(
    policy_values=st.one_of(st.integers(1, 400), st.integers(1, 10**12), st.sampled_from([10**308, 10**400])),
    periods=st.integers(1, 1800),
    windows=st.integers(0, 3600),
    selects=st.sampled_from(["Max", "Min", "Disabled"]),
    tolerances=st.sampled_from([0.0, 0.1, 1e308]),
    min_replicas=st.integers(0, MAX_REPLICAS),
    max_replicas=MAX_REPLICAS,
    targets=extreme_targets,
)


@settings(max_examples=300, deadline=None)
@given(
    rule_st(EXTREME),
    st.integers(0, MAX_REPLICAS),
    st.lists(st.one_of(st.none(), extreme_values), min_size=3, max_size=3),
    st.lists(st.tuples(st.floats(0, 4000), st.integers(-MAX_REPLICAS, MAX_REPLICAS)), max_size=4),
)
def test_decide_never_overflows(
    rule: Rule, current: int, values: list[float | None], events: list[tuple[float, int]]
) -> None:
    ups = tuple(at_age(c, age) for age, c in events if c > 0)
    downs = tuple(at_age(c, age) for age, c in events if c < 0)
    history = RuleHistory((), ups, downs)
    obs = [MetricObservation(m.name, v) for m, v in zip(rule.metrics, values, strict=False)]
    decision = decide(rule, current, obs, history, T0)
    assert type(decision.replicas) is int
    assert rule.min_replicas <= decision.replicas <= rule.max_replicas
    assert decision.desired_raw is None or 0 <= decision.desired_raw <= MAX_REPLICAS
    for p in decision.proposals:
        assert p.replicas is None or (type(p.replicas) is int and 0 <= p.replicas <= MAX_REPLICAS)
    assert not re.search(r"\bnan\b", decision.message)
    nxt = decision.history.with_scale(T0, current, decision.replicas)  # the next sync sees it, too
    decide(rule, decision.replicas, obs, nxt, T0 + 15)


@settings(max_examples=200, deadline=None)
@given(st.sampled_from(["Average", "Total"]), extreme_values, extreme_targets, st.integers(0, MAX_REPLICAS))
def test_proposal_is_a_bounded_int(type_: str, value: float, target: float, current: int) -> None:
    p = propose(MetricSpec("m", "q", type_, target), MetricObservation("m", value), current, 0.1, 0.1)  # type: ignore[arg-type]
    assert type(p.replicas) is int and 0 <= p.replicas <= MAX_REPLICAS
    exact = value / target
    if value > 0 and math.isfinite(exact) and exact * max(current, 1) < MAX_REPLICAS / 2 and current == 0:
        assert p.replicas == math.ceil(exact)  # normal values: the HPA's arithmetic, unchanged
