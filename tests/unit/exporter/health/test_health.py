"""Health state boundaries, the worse-of rule, speed multipliers and the availability score."""

from __future__ import annotations

import math

import pytest

from exporter.health.state import (
    Bands,
    HealthState,
    HealthThresholds,
    StateCause,
    assess,
    availability_score,
    device_health,
    memory_used_percent,
)

OPT, N, T, C = HealthState.OPTIMAL, HealthState.NORMAL, HealthState.THROTTLED, HealthState.CRITICAL


@pytest.mark.parametrize(
    ("celsius", "expected"),
    [(-10, OPT), (64.9, OPT), (65, N), (74.99, N), (75, T), (80, T), (85, T), (85.01, C), (120, C)],
    ids=lambda v: str(v),
)
def test_temperature_boundaries(celsius: float, expected: HealthState) -> None:
    result = assess(celsius, None)
    assert result is not None
    assert (result.state, result.temperature_state, result.memory_state) == (expected, expected, None)


@pytest.mark.parametrize(
    ("percent", "expected"),
    [(0, OPT), (69.99, OPT), (70, N), (84.99, N), (85, T), (95, T), (95.001, C), (100, C)],
    ids=lambda v: str(v),
)
def test_memory_boundaries(percent: float, expected: HealthState) -> None:
    result = assess(None, percent)
    assert result is not None and result.state is expected


@pytest.mark.parametrize(
    ("celsius", "percent", "expected", "speed"),
    [
        (40, 10, OPT, 1.0),
        (70, 10, N, 0.8),
        (40, 72, N, 0.8),
        (80, 72, T, 0.5),
        (66, 90, T, 0.5),
        (90, 10, C, 0.0),
        (40, 99, C, 0.0),
    ],
)
def test_worse_of_the_two_and_its_speed(
    celsius: float, percent: float, expected: HealthState, speed: float
) -> None:
    result = assess(celsius, percent)
    assert result is not None
    assert (result.state, result.speed_multiplier) == (expected, speed)


TEMP, MEM, DOWN = StateCause.TEMPERATURE, StateCause.MEMORY, StateCause.DOWN


@pytest.mark.parametrize(
    ("up", "celsius", "percent", "state", "causes"),
    [
        (True, 40, 10, OPT, ()),  # nothing degrades it: no cause
        (True, 78, 10, T, (TEMP,)),  # throttled by heat, whatever the clocks say
        (True, 40, 88, T, (MEM,)),
        (True, 78, 88, T, (TEMP, MEM)),  # both in the throttled band: both named
        (True, 90, 72, C, (TEMP,)),  # memory is only normal: not a cause of critical
        (True, None, 99, C, (MEM,)),
        (False, 40, 10, C, (DOWN,)),  # down outranks readings that would be optimal
        (True, None, None, None, ()),
    ],
    ids=["optimal", "heat", "memory", "both", "worse-only", "no-temperature", "down", "unknown"],
)
def test_the_state_names_the_rules_that_set_it(
    up: bool, celsius: float | None, percent: float | None, state: HealthState | None,
    causes: tuple[StateCause, ...],
) -> None:
    health = device_health(up=up, temperature_celsius=celsius, utilization_ratio=0.5,
                           memory_used_bytes=None if percent is None else int(percent * 10),
                           memory_free_bytes=None, memory_total_bytes=1000)
    assert (health.state, health.causes) == (state, causes)


def test_nothing_known_is_no_state_not_optimal() -> None:
    assert assess(None, None) is None
    assert assess(math.nan, None) is None


def test_custom_thresholds() -> None:
    custom = HealthThresholds(temperature_celsius=Bands(50, 60, 70))
    assert assess(55, None, custom).state is N  # type: ignore[union-attr]
    assert assess(70, None, custom).state is T  # type: ignore[union-attr]
    assert assess(70.5, None, custom).state is C  # type: ignore[union-attr]


@pytest.mark.parametrize("values", [(65, 65, 85), (85, 75, 65), (1, 2, math.inf)])
def test_bands_must_ascend(values: tuple[float, float, float]) -> None:
    with pytest.raises(ValueError, match="normal < throttled < critical"):
        Bands(*values)


def test_state_order_and_labels() -> None:
    assert [s.value for s in HealthState] == ["optimal", "normal", "throttled", "critical"]
    assert [s.speed_multiplier for s in HealthState] == [1.0, 0.8, 0.5, 0.0]


@pytest.mark.parametrize(
    ("free", "total", "util", "expected"),
    [
        (80, 80, 0.0, 1.0),
        (0, 80, 1.0, 0.0),
        (40, 80, 0.5, 0.6 * 0.5 + 0.4 * 0.5),
        (60, 80, 0.25, 0.6 * 0.75 + 0.4 * 0.75),
        (20, 80, 0.9, 0.6 * 0.25 + 0.4 * 0.1),
        (100, 80, -0.5, 1.0),  # clamped
        (-5, 80, 1.5, 0.0),  # clamped
    ],
)
def test_availability_score(free: int, total: int, util: float, expected: float) -> None:
    assert availability_score(free, total, util) == pytest.approx(expected)


@pytest.mark.parametrize(
    ("free", "total", "util"), [(None, 80, 0.5), (1, 0, 0.5), (1, None, 0.5), (1, 8, None)]
)
def test_availability_score_unknown(free: int | None, total: int | None, util: float | None) -> None:
    assert availability_score(free, total, util) is None


def test_memory_used_percent() -> None:
    assert memory_used_percent(85, 100) == 85.0
    assert memory_used_percent(None, 100) is None
    assert memory_used_percent(1, 0) is None
