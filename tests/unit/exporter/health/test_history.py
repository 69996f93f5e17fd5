"""GpuHistory bounds and trend arithmetic with fixed timestamps."""

from __future__ import annotations

import itertools
import threading

import pytest

from exporter.health.history import (
    GpuHistory,
    HistorySettings,
    Sample,
    TrendThresholds,
    TrendWord,
    classify,
    least_squares_slope,
)

T0 = 1_700_000_000.0
U = "GPU-1"


def sample(
    offset_s: float, temp: float | None = 50.0, util: float | None = 40.0, mem: float | None = 30.0
) -> Sample:
    return Sample(T0 + offset_s, temp, util, mem)


def test_least_squares_slope() -> None:
    assert least_squares_slope([(0, 1), (1, 3), (2, 5)]) == pytest.approx(2.0)
    assert least_squares_slope([(0, 0), (1, 1), (2, 0), (3, 1)]) == pytest.approx(0.2)
    assert least_squares_slope([(0, 1)]) is None
    assert least_squares_slope([(5, 1), (5, 2)]) is None


@pytest.mark.parametrize(
    ("slope", "expected"),
    [
        (0.0, TrendWord.STABLE),
        (0.49, TrendWord.STABLE),
        (0.5, TrendWord.RISING),
        (-0.49, TrendWord.STABLE),
        (-0.5, TrendWord.FALLING),
        (None, TrendWord.UNKNOWN),
    ],
)
def test_classify_against_threshold(slope: float | None, expected: TrendWord) -> None:
    assert classify(slope, 0.5) is expected


def test_trend_statistics_over_the_window() -> None:
    history = GpuHistory()
    # temperature +1 °C per minute (rising), utilization -0.5 %/min (stable under 1 %/min), memory flat
    for minute in range(0, 11):
        history.record(U, sample(minute * 60, temp=60 + minute, util=50 - 0.5 * minute, mem=30))
    trend = history.trend(U, minutes=5)
    assert trend is not None
    assert (trend.window_end, trend.window_start, trend.samples) == (T0 + 600, T0 + 300, 6)
    temp = trend.temperature_celsius
    assert (temp.current, temp.minimum, temp.maximum, temp.average) == (70, 65, 70, 67.5)
    assert temp.slope_per_minute == pytest.approx(1.0)
    assert temp.trend is TrendWord.RISING and trend.trend is TrendWord.RISING
    assert trend.utilization_percent.slope_per_minute == pytest.approx(-0.5)
    assert trend.utilization_percent.trend is TrendWord.STABLE
    assert trend.memory_used_percent.trend is TrendWord.STABLE


def test_trend_falling_and_explicit_now() -> None:
    history = GpuHistory()
    for second in range(0, 121, 10):
        history.record(U, sample(second, temp=80 - second / 60 * 2, util=90 - second / 60 * 5))
    trend = history.trend(U, minutes=1, now=T0 + 60)
    assert trend is not None and trend.samples == 7  # 0, 10, ..., 60 inclusive
    assert trend.temperature_celsius.current == pytest.approx(78.0)
    assert trend.temperature_celsius.slope_per_minute == pytest.approx(-2.0)
    assert trend.trend is TrendWord.FALLING
    assert trend.utilization_percent.trend is TrendWord.FALLING


def test_custom_thresholds_change_the_word() -> None:
    history = GpuHistory()
    for minute in range(5):
        history.record(U, sample(minute * 60, temp=60 + 0.3 * minute))
    assert history.trend(U, 5).trend is TrendWord.STABLE  # type: ignore[union-attr]
    sensitive = TrendThresholds(temperature_celsius_per_minute=0.2)
    assert history.trend(U, 5, thresholds=sensitive).trend is TrendWord.RISING  # type: ignore[union-attr]


def test_missing_values_and_single_sample() -> None:
    history = GpuHistory()
    history.record(U, sample(0, temp=None, util=10))
    trend = history.trend(U, 5)
    assert trend is not None
    assert trend.temperature_celsius.samples == 0 and trend.temperature_celsius.current is None
    assert trend.temperature_celsius.trend is TrendWord.UNKNOWN
    assert trend.utilization_percent.current == 10 and trend.utilization_percent.trend is TrendWord.UNKNOWN
    assert history.trend("GPU-never", 5) is None


def test_empty_window() -> None:
    history = GpuHistory()
    history.record(U, sample(0))
    trend = history.trend(U, 1, now=T0 + 3600)
    assert trend is not None and trend.samples == 0 and trend.trend is TrendWord.UNKNOWN


def test_bounded_by_count_and_retention() -> None:
    history = GpuHistory(HistorySettings(max_samples=5, retention_seconds=100, sample_interval_seconds=1))
    for second in range(10):
        history.record(U, sample(second))
    assert [s.timestamp - T0 for s in history.samples(U)] == [5, 6, 7, 8, 9]
    history.record(U, sample(150))
    assert [s.timestamp - T0 for s in history.samples(U)] == [150]  # older than 100 s behind: dropped
    assert history.samples(U, since=T0 + 151) == ()


def test_out_of_order_sample_is_refused() -> None:
    history = GpuHistory()
    assert history.record(U, sample(10))
    assert not history.record(U, sample(5))
    assert history.record(U, sample(10))  # same instant is fine
    assert len(history.samples(U)) == 2


def test_forget_and_uuids() -> None:
    history = GpuHistory()
    history.record("a", sample(0))
    history.record("b", sample(0))
    history.forget("a")
    assert history.uuids() == ("b",)


@pytest.mark.parametrize("minutes", [0, -1, float("nan"), float("inf")])
def test_trend_rejects_bad_minutes(minutes: float) -> None:
    with pytest.raises(ValueError, match="minutes"):
        GpuHistory().trend(U, minutes)


@pytest.mark.parametrize(
    "kwargs", [{"max_samples": 1}, {"retention_seconds": 0}, {"retention_seconds": float("nan")}]
)
def test_settings_validation(kwargs: dict[str, float]) -> None:
    with pytest.raises(ValueError, match=next(iter(kwargs))):
        HistorySettings(**kwargs)  # type: ignore[arg-type]


def test_concurrent_writers_and_readers_keep_the_bound() -> None:
    history = GpuHistory(HistorySettings(max_samples=50, retention_seconds=10_000))
    errors: list[BaseException] = []

    def writer(uuid: str) -> None:
        try:
            for i in range(2000):
                history.record(uuid, sample(i))
        except BaseException as e:  # pragma: no cover - reported below
            errors.append(e)

    def reader() -> None:
        try:
            for _ in range(500):
                for uuid in history.uuids():
                    history.trend(uuid, 1)
        except BaseException as e:  # pragma: no cover
            errors.append(e)

    threads = [threading.Thread(target=writer, args=(f"g{i}",)) for i in range(4)] + [
        threading.Thread(target=reader)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors
    assert all(len(history.samples(f"g{i}")) == 50 for i in range(4))


@pytest.mark.parametrize(("seconds", "minutes", "word"), [
    (range(0, 121, 30), 5, TrendWord.UNKNOWN),    # 5 samples over 2 of 5 minutes: too little of the window
    (range(0, 151, 50), 5, TrendWord.UNKNOWN),    # 4 samples over 2.5 minutes: too few
    (range(0, 151, 30), 5, TrendWord.RISING),     # 6 samples over 2.5 of 5 minutes: exactly enough
    (range(0, 121, 30), 4, TrendWord.RISING),     # the same samples are half of a 4-minute window
])
def test_trend_word_needs_enough_samples_covering_half_the_window(
        seconds: range, minutes: float, word: TrendWord) -> None:
    history = GpuHistory()
    for second in seconds:
        history.record(U, sample(second, temp=50 + second / 10))  # a steep 6 °C/min rise
    trend = history.trend(U, minutes, now=T0 + seconds[-1])
    assert trend is not None and trend.temperature_celsius.slope_per_minute == pytest.approx(6.0)
    assert trend.trend is word


def test_trend_sample_rules_are_configurable() -> None:
    history = GpuHistory()
    for second in (0, 60):
        history.record(U, sample(second, temp=50 + second / 10))
    loose = TrendThresholds(min_samples=2, min_window_coverage=0.1)
    assert history.trend(U, 5).trend is TrendWord.UNKNOWN  # type: ignore[union-attr]
    assert history.trend(U, 5, thresholds=loose).trend is TrendWord.RISING  # type: ignore[union-attr]
    with pytest.raises(ValueError, match="min_samples"):
        TrendThresholds(min_samples=1)
    with pytest.raises(ValueError, match="min_window_coverage"):
        TrendThresholds(min_window_coverage=1.5)


# --- one sample per sample interval, whatever triggers the sweeps ---
def test_sweeps_every_second_still_keep_an_hour_in_720_samples() -> None:
    """Scrapes and API calls trigger sweeps far more often than the 5 s sample interval: the history keeps
    at most one sample per interval, so its 720 samples span the whole hour it promises."""
    history = GpuHistory()  # 720 samples, 3600 s, one per 5 s
    for second in range(7200):
        assert history.record(U, sample(second, temp=50 + second / 3600))
    kept = history.samples(U)
    assert len(kept) == 720
    assert kept[-1].timestamp == T0 + 7199  # the newest sweep is always the current value
    assert kept[-1].timestamp - kept[0].timestamp >= 3590
    gaps = [b.timestamp - a.timestamp for a, b in itertools.pairwise(kept)]
    assert min(gaps) > 0 and max(gaps) <= 5
    trend = history.trend(U, 60)
    assert trend is not None and trend.samples >= 719
    assert trend.window_start == kept[0].timestamp  # the oldest sample kept, not an hour it does not have


def test_a_sweep_less_than_an_interval_after_the_last_kept_sample_replaces_the_newest() -> None:
    history = GpuHistory(HistorySettings(sample_interval_seconds=5))
    for offset, temp in ((0, 50.0), (1, 51.0), (4.5, 52.0), (5, 53.0), (9, 54.0), (9.5, 55.0), (10.5, 56.0)):
        assert history.record(U, sample(offset, temp=temp))
    assert [(s.timestamp - T0, s.temperature_celsius) for s in history.samples(U)] == [
        (0, 50.0), (5, 53.0), (10.5, 56.0)]


def test_window_start_is_the_oldest_sample_when_less_history_exists() -> None:
    history = GpuHistory()
    for second in range(0, 601, 5):  # ten minutes of history
        history.record(U, sample(second))
    trend = history.trend(U, 60, now=T0 + 600)
    assert trend is not None and (trend.window_start, trend.window_end) == (T0, T0 + 600)
    inside = history.trend(U, 5, now=T0 + 600)
    assert inside is not None and inside.window_start == T0 + 300  # enough history: the nominal start
