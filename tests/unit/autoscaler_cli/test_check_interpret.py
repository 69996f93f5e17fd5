"""How `check` reads a Prometheus query answer (the shapes the real server cannot easily be made to send)."""

from __future__ import annotations

import pytest

from autoscaler.check import interpret

CASES = [
    ("scalar", {"resultType": "scalar", "result": [1.0, "2.5"]}, 2.5, None),
    ("one-series", {"resultType": "vector", "result": [{"metric": {}, "value": [1.0, "7"]}]}, 7.0, None),
    ("plus-inf", {"resultType": "vector", "result": [{"metric": {}, "value": [1.0, "+Inf"]}]}, None,
     "returned +Inf; the autoscaler treats NaN and Inf as a failed metric"),
    ("string", {"resultType": "string", "result": [1.0, "x"]}, None,
     "returned a string result; the autoscaler needs a number"),
    ("not-a-number", {"resultType": "vector", "result": [{"metric": {}, "value": [1.0, "abc"]}]}, None,
     "returned a sample that is not a number: [1.0, 'abc']"),
    ("no-data", None, None, "malformed answer from Prometheus (no data)"),
    ("three-series", {"resultType": "vector", "result": [{"metric": {"a": str(i)}, "value": [1, "1"]}
                                                         for i in range(3)]}, None,
     'returned 3 series ({a="0"}, {a="1"}, ...); the autoscaler needs exactly one series: wrap it in sum() '
     "or avg()"),
]


@pytest.mark.parametrize(("id_", "data", "value", "error"), CASES, ids=[c[0] for c in CASES])
def test_interpret(id_: str, data: object, value: float | None, error: str | None) -> None:
    result = interpret(data)
    assert (result.value, result.error) == (value, error)


def test_each_distinct_query_runs_once_and_problems_keep_their_lines() -> None:
    from autoscaler.check import QueryCheck, check_queries
    from autoscaler.rules import parse_rules

    text = """\
rules:
  - name: a
    target: {kind: Deployment, namespace: ml, name: a}
    maxReplicas: 3
    metrics:
      - {name: u, query: shared, type: Average, target: 1}
      - {name: v, query: broken, type: Total, target: 2}
  - name: b
    target: {kind: Deployment, namespace: ml, name: b}
    maxReplicas: 3
    metrics:
      - {name: u, query: shared, type: Average, target: 1}
"""
    calls: list[str] = []

    def runner(query: str) -> QueryCheck:
        calls.append(query)
        return QueryCheck(None, "returned no series") if query == "broken" else QueryCheck(0.5, None)

    reported: list[str] = []
    problems = check_queries(parse_rules(text, "r.yaml"), runner, reported.append)
    assert calls == ["shared", "broken"]
    assert [str(p) for p in problems] == ["r.yaml:7: rules[0].metrics[1].query: returned no series"]
    assert reported == [
        "r.yaml:6: rules[0].metrics[0].query: ok: a/u = 0.5 (target 1, Average)",
        "r.yaml:12: rules[1].metrics[0].query: ok: b/u = 0.5 (target 1, Average)",
    ]
