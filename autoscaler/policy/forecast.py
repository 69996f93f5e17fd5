"""`forecast`: scale ahead of a load that repeats, from the same time in earlier seasons.

A reactive rule adds replicas once the load is there, and they serve a start-up later. A load with a season
(the daily curve of a service's users) says ahead how it will move: at the same time yesterday, the load
rose by some factor over the next `leadSeconds`. Each minute this stage computes that seasonal rise, the mean
over the last `lookbackSeasons` seasons of (load a lead after that time) / (load at that time), both over
five-minute windows, and with `mode: scaleUp` each metric's value this sync is raised by it: the rule scales
now for the load a start-up ahead. A forecast only raises (a rise under 1 is ignored): as in cloud predictive
scaling it never scales down. `mode: observe` changes nothing and only publishes the replicas the forecast
would ask for. With no complete earlier season the rule runs reactively and says so.

Pure: the loads live in `RuleHistory.forecast` (`autoscaler.policy.minutes`), the clock is the `now` passed
in.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from autoscaler.policy.decision import MetricObservation, MinuteLoads, RuleHistory
from autoscaler.policy.minutes import Derive, recorded
from autoscaler.policy.proposal import combine, propose_all

if TYPE_CHECKING:
    from autoscaler.policy.spec import Forecast, Rule

WINDOW_MINUTES = 5
"""The loads compared are means over this many minutes: one minute's peak is noise, not a season."""
MAX_RISE = 4.0
"""A seasonal rise is taken as at most this: a season that went from nearly nothing to a peak (or a hostile
answer of 1e-300 then 1e300) must not turn a sync's value into an overflow, read as a failed metric."""


@dataclass(frozen=True, slots=True)
class Forecasted:
    """What the forecast did this sync: the seasonal rise per metric (None: no earlier season yet), the
    replicas the forecast asks for (None: no forecast), and a note when it could not forecast."""

    rises: tuple[tuple[str, float | None], ...]
    replicas: int | None
    note: str | None = None


def record(rule: Rule, forecast: Forecast, history: RuleHistory, current: int,
           observations: Sequence[MetricObservation], now: float) -> RuleHistory:
    """The history with this sync's loads recorded (the seasonal rise recomputed when a minute opened)."""
    series = recorded(rule.metrics, history.forecast, current, observations, now, kept_minutes(forecast),
                      derivation(forecast))
    return replace(history, forecast=series)


def kept_minutes(forecast: Forecast) -> int:
    return forecast.lookback_seasons * forecast.season_minutes + WINDOW_MINUTES


def derivation(forecast: Forecast) -> Derive:
    """The seasonal rise of a series, from the time of its last load."""
    def derive(loads: tuple[float | None, ...], previous: MinuteLoads | None) -> tuple[float | None, None]:
        rise = seasonal_rise(loads, forecast.season_minutes, forecast.lead_minutes, forecast.lookback_seasons)
        return rise, None

    return derive


def seasonal_rise(loads: Sequence[float | None], season: int, lead: int, seasons: int) -> float | None:
    """The mean over earlier seasons of the rise over `lead` minutes from the time of the last load."""
    now = len(loads) - 1
    rises = []
    for k in range(1, seasons + 1):
        then = now - k * season
        if then - WINDOW_MINUTES + 1 < 0:
            break
        half = WINDOW_MINUTES // 2
        before = _mean(loads[then - WINDOW_MINUTES + 1:then + 1])  # the five minutes up to that time
        after = _mean(loads[then + lead - half:then + lead + half + 1])  # five minutes around a lead later
        if before is not None and after is not None and before > 0:
            rises.append(min(after / before, MAX_RISE))
    return min(sum(rises) / len(rises), MAX_RISE) if rises else None


def _mean(values: Sequence[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return sum(known) / len(known) if known else None


def forecasted(rule: Rule, forecast: Forecast, history: RuleHistory, current: int,
               observations: Sequence[MetricObservation]) -> tuple[list[MetricObservation], Forecasted]:
    """The observations to decide on (raised by the seasonal rise with `mode: scaleUp`), and what the
    forecast saw."""
    rises = {series.name: series.derived for series in history.forecast}
    raised = []
    for seen in observations:
        rise = rises.get(seen.name)
        if rise is not None and rise > 1.0 and seen.value is not None and math.isfinite(seen.value):
            short = None if seen.panic_value is None else seen.panic_value * rise
            raised.append(replace(seen, value=seen.value * rise, panic_value=short))
        else:
            raised.append(seen)
    known = tuple((m.name, rises.get(m.name)) for m in rule.metrics)
    if all(rise is None for _, rise in known):
        note = (f"forecast: no complete earlier season yet ({forecast.season_seconds}s): the rule runs "
                "reactively")
        return list(observations), Forecasted(known, None, note)
    proposed = combine(propose_all(rule.metrics, raised, current, rule.behavior.scale_up.tolerance,
                                   rule.behavior.scale_down.tolerance), current)
    asked = max(proposed.replicas, current) if current > 0 else proposed.replicas
    chosen = raised if forecast.mode == "scaleUp" else list(observations)
    return chosen, Forecasted(known, asked)
