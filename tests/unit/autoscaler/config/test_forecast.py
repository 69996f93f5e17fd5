"""`forecast` in a rules file: defaults (the lead from the overload budget's start-up time), bounds, the
memory cap on the lookback, each mistake as `file:line: field: problem`."""

from __future__ import annotations

import pytest

from autoscaler.errors import RulesError
from autoscaler.policy.spec import Forecast
from tests.rules import rule, ruleset


def test_defaults_and_the_lead_from_the_budget() -> None:
    [plain] = ruleset(rule(extra="forecast: {}")).rules
    assert plain.forecast == Forecast(86_400, 120, 1, "scaleUp")
    budget = "overloadBudget: {percentOfMinutes: 5, startupSeconds: 300}\nforecast: {mode: observe}"
    [budgeted] = ruleset(rule(extra=budget)).rules
    assert budgeted.forecast == Forecast(86_400, 300, 1, "observe")
    given = "forecast: {seasonSeconds: 604800, leadSeconds: 600, lookbackSeasons: 1}"
    assert ruleset(rule(extra=given)).rules[0].forecast == Forecast(604_800, 600, 1, "scaleUp")


@pytest.mark.parametrize(("forecast", "field", "words"), [
    ("{seasonSeconds: 60}", "seasonSeconds", "[3600, 604800]"),
    ("{leadSeconds: 10}", "leadSeconds", "[60, 3600]"),
    ("{lookbackSeasons: 8}", "lookbackSeasons", "[1, 7]"),
    ("{lookbackSeasons: 2, seasonSeconds: 604800}", "lookbackSeasons", "at most 604800s, a week"),
    ("{seasonSeconds: 3600, leadSeconds: 1860}", "leadSeconds", "at most half of seasonSeconds"),
    ("{mode: predict}", "mode", "scaleUp"),
    ("{season: 86400}", "season", "unknown field"),
])
def test_each_mistake_is_one_problem_with_its_line_and_field(forecast: str, field: str, words: str) -> None:
    with pytest.raises(RulesError) as raised:
        ruleset(rule(extra=f"forecast: {forecast}"))
    [problem] = raised.value.problems
    assert (problem.line, problem.field) == (8, f"rules[0].forecast.{field}")
    assert words in problem.message
