"""A short in-memory history per GPU and the trend over a window of it.

Bounded twice: at most `max_samples` per GPU and nothing older than `retention_seconds` behind the newest
sample, so memory stays flat whatever the sampling rate. Sweeps come from the sampler thread but also from
every scrape and API call, so `record` keeps at most one sample per `sample_interval_seconds`: a sample less
than an interval after the last kept one replaces the newest instead of being added (the newest is always
the latest reading), and 720 samples at 5 s still span the hour promised. No clock is read here: samples
carry their timestamps and `trend()` takes `now`, so the arithmetic is tested with fixed timestamps.

Trend word: the least-squares slope of the window's samples, per minute, compared with a threshold:
|slope| < threshold -> stable, slope >= threshold -> rising, slope <= -threshold -> falling. A slope from a
few samples or a sliver of the window is noise, so the word is `unknown` unless the quantity has at least
`min_samples` samples (default 5) spanning at least `min_window_coverage` of the window (default 0.5: at
least 2.5 of 5 minutes); the statistics (current, avg, min, max, slope) are still given. Default thresholds:
0.5 °C/min for temperature, 1 %/min for utilization and memory use (5 °C or 10 points over 10 minutes).
"""

from __future__ import annotations

import math
import threading
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from enum import StrEnum


@dataclass(frozen=True)
class HistorySettings:
    # Per GPU: one hour at one sample every 5 s.
    max_samples: int = 720
    # Samples older than this behind the newest one are dropped; also bounds the trend window.
    retention_seconds: float = 3600.0
    # Seconds between history samples taken by the exporter itself (NVML sweeps shared with scrapes), so
    # trends exist whether or not anyone scrapes.
    sample_interval_seconds: float = 5.0

    def __post_init__(self) -> None:
        if not (math.isfinite(self.sample_interval_seconds) and self.sample_interval_seconds > 0):
            raise ValueError(f"sample_interval_seconds: expected > 0 (got {self.sample_interval_seconds!r})")
        if self.max_samples < 2:
            raise ValueError(f"max_samples: expected >= 2 (got {self.max_samples!r})")
        if not (math.isfinite(self.retention_seconds) and self.retention_seconds > 0):
            raise ValueError(f"retention_seconds: expected > 0 (got {self.retention_seconds!r})")


@dataclass(frozen=True)
class TrendThresholds:
    """|slope| below these (per minute) is `stable`."""

    temperature_celsius_per_minute: float = 0.5
    utilization_percent_per_minute: float = 1.0
    memory_percent_per_minute: float = 1.0
    # Fewer samples than this, or samples spanning less than this fraction of the window -> `unknown`.
    min_samples: int = 5
    min_window_coverage: float = 0.5

    def __post_init__(self) -> None:
        if self.min_samples < 2:
            raise ValueError(f"min_samples: expected >= 2 (got {self.min_samples!r})")
        if not (math.isfinite(self.min_window_coverage) and 0 <= self.min_window_coverage <= 1):
            raise ValueError(f"min_window_coverage: expected 0..1 (got {self.min_window_coverage!r})")
        for name, value in (
            ("temperature_celsius_per_minute", self.temperature_celsius_per_minute),
            ("utilization_percent_per_minute", self.utilization_percent_per_minute),
            ("memory_percent_per_minute", self.memory_percent_per_minute),
        ):
            if not (math.isfinite(value) and value > 0):
                raise ValueError(f"{name}: expected > 0 (got {value!r})")


@dataclass(frozen=True)
class Sample:
    """One reading of one GPU; a quantity the GPU could not report is None."""

    timestamp: float  # seconds (epoch or any monotonic base, consistently)
    temperature_celsius: float | None
    utilization_percent: float | None  # 0..100
    memory_used_percent: float | None  # 0..100


class TrendWord(StrEnum):
    RISING = "rising"
    FALLING = "falling"
    STABLE = "stable"
    UNKNOWN = "unknown"


@dataclass(frozen=True)
class SeriesTrend:
    """Statistics of one quantity over the window; all None when no sample in it had the quantity."""

    samples: int
    current: float | None  # the newest sample in the window
    average: float | None
    minimum: float | None
    maximum: float | None
    slope_per_minute: float | None
    trend: TrendWord


@dataclass(frozen=True)
class Trend:
    uuid: str
    minutes: float
    window_start: float
    window_end: float
    samples: int
    temperature_celsius: SeriesTrend
    utilization_percent: SeriesTrend
    memory_used_percent: SeriesTrend

    @property
    def trend(self) -> TrendWord:
        """The headline word is the temperature's, as in the GPU manager's temperature trend."""
        return self.temperature_celsius.trend


def least_squares_slope(points: Sequence[tuple[float, float]]) -> float | None:
    """Slope (y per x unit) of the ordinary least-squares line; None for < 2 points or a single x."""
    n = len(points)
    if n < 2:
        return None
    mean_x = sum(x for x, _ in points) / n
    mean_y = sum(y for _, y in points) / n
    sxx = sum((x - mean_x) ** 2 for x, _ in points)
    if sxx == 0:
        return None
    sxy = sum((x - mean_x) * (y - mean_y) for x, y in points)
    return sxy / sxx


def classify(slope_per_minute: float | None, threshold: float) -> TrendWord:
    if slope_per_minute is None:
        return TrendWord.UNKNOWN
    if slope_per_minute >= threshold:
        return TrendWord.RISING
    if slope_per_minute <= -threshold:
        return TrendWord.FALLING
    return TrendWord.STABLE


def series_trend(
    samples: Sequence[Sample], value: Callable[[Sample], float | None], threshold: float,
    min_samples: int = 2, min_span_seconds: float = 0.0,
) -> SeriesTrend:
    """Statistics of one quantity; the word is `unknown` below `min_samples` points or when the points span
    less than `min_span_seconds`."""
    points = [(s.timestamp, v) for s in samples if (v := value(s)) is not None and math.isfinite(v)]
    if not points:
        return SeriesTrend(0, None, None, None, None, None, TrendWord.UNKNOWN)
    values = [y for _, y in points]
    slope = least_squares_slope(points)
    slope_per_minute = None if slope is None else slope * 60.0
    enough = len(points) >= min_samples and points[-1][0] - points[0][0] >= min_span_seconds
    return SeriesTrend(
        samples=len(points),
        current=values[-1],
        average=sum(values) / len(values),
        minimum=min(values),
        maximum=max(values),
        slope_per_minute=slope_per_minute,
        trend=classify(slope_per_minute, threshold) if enough else TrendWord.UNKNOWN,
    )


class GpuHistory:
    """Thread-safe: the collector records from the scrape thread while the status API reads."""

    def __init__(self, settings: HistorySettings | None = None) -> None:
        self.settings = settings or HistorySettings()
        self._lock = threading.Lock()
        self._samples: dict[str, deque[Sample]] = {}

    def record(self, uuid: str, sample: Sample) -> bool:
        """Add a sample, or replace the newest one while it is less than an interval after the one before
        it (see the module doc); False (and ignored) when it is older than the GPU's newest sample."""
        with self._lock:
            samples = self._samples.setdefault(uuid, deque(maxlen=self.settings.max_samples))
            if samples and sample.timestamp < samples[-1].timestamp:
                return False
            interval = self.settings.sample_interval_seconds
            if len(samples) >= 2 and samples[-1].timestamp - samples[-2].timestamp < interval:
                samples[-1] = sample
            else:
                samples.append(sample)
            oldest_kept = sample.timestamp - self.settings.retention_seconds
            while samples and samples[0].timestamp < oldest_kept:
                samples.popleft()
            return True

    def samples(self, uuid: str, since: float | None = None) -> tuple[Sample, ...]:
        with self._lock:
            found = tuple(self._samples.get(uuid, ()))
        return found if since is None else tuple(s for s in found if s.timestamp >= since)

    def uuids(self) -> tuple[str, ...]:
        with self._lock:
            return tuple(self._samples)

    def forget(self, uuid: str) -> None:
        """Drop a GPU that is gone (e.g. after a device list change)."""
        with self._lock:
            self._samples.pop(uuid, None)

    def trend(
        self,
        uuid: str,
        minutes: float,
        now: float | None = None,
        thresholds: TrendThresholds | None = None,
    ) -> Trend | None:
        """Statistics over [now - minutes, now]; `now` defaults to the newest sample's timestamp.

        The reported window starts at the oldest sample kept when the history is shorter than the window,
        so a caller never reads a span the history does not have. None when the GPU was never recorded.
        """
        if not (math.isfinite(minutes) and minutes > 0):
            raise ValueError(f"minutes: expected a positive number (got {minutes!r})")
        thresholds = thresholds or TrendThresholds()
        with self._lock:
            if uuid not in self._samples:
                return None
            everything = tuple(self._samples[uuid])
        end = now if now is not None else (everything[-1].timestamp if everything else 0.0)
        start = end - minutes * 60.0
        window = [s for s in everything if start <= s.timestamp <= end]
        if everything and start < everything[0].timestamp <= end:
            start = everything[0].timestamp
        span = thresholds.min_window_coverage * minutes * 60.0

        def of(value: Callable[[Sample], float | None], threshold: float) -> SeriesTrend:
            return series_trend(window, value, threshold, thresholds.min_samples, span)

        return Trend(
            uuid=uuid,
            minutes=minutes,
            window_start=start,
            window_end=end,
            samples=len(window),
            temperature_celsius=of(lambda s: s.temperature_celsius,
                                   thresholds.temperature_celsius_per_minute),
            utilization_percent=of(lambda s: s.utilization_percent,
                                   thresholds.utilization_percent_per_minute),
            memory_used_percent=of(lambda s: s.memory_used_percent, thresholds.memory_percent_per_minute),
        )
