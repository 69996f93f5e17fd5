"""The clairvoyant bound: exact on traces whose optimum is known by hand, and below every replayed policy."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import pytest

from benchmarks import autoscaling_quality as bench
from demo.clairvoyant import cheapest_profile, min_gpu_hours
from demo.cluster import ClusterSettings
from demo.replay import ReplaySettings, replay
from demo.traces import Trace, noisy, sudden_burst

STEP = 5.0
HOUR = 3_600.0


def piecewise(name: str, duration: float, *segments: tuple[float, float]) -> Trace:
    """Load `level` from each segment's start (seconds) until the next segment's."""
    def load(t: float) -> float:
        return [level for start, level in segments if start <= t][-1]
    return Trace(name, name, duration, load)


def gpu_hours(samples: float) -> float:
    return samples * STEP / HOUR


def test_a_constant_load_needs_the_smallest_count_below_the_overload_line_and_nothing_more() -> None:
    trace = piecewise("constant", HOUR, (0.0, 3.8))  # 3.8 / 4 = 0.95: four replicas, not overloaded
    samples = HOUR / STEP + 1
    assert min_gpu_hours(trace, 0.0, 2, 10).gpu_hours == pytest.approx(gpu_hours(4 * samples))


def test_a_step_up_pays_the_new_replicas_loading_before_it() -> None:
    trace = piecewise("step", HOUR, (0.0, 1.9), (1_800.0, 3.8))
    before, after, loading = 1_800.0 / STEP, 1_800.0 / STEP + 1, 120.0 / STEP
    expected = gpu_hours(2 * before + 4 * after + 2 * loading)
    assert min_gpu_hours(trace, 0.0, 2, 10).gpu_hours == pytest.approx(expected)
    slow = ReplaySettings(cluster=dataclasses.replace(ClusterSettings(), startup_delay_seconds=600.0))
    assert min_gpu_hours(trace, 0.0, 2, 10, slow).gpu_hours == pytest.approx(
        expected + gpu_hours(2 * 480.0 / STEP))


def test_an_overload_budget_as_long_as_a_spike_lets_the_bound_ride_it_out() -> None:
    trace = piecewise("spike", HOUR, (0.0, 1.9), (1_000.0, 3.8), (1_060.0, 1.9))
    spike_minutes = 12 * STEP / 60.0  # samples at 1000, 1005, ..., 1055
    two_replicas_throughout = gpu_hours(2 * (HOUR / STEP + 1))
    assert min_gpu_hours(trace, spike_minutes, 2, 10).gpu_hours == pytest.approx(two_replicas_throughout)
    assert min_gpu_hours(trace, 0.0, 2, 10).gpu_hours > two_replicas_throughout


def test_the_bound_never_rises_with_a_larger_budget_nor_below_min_replicas() -> None:
    trace = noisy(duration_seconds=1_800.0)
    bounds = [min_gpu_hours(trace, minutes, 2, 10).gpu_hours for minutes in (0.0, 1.0, 3.0, 10.0, 40.0)]
    assert bounds == sorted(bounds, reverse=True) and bounds[0] > bounds[-1]
    quiet = piecewise("quiet", HOUR, (0.0, 0.1))
    assert min_gpu_hours(quiet, 0.0, 3, 10).gpu_hours == pytest.approx(gpu_hours(3 * (HOUR / STEP + 1)))


def test_the_cheapest_profile_at_a_price_reports_what_it_is_made_of() -> None:
    loads = [0.9, 0.9, 3.0, 3.0, 0.9]
    free_overload = cheapest_profile(loads, 0.0, 1, 4, 2, 0.95)
    assert (free_overload.gpu_samples, free_overload.overloaded_samples) == (5.0, 2)
    # 3.0 needs 4 replicas (3 would be 100 % busy): 3 more, held for 2 samples and loading for the 2 before.
    costly_overload = cheapest_profile(loads, 100.0, 1, 4, 2, 0.95)
    assert (costly_overload.gpu_samples, costly_overload.overloaded_samples) == (5.0 + 3 * 2 + 3 * 2, 0)


@pytest.mark.parametrize("call", [
    lambda: min_gpu_hours(piecewise("c", HOUR, (0.0, 1.0)), -1.0, 2, 10),
    lambda: min_gpu_hours(piecewise("c", HOUR, (0.0, 1.0)), 0.0, 5, 4),
    lambda: cheapest_profile([1.0], -1.0, 1, 2, 0, 0.95),
])
def test_bad_arguments_are_refused_with_a_message(call: Callable[[], object]) -> None:
    with pytest.raises(ValueError, match=r"must be >= 0|need"):
        call()


@pytest.mark.parametrize("delay", [60.0, 97.0, 300.0])
def test_no_replayed_configuration_beats_the_bound_at_its_own_overload(delay: float) -> None:
    """The bound is a relaxation of the replay: every configuration the benchmark compares, on a burst and a
    noisy trace, with start-up delays that are and are not a multiple of the step, spends at least it."""
    settings = ReplaySettings(cluster=dataclasses.replace(ClusterSettings(), startup_delay_seconds=delay))
    for trace in (sudden_burst(duration_seconds=3_600.0), noisy(duration_seconds=2_400.0)):
        for config in bench.configurations():
            figures = replay(config.rule, trace, settings).figures
            bound = min_gpu_hours(trace, figures.overloaded_minutes, config.rule.min_replicas,
                                  config.rule.max_replicas, settings)
            assert 0.5 * figures.gpu_hours < bound.gpu_hours <= figures.gpu_hours + 1e-9, (
                trace.name, config.key, figures, bound)
