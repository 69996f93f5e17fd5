"""The idealized reactive policy: exact on traces worked out by hand, never better than the clairvoyant bound,
and on the burst trace overloaded for exactly the start-up, whatever its headroom."""

from __future__ import annotations

import pytest

from benchmarks import autoscaling_quality as bench
from demo.clairvoyant import min_gpu_hours
from demo.reactive_floor import FloorPoint, fewest_overloaded, idealized_reactive
from demo.replay import ReplaySettings
from demo.traces import Trace, sudden_burst

SETTINGS = ReplaySettings()
STARTUP_MINUTES = SETTINGS.cluster.startup_delay_seconds / 60.0


def constant(level: float, duration: float = 3_600.0) -> Trace:
    return Trace("constant", "constant", duration, lambda t: level)


def test_a_constant_load_is_carried_by_exactly_the_replicas_it_needs() -> None:
    points = {p.policy: p for p in idealized_reactive(constant(2.8), 1, 10, SETTINGS)}
    exact = points["headroom 0%"]
    samples = int(3_600 // SETTINGS.step_seconds) + 1
    assert exact.overloaded_minutes == 0.0
    assert exact.gpu_hours == pytest.approx(3 * samples * SETTINGS.step_seconds / 3_600.0)  # 2.8 / 0.95 -> 3
    assert points["+2 replicas"].gpu_hours == pytest.approx(5 / 3 * exact.gpu_hours)
    assert points["headroom 10%"].gpu_hours == pytest.approx(4 / 3 * exact.gpu_hours)  # 2.8 x 1.1 / 0.95 -> 4


def test_a_step_is_overloaded_for_the_start_up_whatever_the_headroom() -> None:
    points = idealized_reactive(sudden_burst(), 2, 10, SETTINGS)
    assert {p.overloaded_minutes for p in points} == {STARTUP_MINUTES}


def test_the_rule_bounds_cap_the_replicas() -> None:
    capped = idealized_reactive(constant(7.0), 1, 2, SETTINGS)
    assert all(p.overloaded_minutes == pytest.approx(60.0 + SETTINGS.step_seconds / 60.0) for p in capped)
    idle = idealized_reactive(constant(0.0), 2, 10, SETTINGS)
    assert all(p.overloaded_minutes == 0.0 for p in idle)
    assert idle[0].gpu_hours == pytest.approx(2 * (60.0 + SETTINGS.step_seconds / 60.0) / 60.0)


def test_no_point_spends_less_than_the_clairvoyant_bound_at_its_overload() -> None:
    trace = sudden_burst()
    for point in idealized_reactive(trace, 2, 10, SETTINGS)[::10]:
        bound = min_gpu_hours(trace, point.overloaded_minutes, 2, 10, SETTINGS)
        assert point.gpu_hours >= bound.gpu_hours - 1e-9


def test_fewest_overloaded_within_a_cap() -> None:
    points = [FloorPoint("a", 10.0, 5.0), FloorPoint("b", 11.0, 1.0), FloorPoint("c", 12.0, 0.0),
              FloorPoint("d", 10.5, 1.0)]
    assert fewest_overloaded(points, 11.5) == points[3]
    assert fewest_overloaded(points, 12.0) == points[2]
    assert fewest_overloaded(points, 9.0) is None


def test_the_benchmark_table_says_burst_stays_above_half_of_c() -> None:
    outcomes = bench.run(bench.configurations(), [sudden_burst()], SETTINGS, with_bounds=False)
    table = bench.reactive_floor_table(bench.configurations()[2].rule, outcomes, SETTINGS)
    row = next(line for line in table.splitlines() if line.startswith("| burst |"))
    cells = [cell.strip() for cell in row.strip("|").split("|")]
    assert float(cells[4]) == STARTUP_MINUTES
    assert float(cells[5].rstrip("x")) > 0.5
