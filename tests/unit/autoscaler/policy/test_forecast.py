"""`forecast` (autoscaler.policy.forecast): the seasonal rise from earlier seasons, the observations raised
by it (never lowered), `mode: observe`, and a rule with no earlier season running reactively."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import pytest

from autoscaler.policy import MetricObservation, RuleHistory
from autoscaler.policy.forecast import MAX_RISE, WINDOW_MINUTES, forecasted, record, seasonal_rise
from autoscaler.policy.spec import Forecast, MetricSpec, Rule

from .support import T0, make_rule

RATE = MetricSpec("rate", "sum(rate(r[1m]))", "Total", 10.0)
HOURLY = Forecast(season_seconds=3_600, lead_seconds=600, lookback_seasons=2)
MINUTE_T0 = (T0 // 3_600) * 3_600  # on the hour


def test_the_rise_is_the_seasons_own_over_the_lead() -> None:
    season, lead = 60, 10
    # one season of a ramp from 10 to 70 over an hour, then the same season again up to "now"
    day = [10.0 + m for m in range(season)]
    loads = day + day[:31]  # now is minute 30 of the second season: 40 now, 50 a lead later last season
    assert seasonal_rise(loads, season, lead, seasons=1) == pytest.approx(50.0 / 38.0)  # 5-minute means
    assert seasonal_rise(loads, season, lead, seasons=3) == pytest.approx(50.0 / 38.0)  # only one complete
    assert seasonal_rise(day[:40], season, lead, seasons=1) is None  # no earlier season yet


def test_unknown_or_zero_loads_give_no_rise() -> None:
    assert seasonal_rise([None] * 80, 60, 10, 1) is None
    assert seasonal_rise([0.0] * 80, 60, 10, 1) is None


def forecast_rule(forecast: Forecast = HOURLY) -> Rule:
    return dataclasses.replace(make_rule(metrics=(RATE,)), forecast=forecast)


def run_seasons(rule: Rule, minutes: int, load: Callable[[int], float]) -> RuleHistory:
    history = RuleHistory()
    for minute in range(minutes):
        history = record(rule, HOURLY, history, 4, [MetricObservation("rate", load(minute))],
                         MINUTE_T0 + 60 * minute)
    return history


def hourly_ramp(minute: int) -> float:
    return 10.0 + (minute % 60)


def test_a_rising_season_raises_the_observations_and_the_replicas() -> None:
    rule = forecast_rule()
    history = run_seasons(rule, 60 + 31, hourly_ramp)  # minute 30 of the second hour
    chosen, seen = forecasted(rule, HOURLY, history, 4, [MetricObservation("rate", 40.0)])
    assert chosen[0].value == pytest.approx(40.0 * 50.0 / 38.0)
    assert seen.replicas == 6 and seen.note is None  # ceil(52.6 / 10) replicas for the load a lead ahead
    assert dict(seen.rises)["rate"] == pytest.approx(50.0 / 38.0)


def test_a_falling_season_never_lowers_and_observe_mode_only_tells() -> None:
    rule = forecast_rule()
    falling = run_seasons(rule, 60 + 31, lambda m: 70.0 - (m % 60))
    chosen, seen = forecasted(rule, HOURLY, falling, 4, [MetricObservation("rate", 40.0)])
    assert chosen[0].value == 40.0 and seen.replicas == 4
    observing = dataclasses.replace(HOURLY, mode="observe")
    rising = run_seasons(rule, 60 + 31, hourly_ramp)
    chosen, seen = forecasted(forecast_rule(observing), observing, rising, 4,
                              [MetricObservation("rate", 40.0)])
    assert chosen[0].value == 40.0 and seen.replicas == 6


def test_before_a_complete_season_the_rule_runs_reactively_and_says_so() -> None:
    rule = forecast_rule()
    history = run_seasons(rule, 30, hourly_ramp)
    chosen, seen = forecasted(rule, HOURLY, history, 4, [MetricObservation("rate", 40.0)])
    assert chosen[0].value == 40.0 and seen.replicas is None
    assert seen.note is not None and "no complete earlier season yet (3600s)" in seen.note


def test_the_loads_kept_are_the_lookback_seasons_and_a_window() -> None:
    rule = forecast_rule()
    history = run_seasons(rule, 500, hourly_ramp)
    assert len(history.forecast[0].loads) == 2 * 60 + WINDOW_MINUTES


def test_a_rise_from_nearly_nothing_is_capped_and_the_short_window_is_raised_too() -> None:
    """A season from 1e-300 to 1e300 (a hostile answer, or a service waking from nothing) raises a value by
    at most MAX_RISE: never into an overflow the engine would read as a failed metric."""
    assert seasonal_rise([1e-300] * 30 + [1e300] * 30 + [1e-300] * 31, 60, 10, 1) == MAX_RISE
    rule = forecast_rule()
    history = run_seasons(rule, 60 + 31, lambda m: 1e-300 if m % 60 < 33 else 1e300)
    chosen, _ = forecasted(rule, HOURLY, history, 4, [MetricObservation("rate", 40.0, panic_value=50.0)])
    assert chosen[0].value == pytest.approx(40.0 * MAX_RISE)
    assert chosen[0].panic_value == pytest.approx(50.0 * MAX_RISE)
