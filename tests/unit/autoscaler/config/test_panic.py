"""`behavior.panic` in a rules file: its defaults, its bounds as `file:line: field: problem`, and each
metric's query over the panic window."""

from __future__ import annotations

import pytest

from autoscaler.errors import RulesError
from autoscaler.policy.spec import Panic
from tests.rules import rule, ruleset

METRICS = """
metrics:
  - {name: rate, query: 'sum(rate(requests_total[2m]))', type: Total, target: 5}
  - {name: waiting, query: 'max(vllm:num_requests_waiting)', type: Average, target: 8}"""


def test_defaults_and_the_panic_window_queries() -> None:
    [parsed] = ruleset(rule(metrics=METRICS, extra="behavior: {panic: {}}")).rules
    assert parsed.behavior.panic == Panic(30, 200.0)
    assert [m.panic_query for m in parsed.metrics] == ["sum(rate(requests_total[30s]))", ""]


def test_given_fields_are_kept() -> None:
    extra = "behavior: {panic: {windowSeconds: 45, thresholdPercent: 150.5}}"
    [parsed] = ruleset(rule(metrics=METRICS, extra=extra)).rules
    assert parsed.behavior.panic == Panic(45, 150.5)
    assert parsed.metrics[0].panic_query == "sum(rate(requests_total[45s]))"


def test_without_panic_no_query_is_added() -> None:
    [parsed] = ruleset(rule(metrics=METRICS)).rules
    assert parsed.behavior.panic is None and all(m.panic_query == "" for m in parsed.metrics)


@pytest.mark.parametrize(("panic", "field"), [
    ("{windowSeconds: 0}", "windowSeconds"),
    ("{windowSeconds: 601}", "windowSeconds"),
    ("{windowSeconds: 1.5}", "windowSeconds"),
    ("{thresholdPercent: 100}", "thresholdPercent"),  # at its target: always panicking
    ("{thresholdPercent: 1001}", "thresholdPercent"),
    ("{thresholdPercent: .nan}", "thresholdPercent"),
    ("{window: 30}", "window"),
    ("[30, 200]", ""),
])
def test_each_mistake_is_one_problem_with_its_line_and_field(panic: str, field: str) -> None:
    with pytest.raises(RulesError) as raised:
        ruleset(rule(metrics=METRICS, extra=f"behavior:\n  panic: {panic}"))
    [problem] = raised.value.problems
    assert problem.line == 10  # the line of `panic:` in the file
    assert problem.field == f"rules[0].behavior.panic{'.' + field if field else ''}"
