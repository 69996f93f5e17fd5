"""benchmarks/tune_pick.py: the week it trains on, and the history it hands to tune's arithmetic, are what a
week under (c) and Prometheus would hold."""

from __future__ import annotations

import dataclasses

import pytest

from benchmarks import tune_pick
from benchmarks.autoscaling_quality import configurations
from demo.replay import ReplaySettings, replay
from demo.traces import DAY_SECONDS, bursty, steady


def test_a_week_is_seven_other_draws_of_the_day_one_after_the_other() -> None:
    trace = tune_pick.week("bursty")
    assert trace.duration_seconds == 7 * DAY_SECONDS
    for day, seed in enumerate(tune_pick.WEEK_SEEDS):
        assert trace(day * DAY_SECONDS + 3_605.0) == bursty(seed=seed)(3_605.0)
    assert set(tune_pick.WEEK_SEEDS).isdisjoint({5, 16})  # the quality benchmark's own bursty draws


def test_the_history_is_what_the_rules_queries_return_every_sync() -> None:
    settings = dataclasses.replace(ReplaySettings(), warmup_seconds=600.0)
    rule = configurations()[2].rule
    trace = dataclasses.replace(steady(duration_seconds=1_800.0), name="short")
    result = replay(rule, trace, settings)
    history = tune_pick.recorded_history(rule, result, settings)
    assert len(history) == len(result.samples[::3]) and history[1].t == 15.0
    step = history[40]
    samples = [s for s in result.samples if step.t - 60 < s.t <= step.t]
    by_name = {o.name: o.value for o in step.observations}
    assert by_name["requests_per_second"] == pytest.approx(sum(s.load for s in samples) / 12 * 10)
    short = {o.name: o.panic_value for o in step.observations}["requests_per_second"]
    assert short == pytest.approx(sum(s.load for s in samples[-6:]) / 6 * 10)
    [now] = [s for s in result.samples if s.t == step.t]
    assert by_name["gpu_utilization"] == pytest.approx(100 * now.utilization)
    assert step.recorded_replicas == now.replicas
