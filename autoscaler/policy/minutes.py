"""A metric's load minute by minute, kept in the rule's history: what `overloadBudget` and `forecast` read.

An `Average` metric is per replica, so its load is the value times the replicas; a `Total` metric is the
service's load as it is. Each minute keeps the largest load seen in it (overload is a matter of peaks); a
minute without a value is None. The series is a tuple, replaced once a minute, so a sync within a minute
costs nothing; the figure each user derives from it (`MinuteLoads.derived`) is computed when a minute closes.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

from autoscaler.policy.decision import MetricObservation, MinuteLoads

if TYPE_CHECKING:
    from autoscaler.policy.spec import MetricSpec

Derive = Callable[[tuple[float | None, ...], MinuteLoads | None], tuple[float | None, object]]
"""From the loads up to the minute that just opened (its first value last) and the series as it was a minute
before (None: the loads alone, after a gap or when seeded), the series' derived figure and what to keep for
the next minute (`MinuteLoads.kept`)."""


def minute_of(now: float) -> int:
    return math.floor(now / 60.0)


def load_of(metric: MetricSpec, value: float | None, current: int) -> float | None:
    """The load a metric's value stands for: an Average is per replica, a Total is the service's."""
    if value is None or not math.isfinite(value) or value < 0:
        return None
    return value * current if metric.type == "Average" else value


def recorded(metrics: Sequence[MetricSpec], kept: Sequence[MinuteLoads], current: int,
             observations: Sequence[MetricObservation], now: float, keep: int, derive: Derive,
             ) -> tuple[MinuteLoads, ...]:
    """Each metric's series with this sync's load, at most `keep` minutes long."""
    minute = minute_of(now)
    seen = {o.name: o.value for o in observations}
    by_name = {series.name: series for series in kept}
    out = []
    for metric in metrics:
        series = by_name.get(metric.name) or MinuteLoads(metric.name, minute, ())
        out.append(_with_load(series, load_of(metric, seen.get(metric.name), current), minute, keep, derive))
    return tuple(out)


def _with_load(series: MinuteLoads, load: float | None, minute: int, keep: int, derive: Derive,
               ) -> MinuteLoads:
    if minute < series.last_minute:  # the clock went back: keep what was measured
        return series
    if minute == series.last_minute and series.loads:
        last = series.loads[-1]
        if load is None or (last is not None and last >= load):
            return series
        return replace(series, loads=(*series.loads[:-1], load))
    gap = minute - series.last_minute if series.loads else 1
    loads = (*series.loads, *([None] * min(gap - 1, keep)), load)[-keep:]
    derived, kept = derive(loads, series if gap == 1 and series.loads else None)
    return MinuteLoads(series.name, minute, loads, derived, kept)


def seeded(metrics: Sequence[MetricSpec], kept: Sequence[MinuteLoads], past: dict[str, list[float | None]],
           last_minute: int, keep: int, derive: Derive) -> tuple[MinuteLoads, ...]:
    """Each metric's series read back from its past (`past[name]`: one load per minute, oldest first, the
    last one at `last_minute`), where that is longer than what this process kept itself."""
    by_name = {series.name: series for series in kept}
    out = []
    for metric in metrics:
        own = by_name.get(metric.name)
        loads = tuple(past.get(metric.name, ()))[-keep:]
        if own is not None and len(own.loads) >= len(loads):
            out.append(own)
        else:
            derived, state = derive(loads, None) if loads else (None, None)
            out.append(MinuteLoads(metric.name, last_minute, loads, derived, state))
    return tuple(out)
