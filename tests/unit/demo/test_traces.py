"""Load traces: deterministic functions of time with the shape each name promises."""

from __future__ import annotations

import statistics

import pytest

from demo.traces import (
    Burst,
    Trace,
    benchmark_traces,
    daily,
    demo_day,
    demo_morning,
    noisy,
    sample,
    short_of_gpus,
    slow_ramp,
    steady,
    sudden_burst,
)


def test_same_seed_same_load_and_other_seed_other_load() -> None:
    times = [i * 7.3 for i in range(500)]
    assert [noisy(seed=5)(t) for t in times] == [noisy(seed=5)(t) for t in times]
    assert [noisy(seed=5)(t) for t in times] != [noisy(seed=6)(t) for t in times]


def test_a_trace_does_not_depend_on_how_often_it_is_sampled() -> None:
    trace = daily()
    coarse = dict(sample(trace, 600.0))
    fine = dict(sample(trace, 60.0))
    assert all(fine[t] == value for t, value in coarse.items())


def test_steady_stays_within_its_jitter() -> None:
    loads = [load for _, load in sample(steady(level=3.0, jitter=0.05), 5.0)]
    assert min(loads) >= 3.0 * 0.95 - 1e-9
    assert max(loads) <= 3.0 * 1.05 + 1e-9
    assert max(loads) - min(loads) > 0.1  # it does jitter


def test_daily_has_its_trough_and_peak_twelve_hours_apart() -> None:
    trace = daily(trough=1.0, peak=5.0, trough_hour=4.0, bursts=(), jitter=0.0)
    assert trace(4 * 3600) == pytest.approx(1.0)
    assert trace(16 * 3600) == pytest.approx(5.0)
    assert trace(10 * 3600) == pytest.approx(3.0)


def test_daily_bursts_add_their_height_only_inside_their_window() -> None:
    burst = Burst(start=0.5, length=0.1, height=2.0)
    plain = daily(bursts=(), jitter=0.0)
    bursty = daily(bursts=(burst,), jitter=0.0)
    day = 86_400.0
    assert bursty(0.55 * day) == pytest.approx(plain(0.55 * day) + 2.0)
    assert bursty(0.45 * day) == pytest.approx(plain(0.45 * day))
    assert bursty(0.65 * day) == pytest.approx(plain(0.65 * day))


def test_compressing_plays_the_same_curve_faster() -> None:
    day = daily()
    short = day.compressed(180.0)
    assert short.duration_seconds == 180.0
    for t in (0.0, 33.3, 90.0, 179.0):
        assert short(t) == pytest.approx(day(t * 86_400.0 / 180.0))


def test_demo_day_bursts_last_long_enough_to_watch() -> None:
    trace = demo_day(180.0)
    base = daily(bursts=(), period_seconds=180.0)
    burst_seconds = sum(1 for t, load in sample(trace, 0.5) if load > base(t) + 1.0) * 0.5
    assert burst_seconds >= 20.0


def test_sudden_burst_jumps_and_falls_back() -> None:
    trace = sudden_burst(base=2.0, peak=7.0, start_seconds=100.0, length_seconds=50.0, duration_seconds=300.0)
    assert [trace(t) for t in (99.0, 100.0, 149.0, 150.0)] == [2.0, 7.0, 7.0, 2.0]


def test_slow_ramp_is_linear_then_holds() -> None:
    trace = slow_ramp(start=1.0, end=5.0, ramp_seconds=100.0, hold_seconds=50.0)
    assert trace(50.0) == pytest.approx(3.0)
    assert trace(100.0) == pytest.approx(5.0)
    assert trace(140.0) == pytest.approx(5.0)


def test_noisy_wanders_widely_around_its_level() -> None:
    loads = [load for _, load in sample(noisy(level=4.0, swell=0.25, jitter=0.15), 15.0)]
    assert min(loads) >= 4.0 * 0.6 - 1e-9 and max(loads) <= 4.0 * 1.4 + 1e-9
    assert statistics.mean(loads) == pytest.approx(4.0, rel=0.1)
    assert statistics.pstdev(loads) > 0.3


def test_outside_its_duration_a_trace_holds_its_end_values() -> None:
    trace = slow_ramp(start=1.0, end=5.0, ramp_seconds=100.0, hold_seconds=0.0)
    assert trace(-10.0) == trace(0.0)
    assert trace(1e9) == trace(100.0)


def test_load_is_never_negative() -> None:
    trace = Trace("t", "goes negative", 10.0, lambda t: -1.0)
    assert trace(5.0) == 0.0


@pytest.mark.parametrize("make", [lambda: Trace("t", "", 0.0, lambda t: 1.0),
                                  lambda: noisy(jitter=-0.1),
                                  lambda: sample(steady(), 0.0)],
                         ids=["zero duration", "negative noise", "step 0"])
def test_bad_parameters_are_refused(make: object) -> None:
    with pytest.raises(ValueError):
        make()  # type: ignore[operator]


def test_the_benchmark_has_the_five_traces_and_the_minute_scale_one() -> None:
    assert [t.name for t in benchmark_traces()] == ["steady", "daily", "burst", "ramp", "noisy", "bursty"]


def test_the_capacity_trace_outgrows_the_pool_the_tenant_leaves() -> None:
    """3 -> 9 GPUs' worth (ten replicas at 90 %) while the tenant holds 2 of 8 GPUs, then none, then 3."""
    trace = short_of_gpus()
    assert trace.name == "capacity" and trace.duration_seconds == 7_200.0
    assert trace(0.0) == pytest.approx(3.0, rel=0.04) and trace(3_600.0) == pytest.approx(9.0, rel=0.04)
    assert trace(7_200.0) == pytest.approx(3.0, rel=0.04)
    assert [trace.others_at(m * 60.0) for m in (0, 74, 75, 99, 100, 120)] == [2, 2, 0, 0, 3, 3]
    assert short_of_gpus()(1_234.5) == trace(1_234.5)  # seeded: the same load at the same instant


def test_a_trace_without_others_leaves_the_pool_to_us_and_compression_keeps_them() -> None:
    assert steady().others_at(100.0) == 0
    demo = demo_morning(100.0)
    assert [demo.others_at(t) for t in (0.0, 59.0, 60.0, 100.0)] == [2, 2, 0, 0]
    squeezed = short_of_gpus().compressed(72.0)
    assert [squeezed.others_at(t) for t in (0.0, 45.0, 60.0)] == [2, 0, 3]
    assert demo(0.0) == 1.5 and demo(60.0) == pytest.approx(9.5) and demo(100.0) == 2.5
