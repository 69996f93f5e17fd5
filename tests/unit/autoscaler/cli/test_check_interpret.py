"""How `check` turns query results into problems (answers themselves are judged by `answer`, tested with
the runner in tests/unit/plumbing/prometheus/test_runner_http.py)."""

from __future__ import annotations

from autoscaler.cli.check import Answered, check_queries, unknown_endpoints
from autoscaler.config.rules import parse_rules
from plumbing.prometheus.config import PrometheusConfig, endpoint_from_url
from plumbing.prometheus.runner import QueryResult

TEXT = """\
rules:
  - name: a
    target: {kind: Deployment, namespace: ml, name: a}
    maxReplicas: 3
    metrics:
      - {name: u, query: shared, type: Average, target: 1}
      - {name: v, query: broken, type: Total, target: 2}
  - name: b
    prometheus: mimir
    target: {kind: Deployment, namespace: ml, name: b}
    maxReplicas: 3
    metrics:
      - {name: u, query: shared, type: Average, target: 1}
"""


def test_problems_keep_their_lines_and_results_follow_the_rules_endpoint() -> None:
    results = {
        ("default", "shared"): QueryResult(0.5),
        ("default", "broken"): QueryResult(None, "NoSeries", "query returned no series"),
        ("mimir", "shared"): QueryResult(7.0),
    }
    reported: list[Answered] = []
    problems = check_queries(parse_rules(TEXT, "r.yaml"), results, reported.append)
    assert [str(p) for p in problems] == ["r.yaml:7: rules[0].metrics[1].query: query returned no series"]
    assert [str(a) for a in reported] == [
        "r.yaml:6: rules[0].metrics[0].query: ok: a/u = 0.5 (target 1, Average)",
        "r.yaml:13: rules[1].metrics[0].query: ok: b/u = 7 (target 1, Average)",
    ]


def test_a_rule_naming_an_unknown_endpoint_is_a_problem_at_its_line() -> None:
    config = PrometheusConfig("prom.yaml", {"default": endpoint_from_url("http://prometheus:9090")})
    problems = unknown_endpoints(parse_rules(TEXT, "r.yaml"), config)
    assert [str(p) for p in problems] == [
        "r.yaml:8: rules[1].prometheus: no endpoint 'mimir' in prom.yaml (endpoints: default)"
    ]
