"""Precedence of what the controller adds around the engine: paused-replicas > paused > fallback > engine."""

from __future__ import annotations

import pytest

from autoscaler.kube.scale import ScaleState
from autoscaler.planning.plan import describe_metrics, paused_replicas, plan_replicas, plan_rule
from autoscaler.policy import MetricObservation, Recommendation, RuleHistory
from tests.clock import T0
from tests.rules import rule, ruleset

RULE = ruleset(
    rule(min_replicas=2, max_replicas=8, extra="fallback: {failureThreshold: 3, replicas: 20}")
).rules[0]
OK = (MetricObservation("util", 160.0),)
FAILED = (MetricObservation("util", None, "NoSeries: no series"),)


@pytest.mark.parametrize(
    ("annotations", "observations", "failed_syncs", "expected"),
    [
        ({}, OK, 0, (8, "DesiredWithinRange")),
        ({"gpu-autoscaler.io/paused": "true"}, OK, 0, (4, "Paused")),
        ({"gpu-autoscaler.io/paused": "TRUE"}, OK, 0, (4, "Paused")),
        ({"gpu-autoscaler.io/paused": "false"}, OK, 0, (8, "DesiredWithinRange")),
        ({"gpu-autoscaler.io/paused-replicas": "0"}, OK, 0, (0, "PausedReplicas")),
        (
            {"gpu-autoscaler.io/paused": "true", "gpu-autoscaler.io/paused-replicas": "3"},
            OK,
            0,
            (3, "PausedReplicas"),
        ),
        ({"gpu-autoscaler.io/paused-replicas": "3"}, FAILED, 9, (3, "PausedReplicas")),
        ({}, FAILED, 3, (4, "MetricsFailed")),  # threshold 3: not yet (more than 3 needed)
        ({}, FAILED, 4, (8, "Fallback")),  # fallback 20 clamped to maxReplicas 8
        ({"gpu-autoscaler.io/paused": "true"}, FAILED, 4, (4, "Paused")),
    ],
    ids=[
        "engine",
        "paused",
        "paused-case",
        "not-paused",
        "pinned-0",
        "pinned-wins",
        "pinned-over-fallback",
        "threshold-not-passed",
        "fallback-clamped",
        "paused-over-fallback",
    ],
)
def test_precedence(
    annotations: dict[str, str],
    observations: tuple[MetricObservation, ...],
    failed_syncs: int,
    expected: tuple[int, str],
) -> None:
    plan = plan_rule(RULE, ScaleState(4, 4, annotations), observations, RuleHistory(), failed_syncs, T0)
    assert (plan.replicas, str(plan.reason)) == expected
    assert plan.current == 4


@pytest.mark.parametrize(
    ("annotations", "observations", "failed_syncs", "expected"),
    [
        ({}, OK, 0, (0, "ScalingDisabled")),
        ({}, FAILED, 9, (0, "ScalingDisabled")),  # not even the fallback wakes it up
        ({"gpu-autoscaler.io/paused-replicas": "2"}, OK, 0, (2, "PausedReplicas")),
    ],
    ids=["metrics", "fallback", "pinned"],
)
def test_target_scaled_to_zero_by_hand_is_left_alone(
    annotations: dict[str, str],
    observations: tuple[MetricObservation, ...],
    failed_syncs: int,
    expected: tuple[int, str],
) -> None:
    plan = plan_rule(RULE, ScaleState(0, 0, annotations), observations, RuleHistory(), failed_syncs, T0)
    assert (plan.replicas, str(plan.reason)) == expected


def test_pause_keeps_history_unchanged() -> None:
    history = RuleHistory()
    plan = plan_rule(RULE, ScaleState(4, 4, {"gpu-autoscaler.io/paused": "true"}), OK, history, 0, T0)
    assert plan.history is history


@pytest.mark.parametrize(
    "value",
    [
        "-1", "+3", "two", "1.5", "", " 3", "3 ", "3\n", "1_0", "\u0661\u0662", "\uff15", "3\u00a0",
        "9" * 5000, "2147483648", "99999999999",
    ],
    ids=[
        "negative", "plus-sign", "word", "float", "empty", "leading-space", "trailing-space", "newline",
        "underscore", "arabic-indic-digits", "fullwidth-digit", "nbsp", "5000-digits", "int32-overflow",
        "11-digits",
    ],
)
def test_bad_paused_replicas_is_a_problem_not_a_pause(value: str) -> None:
    paused, pinned, problem = paused_replicas({"gpu-autoscaler.io/paused-replicas": value})
    assert (paused, pinned) == (False, None)
    assert problem is not None and "gpu-autoscaler.io/paused-replicas" in problem
    assert len(problem) < 300  # thousands of digits are not copied into the Event


@pytest.mark.parametrize("value", ["\u0661\u0662", "9" * 5000, " 3"], ids=["unicode", "huge", "space"])
def test_bad_paused_replicas_syncs_as_if_unannotated(value: str) -> None:
    scale = ScaleState(4, 4, {"gpu-autoscaler.io/paused-replicas": value})
    plan = plan_rule(RULE, scale, OK, RuleHistory(), 0, T0)
    unannotated = plan_rule(RULE, ScaleState(4, 4, {}), OK, RuleHistory(), 0, T0)
    assert (plan.replicas, plan.reason) == (unannotated.replicas, unannotated.reason)
    assert plan.problem is not None and unannotated.problem is None


@pytest.mark.parametrize(("value", "count"), [("0", 0), ("007", 7), ("2147483647", 2**31 - 1)])
def test_good_paused_replicas(value: str, count: int) -> None:
    assert paused_replicas({"gpu-autoscaler.io/paused-replicas": value}) == (True, count, None)


def test_describe_metrics() -> None:
    text = describe_metrics(RULE, (MetricObservation("util", 95.5),))
    assert text == "util=95.5 (target 80)"
    assert describe_metrics(RULE, FAILED) == "util=failed NoSeries (target 80)"


def test_fallback_is_a_desired_count_through_the_behavior() -> None:
    # the scale-down window remembers 8 from 100 s ago: the fallback to 2 is held there, reason Fallback
    fallback = "fallback: {failureThreshold: 1, replicas: 2}"
    rules = ruleset(rule(min_replicas=1, max_replicas=8, extra=fallback))
    history = RuleHistory((Recommendation(T0 - 100, 8),))
    plan = plan_rule(rules.rules[0], ScaleState(8, 8, {}), FAILED, history, 2, T0)
    assert (plan.replicas, str(plan.reason), plan.desired_raw) == (8, "Fallback", 2)
    assert "fallback to 2 replicas" in plan.message and "held at 8" in plan.message
    assert plan.history.recommendations[-1] == Recommendation(T0, 2)  # recorded, as KEDA's synthetic metric


def test_simulate_shares_the_plan_of_the_controller() -> None:
    from autoscaler.cli import simulate

    assert simulate.plan_replicas is plan_replicas
