"""`gpu-autoscaler tune`'s arithmetic (autoscaler.planning.tuning) and its range-answer checks
(plumbing.prometheus.range_query), without Prometheus: candidates, scoring, the recommendation, the diff,
hostile answers, spans."""

from __future__ import annotations

import argparse
import dataclasses
import math
from pathlib import Path

import pytest

from autoscaler.cli.tune import span, to_steps
from autoscaler.config.rules import load_rules
from autoscaler.errors import UsageError
from autoscaler.planning.counterfactual import HistoryStep, ReplaySetup, overloaded, replay, score
from autoscaler.planning.plan import count_all_failed, plan_replicas
from autoscaler.planning.tuning import (
    ONE_SYNC_UP,
    PANIC,
    Candidate,
    Score,
    candidates,
    pareto,
    recommend,
    rules_diff,
)
from autoscaler.policy import MetricObservation, Rule, RuleHistory
from autoscaler.policy.spec import Capacity, Forecast, OverloadBudget
from plumbing.prometheus.answer import BadAnswer
from plumbing.prometheus.range_query import RangeSeries, chunks, parse_matrix

SLOW = """\
rules:
  - name: web
    target: {kind: Deployment, namespace: ml, name: web}
    minReplicas: 1
    maxReplicas: 10
    metrics:
      - {name: rps, query: 'sum(rate(requests_total[5m]))', type: Total, target: 100}
    behavior:
      scaleDown: {stabilizationWindowSeconds: 3600, policies: [{type: Pods, value: 1, periodSeconds: 600}]}
"""
FAST = """\
rules:
  - name: web
    target: {kind: Deployment, namespace: ml, name: web}
    minReplicas: 1
    maxReplicas: 10
    metrics:
      - {name: rps, query: 'sum(rate(requests_total[5m]))', type: Total, target: 100}
    behavior:
      scaleDown: {stabilizationWindowSeconds: 0, policies: [{type: Percent, value: 100, periodSeconds: 15}]}
"""


def rule_of(tmp_path: Path, text: str) -> Rule:
    path = tmp_path / "rules.yaml"
    path.write_text(text)
    return load_rules(path).get("web")


def burst_history(minutes: int = 240) -> list[HistoryStep]:
    """A burst of 800 req/s for 20 minutes every 2 hours over 100 req/s, one step a minute."""
    return [HistoryStep(60.0 * m, (MetricObservation("rps", 800.0 if m % 120 < 20 else 100.0),))
            for m in range(minutes)]


def test_candidates_start_with_the_current_rule_and_are_distinct(tmp_path: Path) -> None:
    rule = rule_of(tmp_path, SLOW)
    found = candidates(rule)
    assert found[0].rule == rule and found[0].label == ""
    assert len({c.rule for c in found}) == len(found)
    windows = {c.rule.behavior.scale_down.stabilization_window_seconds for c in found}
    assert windows == {0, 60, 120, 300, 900, 1800, 3600}
    assert {c.rule.metrics[0].target for c in found} == {90.0, 100.0, 110.0}
    assert all(c.label for c in found[1:])
    # the scale-up side too: its window and tolerance, panic mode, an overload budget
    assert {c.rule.behavior.scale_up.stabilization_window_seconds for c in found} == {0, 60}
    assert {c.rule.behavior.scale_up.tolerance for c in found} == {0.02, 0.1}
    panicky = [c for c in found if c.rule.behavior.panic is not None]
    assert panicky and all(c.rule.metrics[0].panic_query == "sum(rate(requests_total[30s]))" for c in panicky
                           if c.rule.behavior.panic == PANIC)
    # the scale-up that reacts within one sync, with headroom and short scale-down windows
    one_sync = [c for c in found if c.rule.behavior.scale_up.policies == ONE_SYNC_UP]
    assert {(c.rule.metrics[0].target, c.rule.behavior.scale_down.stabilization_window_seconds)
            for c in one_sync} == {(90.0, 60), (90.0, 120), (100.0, 60), (100.0, 120)}
    assert all(c.rule.metrics[0].panic_query == "sum(rate(requests_total[15s]))" for c in one_sync)
    assert {c.rule.overload_budget for c in found} == {None, OverloadBudget(10.0, 120)}
    [forecast] = [c for c in found if c.rule.forecast is not None]
    assert forecast.label == "forecast 1d, lead 300s" and forecast.rule.forecast == Forecast(86_400, 300)
    assert "+    forecast:" in rules_diff("rules.yaml", SLOW, rule, forecast.rule)


def test_a_slow_scale_down_gets_a_cheaper_recommendation_with_no_more_overload(tmp_path: Path) -> None:
    rule = rule_of(tmp_path, SLOW)
    result = recommend(rule, burst_history(), ReplaySetup(60.0, 1))
    assert result.best is not None
    assert result.best.gpu_hours < result.current.gpu_hours
    assert result.best.overloaded_minutes <= result.current.overloaded_minutes
    assert result.best.candidate.rule.behavior.scale_down.stabilization_window_seconds < 3600


def test_the_fast_rule_is_already_best(tmp_path: Path) -> None:
    result = recommend(rule_of(tmp_path, FAST), burst_history(), ReplaySetup(60.0, 1))
    assert result.best is None
    cheaper = [s for s in result.scores if s.gpu_hours < result.current.gpu_hours]
    assert all(s.overloaded_minutes > result.current.overloaded_minutes for s in cheaper)


def test_gpu_hours_count_replicas_times_step_times_gpus_per_replica(tmp_path: Path) -> None:
    rule = rule_of(tmp_path, FAST)
    steady = [HistoryStep(60.0 * m, (MetricObservation("rps", 300.0),)) for m in range(60)]
    result = score(rule, rule, steady, ReplaySetup(60.0, 3))
    assert result.gpu_hours == pytest.approx(3.0)
    assert result.overloaded_minutes == 0
    doubled = dataclasses.replace(rule, capacity=Capacity("sum(free_gpus)", 2))
    assert score(doubled, doubled, steady, ReplaySetup(60.0, 3)).gpu_hours == pytest.approx(6.0)


@pytest.mark.parametrize(("kind", "value", "recorded", "replicas", "expected"), [
    # target 100 is what one replica serves at 90 %: 111.1 at 100 %, overloaded above 95 % (105.6)
    pytest.param("Total", 530.0, None, 5, True, id="total-106-per-replica-over-95-percent"),
    pytest.param("Total", 525.0, None, 5, False, id="total-105-per-replica-within-95-percent"),
    pytest.param("Total", 5000.0, None, 10, True, id="total-at-max-replicas-is-overloaded-all-the-same"),
    pytest.param("Average", 100.0, 6, 5, True, id="average-rescaled-108-percent-per-replica"),
    pytest.param("Average", 100.0, 4, 5, False, id="average-rescaled-72-percent-per-replica"),
])
def test_overloaded(tmp_path: Path, kind: str, value: float, recorded: int | None, replicas: int,
                    expected: bool) -> None:
    rule = rule_of(tmp_path, FAST.replace("type: Total", f"type: {kind}"))
    step = HistoryStep(0.0, (MetricObservation("rps", value),), recorded)
    assert overloaded(rule, step, replicas) is expected


def test_a_failed_step_is_never_overloaded(tmp_path: Path) -> None:
    rule = rule_of(tmp_path, FAST)
    assert not overloaded(rule, HistoryStep(0.0, (MetricObservation("rps", None, "x"),)), 1)


def test_the_diff_shows_only_the_changed_fields(tmp_path: Path) -> None:
    rule = rule_of(tmp_path, SLOW)
    proposed = next(c.rule for c in candidates(rule) if c.label == "scaleDown window 300s")
    diff = rules_diff("rules.yaml", SLOW, rule, proposed)
    assert diff.startswith("--- a/rules.yaml\n+++ b/rules.yaml\n")
    changed = [line for line in diff.splitlines()[2:] if line[:1] in "+-"]
    down = ("      scaleDown: {{stabilizationWindowSeconds: {}, "
            "policies: [{{type: Pods, value: 1, periodSeconds: 600}}]}}")
    assert changed == ["-" + down.format(3600), "+" + down.format(300)]
    assert rules_diff("rules.yaml", SLOW, rule, rule) == ""


def test_steps_start_at_the_first_sample_and_mark_gaps_as_failed(tmp_path: Path) -> None:
    rule = rule_of(tmp_path, FAST)
    steps = to_steps(rule, [RangeSeries("q", {60.0: 5.0, 180.0: 7.0})], RangeSeries("", {}), 0.0, 180.0, 60.0)
    assert [s.t for s in steps] == [60.0, 120.0, 180.0]
    assert [s.observations[0].value for s in steps] == [5.0, None, 7.0]
    with pytest.raises(UsageError, match="no sample of rule 'web'"):
        to_steps(rule, [RangeSeries("q", {})], RangeSeries("", {}), 0.0, 180.0, 60.0)


def test_chunks_cover_the_range_on_the_grid() -> None:
    parts = list(chunks(0.0, 250.0, 10.0, 10))
    assert parts == [(0.0, 90.0), (100.0, 190.0), (200.0, 250.0)]


def matrix(values: object, series: int = 1) -> dict[str, object]:
    return {"status": "success", "data": {"resultType": "matrix",
                                          "result": [{"metric": {}, "values": values}] * series}}


def test_a_valid_matrix_is_read_with_nan_as_a_failed_step() -> None:
    assert parse_matrix(matrix([[10, "1.5"], [20, "NaN"]]), 0, 30, 10) == {10.0: 1.5, 20.0: None}
    assert parse_matrix(matrix([], series=0), 0, 30, 10) == {}


@pytest.mark.parametrize("body", [
    pytest.param(matrix([[10, 1.5]]), id="bare-number-value"),
    pytest.param(matrix([[10, "1e999999x"]]), id="not-a-number"),
    pytest.param(matrix([[10, "1" * 500]]), id="huge-number"),
    pytest.param(matrix([[True, "1"]]), id="boolean-timestamp"),
    pytest.param(matrix([[10, "1", "2"]]), id="three-parts"),
    pytest.param(matrix([[99999, "1"]]), id="timestamp-outside-the-range"),
    pytest.param(matrix([[1e300, "1"]]), id="timestamp-1e300"),
    pytest.param(matrix([[-1e300, "1"]]), id="timestamp-minus-1e300"),
    pytest.param(matrix([[15, "1"]]), id="timestamp-off-the-grid"),
    pytest.param(matrix([[10.5, "1"]]), id="timestamp-half-a-second-off"),
    pytest.param(matrix([[10, "1"]] * 5), id="more-points-than-steps"),
    pytest.param(matrix([[10, "1"]], series=2), id="two-series"),
    pytest.param({"status": "success", "data": {"resultType": "vector", "result": []}}, id="vector"),
    pytest.param({"status": "error", "errorType": "bad_data", "error": "x"}, id="error-answer"),
    pytest.param([], id="not-an-object"),
])
def test_hostile_answers_are_refused(body: object) -> None:
    with pytest.raises(BadAnswer):
        parse_matrix(body, 0, 30, 10)


@pytest.mark.parametrize(("text", "seconds"), [("7d", 604800.0), ("36h", 129600.0), ("15s", 15.0),
                                               ("2w", 1209600.0), (" 90m ", 5400.0)])
def test_spans(text: str, seconds: float) -> None:
    assert span(1, 100 * 86400)(text) == seconds


@pytest.mark.parametrize("text", ["", "7", "7y", "-1d", "1.5d", "0s", "91d", "d", "7d7d"])
def test_bad_spans_are_refused(text: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError, match="expected a duration"):
        span(1, 90 * 86400)(text)


def test_rounding_of_targets_keeps_them_readable(tmp_path: Path) -> None:
    rule = rule_of(tmp_path, FAST.replace("target: 100", "target: 0.8"))
    assert {c.rule.metrics[0].target for c in candidates(rule)} == {0.72, 0.8, 0.88}
    assert not any(math.isnan(c.rule.metrics[0].target) for c in candidates(rule))


def plan_step_by_step(rule: Rule, history: list[HistoryStep], start: int) -> list[int]:
    state, current, failed, counts = RuleHistory(), start, 0, []
    for step in history:
        failed = count_all_failed(failed, step.observations)
        plan = plan_replicas(
            rule=rule,
            current=current,
            observations=step.observations,
            history=state,
            all_failed_syncs=failed,
            now=step.t,
        )
        state, current = plan.history.with_scale(step.t, current, plan.replicas), plan.replicas
        counts.append(current)
    return counts


@pytest.mark.parametrize("text", [SLOW, FAST, FAST.replace("minReplicas: 1", "minReplicas: 0")])
def test_every_candidate_replays_as_the_controllers_plan(tmp_path: Path, text: str) -> None:
    """tune replays covered rules with trace_replay: the counts are those of plan_replicas step by step
    (gaps: failed queries), and a scale-to-zero rule, which it does not cover, goes step by step."""
    gap = (MetricObservation("rps", None, "no sample"),)
    history = [HistoryStep(s.t, gap if i % 37 == 5 else s.observations)
               for i, s in enumerate(burst_history())]
    for candidate in candidates(rule_of(tmp_path, text)):
        assert replay(candidate.rule, history, ReplaySetup(60.0, 3)) == plan_step_by_step(candidate.rule,
                                                                                          history, 3)


def flat_days(days: int, load: float, last_day_load: float, step: float = 600.0) -> list[HistoryStep]:
    steps = int(days * 86_400 / step)
    last = steps - int(86_400 / step)
    return [HistoryStep(step * i, (MetricObservation("rps", last_day_load if i >= last else load),))
            for i in range(steps)]


def test_the_pareto_table_holds_only_candidates_nothing_beats_on_both() -> None:
    def scored(label: str, hours: float, minutes: float) -> Score:
        return Score(Candidate(label, None), hours, minutes, 0)  # type: ignore[arg-type]

    scores = [scored("a", 10, 5), scored("b", 12, 1), scored("c", 11, 6), scored("d", 9, 9),
              scored("e", 12, 2)]
    assert [s.candidate.label for s in pareto(scores)] == ["d", "a", "b"]


def test_an_overload_budget_picks_the_cheapest_within_it(tmp_path: Path) -> None:
    rule = rule_of(tmp_path, FAST)
    strict = recommend(rule, burst_history(), ReplaySetup(60.0, 1, 120), max_overloaded_minutes=0.0)
    loose = recommend(rule, burst_history(), ReplaySetup(60.0, 1, 120), max_overloaded_minutes=10_000.0)
    assert strict.budget_minutes == 0.0 and loose.budget_minutes == 10_000.0
    assert loose.best is not None and loose.best.gpu_hours < loose.current.gpu_hours
    assert strict.best is None or strict.best.overloaded_minutes == 0.0
    assert all(s.gpu_hours >= loose.best.gpu_hours for s in loose.scores)


def test_a_pick_worse_on_the_held_out_day_keeps_the_current_rule(tmp_path: Path) -> None:
    """Two days at 205 req/s: targets x1.1 runs 2 replicas for the current 3 with no overload. The last day
    brings 228 req/s: within its tolerance it stays on 2, 114 per replica, overloaded all day."""
    rule = rule_of(tmp_path, FAST)
    result = recommend(rule, flat_days(3, 205.0, 228.0), ReplaySetup(600.0, 3))
    assert result.held_out is not None and result.held_out.kept_current
    assert result.best is None
    assert result.held_out.pick.overloaded_minutes > result.held_out.current.overloaded_minutes == 0.0
    same = recommend(rule, flat_days(3, 205.0, 205.0), ReplaySetup(600.0, 3))
    assert same.held_out is not None and not same.held_out.kept_current
    assert same.best is not None and "targets x1.1" in same.best.candidate.label
    short = recommend(rule, flat_days(2, 205.0, 228.0), ReplaySetup(600.0, 3))
    assert short.held_out is None  # two days: nothing to hold out


def test_steps_carry_the_panic_windows_value_where_it_has_a_sample(tmp_path: Path) -> None:
    rule = rule_of(tmp_path, FAST)
    series = [RangeSeries("q", {60.0: 5.0, 120.0: 6.0, 180.0: 7.0})]
    short = [RangeSeries("q30", {60.0: 9.0, 180.0: 8.0})]
    steps = to_steps(rule, series, RangeSeries("", {}), 0.0, 180.0, 60.0, short)
    assert [(s.observations[0].value, s.observations[0].panic_value) for s in steps] == [
        (5.0, 9.0), (6.0, None), (7.0, 8.0)]
