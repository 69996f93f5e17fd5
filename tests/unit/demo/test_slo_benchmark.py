"""The SLO benchmark on a tiny trace: its table has a row per configuration and trace, attainment is a share,
nobody spends fewer GPU-hours than the clairvoyant bound at its own overload, and the learning method finds
the highest load bin within the objective (the full benchmark is run by hand: docs/benchmarks.md)."""

from __future__ import annotations

import pytest

from benchmarks.slo_quality import (
    capacity_at_objective,
    configurations,
    dominates,
    learn_target,
    markdown_table,
    run,
    verdict,
)
from demo.cluster import ClusterSettings
from demo.serving_profile import load_profile
from demo.slo_replay import SloFigures, SloSettings
from demo.traces import Trace

TINY = Trace("tiny", "2 -> 5 over 15 min", 900.0, lambda t: 2.0 + 3.0 * t / 900.0)


def test_the_benchmark_on_a_tiny_trace_keeps_its_invariants() -> None:
    profile = load_profile()
    settings = SloSettings(warmup_seconds=60.0, drain_seconds=120.0,
                           cluster=ClusterSettings(startup_delay_seconds=30.0))
    capacity = capacity_at_objective(profile, settings, seconds=240.0)
    assert 0.0 < capacity < settings.requests_per_load * 2
    configs = configurations(profile, settings, capacity, learned=capacity * 0.9)
    outcomes = run([TINY], profile, settings, configs, capacity)
    assert [o.key for o in outcomes] == [*(c.key for c in configs), "clairvoyant"]
    for outcome in outcomes:
        figures = outcome.figures
        assert 0.0 <= figures.attainment <= 1.0 and figures.requests > 0
        assert 0 <= figures.cut <= figures.requests - figures.met
        assert figures.gpu_hours >= outcome.bound_gpu_hours - 1e-9
    table = markdown_table(outcomes, {c.key: c.label for c in configs}).splitlines()
    assert len(table) == 2 + len(outcomes) and all(line.count("|") == 9 for line in table)
    assert [line.split(":")[0] for line in verdict(outcomes).splitlines()] == ["- tiny", "- tiny"]


def test_the_learned_target_is_the_highest_bin_within_the_objective_below_the_first_beyond_it() -> None:
    within = [(load, 0.1) for load in (3.1, 4.1, 5.1, 6.1) for _ in range(6)]
    beyond = [(6.6, 2.0)] * 6 + [(7.6, 0.1)] * 6  # a lucky bin past the knee does not count
    assert learn_target(within + beyond, 0.5) == pytest.approx(6.0)
    assert learn_target(within, 0.5) is None  # never came close: nothing to learn
    assert learn_target(within[:4] + beyond, 0.5) is None  # too few samples below the knee


def test_a_better_point_has_no_lower_attainment_and_no_more_gpu_hours() -> None:
    def point(met: int, gpu_hours: float) -> SloFigures:
        return SloFigures(requests=100, met=met, cut=0, gpu_hours=gpu_hours, preemptions=0,
                          overloaded_minutes=0)

    assert dominates(point(99, 5.0), point(98, 5.0)) and dominates(point(99, 4.0), point(99, 5.0))
    assert not dominates(point(99, 5.0), point(99, 5.0)) and not dominates(point(100, 6.0), point(99, 5.0))
