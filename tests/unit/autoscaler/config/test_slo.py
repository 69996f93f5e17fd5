"""`slo` in a rules file: defaults (a week back, scale mode), bounds, `learn` naming one of the rule's
metrics, each mistake as `file:line: field: problem`."""

from __future__ import annotations

import pytest

from autoscaler.config.query_syntax import syntax_problems
from autoscaler.errors import RulesError
from autoscaler.policy.spec import Slo
from tests.rules import rule, ruleset

LATENCY = "histogram_quantile(0.9, sum by (le) (rate(ttft_bucket[2m])))"


def slo(**fields: str) -> str:
    given = {"latency": f"'{LATENCY}'", "objectiveSeconds": "0.5", "learn": "util",
             "bounds": "{min: 2, max: 40}", **fields}
    return "slo: {" + ", ".join(f"{k}: {v}" for k, v in given.items() if v != "") + "}"


def test_defaults_and_every_field() -> None:
    [plain] = ruleset(rule(extra=slo())).rules
    assert plain.slo == Slo(LATENCY, 0.5, "util", 7 * 86_400, 2.0, 40.0, "scale", line=8)
    [given] = ruleset(rule(extra=slo(lookback="36h", mode="observe"))).rules
    assert given.slo is not None
    assert (given.slo.lookback_seconds, given.slo.mode) == (36 * 3600, "observe")
    assert ruleset(rule()).rules[0].slo is None


@pytest.mark.parametrize(("fields", "field", "words"), [
    ({"latency": "''"}, "latency", "non-empty string"),
    ({"latency": ""}, "latency", "required field is missing"),
    ({"objectiveSeconds": "0"}, "objectiveSeconds", "> 0"),
    ({"objectiveSeconds": "fast"}, "objectiveSeconds", "finite number"),
    ({"objectiveSeconds": "7200"}, "objectiveSeconds", "<= 3600"),
    ({"learn": "queue"}, "learn", "one of the rule's metrics (util)"),
    ({"learn": ""}, "learn", "required field is missing"),
    ({"lookback": "7 days"}, "lookback", "such as 7d"),
    ({"lookback": "30m"}, "lookback", "from 1h to 14d"),
    ({"lookback": "15d"}, "lookback", "from 1h to 14d"),
    ({"bounds": "{min: 5, max: 2}"}, "bounds.max", "max >= min"),
    ({"bounds": "{min: 0, max: 2}"}, "bounds.min", "> 0"),
    ({"bounds": "{min: 1}"}, "bounds.max", "required field is missing"),
    ({"bounds": ""}, "bounds", "required field is missing"),
    ({"mode": "act"}, "mode", "scale"),
    ({"objective": "1"}, "objective", "unknown field"),
])
def test_each_mistake_is_one_problem_with_its_line_and_field(fields: dict[str, str], field: str,
                                                             words: str) -> None:
    with pytest.raises(RulesError) as raised:
        ruleset(rule(extra=slo(**fields)))
    [problem] = raised.value.problems
    assert (problem.line, problem.field) == (8, f"rules[0].slo.{field}")
    assert words in problem.message


def test_not_a_mapping() -> None:
    with pytest.raises(RulesError) as raised:
        ruleset(rule(extra="slo: 0.5"))
    [problem] = raised.value.problems
    assert problem.field == "rules[0].slo"


def test_a_latency_query_that_does_not_parse_is_named_by_check() -> None:
    bad = ruleset(rule(extra=slo(latency="'histogram_quantile(0.9, rate(x[2m])'")))
    [problem] = syntax_problems(bad)
    assert (problem.line, problem.field) == (8, "slo.latency")
    assert syntax_problems(ruleset(rule(extra=slo()))) == []
