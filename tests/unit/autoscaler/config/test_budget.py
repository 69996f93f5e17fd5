"""`overloadBudget` in a rules file: both fields required, their bounds as `file:line: field: problem`."""

from __future__ import annotations

import pytest

from autoscaler.errors import RulesError
from autoscaler.policy.spec import OverloadBudget
from tests.rules import rule, ruleset


def test_the_budget_is_read() -> None:
    [parsed] = ruleset(rule(extra="overloadBudget: {percentOfMinutes: 2.5, startupSeconds: 120}")).rules
    assert parsed.overload_budget == OverloadBudget(2.5, 120)
    [plain] = ruleset(rule()).rules
    assert plain.overload_budget is None


@pytest.mark.parametrize(("budget", "field", "words"), [
    ("{percentOfMinutes: 0, startupSeconds: 120}", "percentOfMinutes", "> 0"),
    ("{percentOfMinutes: 51, startupSeconds: 120}", "percentOfMinutes", "<= 50"),
    ("{percentOfMinutes: 2, startupSeconds: 3601}", "startupSeconds", "[0, 3600]"),
    ("{percentOfMinutes: 2, startupSeconds: 2m}", "startupSeconds", "integer"),
    ("{percentOfMinutes: 2}", "startupSeconds", "required"),
    ("{percentOfMinutes: 2, startupSeconds: 60, lookback: 1d}", "lookback", "unknown field"),
])
def test_each_mistake_is_one_problem_with_its_line_and_field(budget: str, field: str, words: str) -> None:
    with pytest.raises(RulesError) as raised:
        ruleset(rule(extra=f"overloadBudget: {budget}"))
    [problem] = raised.value.problems
    assert (problem.line, problem.field) == (8, f"rules[0].overloadBudget.{field}")
    assert words in problem.message
