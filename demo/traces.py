"""Load traces: the demand on a GPU service as a function of time, deterministic for a given seed.

Load is measured in GPU-equivalents: a load of 3.2 is the work that keeps 3.2 GPUs 100 % busy. The benchmark
of autoscaling quality replays these traces in simulated time and the demo plays the daily one compressed into
a few minutes, so every trace is a pure function of time (no clock, no global random state): the same seed
gives the same load at the same instant, however and however often it is sampled.
"""

from __future__ import annotations

import itertools
import math
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass

DAY_SECONDS = 86_400.0


@dataclass(frozen=True)
class Trace:
    """A named load curve over [0, duration_seconds]; outside it the load holds its end values."""

    name: str
    description: str
    duration_seconds: float
    load: Callable[[float], float]
    others: Callable[[float], int] | None = None
    """GPUs of the pool that other tenants want at t (None: the pool is ours alone)."""

    def __post_init__(self) -> None:
        if not self.duration_seconds > 0:
            raise ValueError(f"trace {self.name}: duration_seconds must be > 0 (got {self.duration_seconds})")

    def __call__(self, t: float) -> float:
        return max(0.0, self.load(min(max(t, 0.0), self.duration_seconds)))

    def others_at(self, t: float) -> int:
        """GPUs other tenants want at t (0 without `others`)."""
        if self.others is None:
            return 0
        return max(0, self.others(min(max(t, 0.0), self.duration_seconds)))

    def compressed(self, duration_seconds: float) -> Trace:
        """The same curve played in `duration_seconds` (the demo plays a day in a few minutes)."""
        factor = self.duration_seconds / duration_seconds
        original, others = self.load, self.others
        return Trace(
            name=self.name,
            description=f"{self.description} (compressed {factor:g}x)",
            duration_seconds=duration_seconds,
            load=lambda t: original(t * factor),
            others=None if others is None else (lambda t: others(t * factor)),
        )


@dataclass(frozen=True)
class Burst:
    """Extra load `height` from `start` for `length`, both as fractions of the trace's period."""

    start: float
    length: float
    height: float


class _SmoothNoise:
    """Relative noise in [-amplitude, +amplitude]: seeded random knots every `period` seconds, linearly
    interpolated so the load never jumps between two samples closer than a knot apart."""

    def __init__(self, seed: int, amplitude: float, period: float, duration: float) -> None:
        if amplitude < 0 or period <= 0:
            raise ValueError(f"noise needs amplitude >= 0 and period > 0 (got {amplitude}, {period})")
        rng = random.Random(seed)
        count = math.ceil(duration / period) + 2
        self._knots = [rng.uniform(-amplitude, amplitude) for _ in range(count)]
        self._period = period

    def __call__(self, t: float) -> float:
        position = max(t, 0.0) / self._period
        index = min(int(position), len(self._knots) - 2)
        frac = min(position - index, 1.0)
        return self._knots[index] * (1.0 - frac) + self._knots[index + 1] * frac


def steady(level: float = 3.5, jitter: float = 0.05, duration_seconds: float = 7_200.0,
           seed: int = 1) -> Trace:
    """A constant load with the small jitter every real service has."""
    noise = _SmoothNoise(seed, jitter, 60.0, duration_seconds)
    return Trace("steady", f"{level:g} GPU-equivalents, jitter +/-{jitter:.0%}", duration_seconds,
                 lambda t: level * (1.0 + noise(t)))


DEFAULT_BURSTS = (Burst(start=10.5 / 24, length=0.25 / 24, height=2.5),
                  Burst(start=16.0 / 24, length=0.20 / 24, height=2.0),
                  Burst(start=21.0 / 24, length=0.30 / 24, height=3.0))


def daily(trough: float = 1.2, peak: float = 6.0, trough_hour: float = 4.0,
          bursts: Sequence[Burst] = DEFAULT_BURSTS, jitter: float = 0.03, period_seconds: float = DAY_SECONDS,
          seed: int = 2) -> Trace:
    """One day: a cosine from `trough` (at `trough_hour`) to `peak` twelve hours later, plus short bursts.

    `period_seconds` compresses the whole day, bursts included, into a shorter run (the demo's minutes).
    """
    noise = _SmoothNoise(seed, jitter, period_seconds / 1_440.0, period_seconds)
    trough_phase = trough_hour / 24.0

    def load(t: float) -> float:
        phase = t / period_seconds
        base = trough + (peak - trough) * 0.5 * (1.0 - math.cos(2.0 * math.pi * (phase - trough_phase)))
        extra = sum(b.height for b in bursts if b.start <= phase < b.start + b.length)
        return (base + extra) * (1.0 + noise(t))

    return Trace("daily", f"daily curve {trough:g}..{peak:g} with {len(bursts)} bursts", period_seconds, load)


def sudden_burst(base: float = 2.5, peak: float = 7.0, start_seconds: float = 1_800.0,
                 length_seconds: float = 1_200.0, duration_seconds: float = 7_200.0) -> Trace:
    """A quiet service hit by a sudden burst (a batch job, a launch) that ends as suddenly."""
    end = start_seconds + length_seconds
    return Trace("burst", f"{base:g} -> {peak:g} for {length_seconds / 60:g} min", duration_seconds,
                 lambda t: peak if start_seconds <= t < end else base)


def slow_ramp(start: float = 1.5, end: float = 7.5, ramp_seconds: float = 7_200.0,
              hold_seconds: float = 1_800.0) -> Trace:
    """Load growing linearly for two hours (a region failing over, a morning), then holding."""
    return Trace("ramp", f"{start:g} -> {end:g} over {ramp_seconds / 3600:g} h", ramp_seconds + hold_seconds,
                 lambda t: start + (end - start) * min(t / ramp_seconds, 1.0))


def noisy(level: float = 4.0, swell: float = 0.25, swell_period_seconds: float = 300.0,
          jitter: float = 0.15, jitter_period_seconds: float = 30.0, duration_seconds: float = 7_200.0,
          seed: int = 3) -> Trace:
    """A flat mean that wanders: swells over minutes plus fast jitter, the trace that tempts flapping."""
    slow = _SmoothNoise(seed, swell, swell_period_seconds, duration_seconds)
    fast = _SmoothNoise(seed + 1, jitter, jitter_period_seconds, duration_seconds)
    return Trace("noisy", f"{level:g}, swells +/-{swell:.0%} over {swell_period_seconds / 60:g} min, "
                 f"jitter +/-{jitter:.0%} every {jitter_period_seconds:g} s", duration_seconds,
                 lambda t: level * (1.0 + slow(t) + fast(t)))


def bursty(trough: float = 1.5, peak: float = 5.0, trough_hour: float = 4.0, bursts_per_hour: float = 2.0,
           burst_minutes: tuple[float, float] = (2.0, 8.0), burst_height: tuple[float, float] = (0.4, 1.2),
           requests_per_gpu_second: float = 10.0, bucket_seconds: float = 5.0,
           duration_seconds: float = DAY_SECONDS, seed: int = 5) -> Trace:
    """Request counts of a day as an LLM service sees them: a daily curve, swings of a few minutes (a batch
    client, a launch, a retry storm: `bursts_per_hour` on average, each lasting `burst_minutes` and raising
    the load by `burst_height` times the curve), and the counting noise of requests arriving independently
    (the count per `bucket_seconds` drawn around its mean with a Poisson variance: a normal approximation,
    as a bucket holds 50 to 500 requests). The swings are what a reactive autoscaler meets too late."""
    rng = random.Random(seed)
    buckets = math.ceil(duration_seconds / bucket_seconds) + 1
    extra = [0.0] * buckets
    t = rng.expovariate(bursts_per_hour / 3_600.0)
    while t < duration_seconds:
        length = rng.uniform(*burst_minutes) * 60.0
        height = rng.uniform(*burst_height)
        first, last = int(t // bucket_seconds), min(buckets, int((t + length) // bucket_seconds) + 1)
        for index in range(first, last):
            extra[index] = max(extra[index], height)
        t += length + rng.expovariate(bursts_per_hour / 3_600.0)
    trough_phase = trough_hour / 24.0
    loads = []
    for index in range(buckets):
        phase = index * bucket_seconds / DAY_SECONDS
        curve = trough + (peak - trough) * 0.5 * (1.0 - math.cos(2.0 * math.pi * (phase - trough_phase)))
        expected = curve * (1.0 + extra[index]) * requests_per_gpu_second * bucket_seconds
        count = max(0.0, rng.gauss(expected, math.sqrt(expected)))
        loads.append(count / (requests_per_gpu_second * bucket_seconds))

    def load(t: float) -> float:
        return loads[min(int(t // bucket_seconds), buckets - 1)]

    low, high = burst_height
    return Trace("bursty", f"daily curve {trough:g}..{peak:g}, {bursts_per_hour:g} swings an hour of "
                 f"{burst_minutes[0]:g}-{burst_minutes[1]:g} min (+{low:.0%}..+{high:.0%}), counted requests",
                 duration_seconds, load)


def _ramps(points: Sequence[tuple[float, float]]) -> Callable[[float], float]:
    """Linear between (fraction of the period, value) points, flat before the first and after the last."""
    def at(phase: float) -> float:
        if phase <= points[0][0]:
            return points[0][1]
        for (x0, y0), (x1, y1) in itertools.pairwise(points):
            if phase <= x1:
                return y0 + (y1 - y0) * (phase - x0) / (x1 - x0) if x1 > x0 else y1
        return points[-1][1]
    return at


def _steps(changes: Sequence[tuple[float, int]]) -> Callable[[float], int]:
    """The value of the last (fraction of the period, value) change at or before a phase (0 before any)."""
    def at(phase: float) -> int:
        return next((value for start, value in reversed(changes) if phase >= start), 0)
    return at


CAPACITY_LOAD = ((0.0, 3.0), (0.25, 3.0), (0.375, 9.0), (0.75, 9.0), (0.875, 3.0))
"""The capacity trace's load: 3 GPUs' worth, a ramp to 9 (ten replicas at the 90 % target) and back."""
CAPACITY_OTHERS = ((0.0, 2), (0.625, 0), (0.8333, 3))
"""GPUs the other tenant wants: 2, none from 75 min, 3 from 100 min (of two hours)."""


def short_of_gpus(duration_seconds: float = 7_200.0, jitter: float = 0.03, seed: int = 4) -> Trace:
    """Load that outgrows a shared pool: a ramp asking for more replicas than the GPUs left by another tenant
    can hold, while that tenant holds 2 GPUs, releases them, then takes 3. Replay it on a pool of 8 GPUs."""
    noise = _SmoothNoise(seed, jitter, 60.0, duration_seconds)
    load, others = _ramps(CAPACITY_LOAD), _steps(CAPACITY_OTHERS)
    return Trace("capacity", "3 -> 9 -> 3, another tenant holding 2, then 0, then 3 GPUs", duration_seconds,
                 lambda t: load(t / duration_seconds) * (1.0 + noise(t)),
                 lambda t: others(t / duration_seconds))


DEMO_CAPACITY_LOAD = ((0.0, 1.5), (0.3, 1.5), (0.45, 9.5), (0.75, 9.5), (0.9, 2.5))
DEMO_CAPACITY_OTHERS = ((0.0, 2), (0.6, 0))


def demo_morning(duration_seconds: float) -> Trace:
    """The demo's capacity scenario: a quiet start, then a ramp past what 8 GPUs serve while a training job
    holds 2 of them until 60 % of the run."""
    load, others = _ramps(DEMO_CAPACITY_LOAD), _steps(DEMO_CAPACITY_OTHERS)
    return Trace("morning", "1.5 -> 9.5 -> 2.5 GPUs' worth, a training job holding 2 GPUs until 60 %",
                 duration_seconds, lambda t: load(t / duration_seconds),
                 lambda t: others(t / duration_seconds))


DEMO_BURSTS = (Burst(start=0.42, length=0.10, height=3.0), Burst(start=0.78, length=0.08, height=2.5))


def demo_day(duration_seconds: float) -> Trace:
    """The demo's day: the daily curve with two bursts wide enough to watch in a run of a few minutes."""
    return daily(bursts=DEMO_BURSTS, period_seconds=duration_seconds)


def benchmark_traces() -> tuple[Trace, ...]:
    """The six traces of the autoscaling-quality benchmark, fixed once for every configuration: the training
    traces, on which the shipped settings were chosen (`held_out_traces` are the others)."""
    return (steady(), daily(), sudden_burst(), slow_ramp(), noisy(), bursty())


HELD_OUT_BURSTS = (Burst(start=8.0 / 24, length=0.20 / 24, height=3.0),
                   Burst(start=13.5 / 24, length=0.30 / 24, height=2.0),
                   Burst(start=19.0 / 24, length=0.25 / 24, height=2.5))
"""The held-out day's bursts: other hours, lengths and heights than DEFAULT_BURSTS."""


def held_out_traces() -> tuple[Trace, ...]:
    """Traces no setting was chosen on: other seeds, levels and timings of the benchmark's kinds of load
    (the daily curve with its bursts moved, another day of swings, ...). The benchmark's six are the
    training traces; these are only reported on. `step` is a single unannounced step, which no policy that
    sees only the past holds (docs/benchmarks.md, the bar)."""
    def renamed(trace: Trace, name: str) -> Trace:
        return Trace(name, trace.description, trace.duration_seconds, trace.load, trace.others)

    return (renamed(steady(level=3.2, seed=24), "steady-2"),
            renamed(daily(bursts=HELD_OUT_BURSTS, seed=21), "daily-2"),
            renamed(sudden_burst(base=3.0, peak=6.5, start_seconds=2_400.0, length_seconds=900.0), "step-2"),
            renamed(slow_ramp(start=2.0, end=6.5, ramp_seconds=5_400.0), "ramp-2"),
            renamed(noisy(level=4.5, seed=23), "noisy-2"),
            renamed(bursty(seed=22), "bursty-2"))


def sample(trace: Trace, step_seconds: float) -> list[tuple[float, float]]:
    """(t, load) every `step_seconds` over the whole trace, both ends included."""
    if step_seconds <= 0:
        raise ValueError(f"step_seconds must be > 0 (got {step_seconds})")
    count = int(trace.duration_seconds // step_seconds)
    return [(i * step_seconds, trace(i * step_seconds)) for i in range(count + 1)]
