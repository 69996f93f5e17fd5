"""The offline PromQL syntax check: good queries pass, bad ones are `file:line: metric NAME: ...`, and a query
shaped to crash the native parser (deep nesting, long operator chains) is refused before it reaches it."""

from __future__ import annotations

from pathlib import Path

import pytest

from autoscaler.config.query_syntax import syntax_problems
from autoscaler.config.rules import parse_rules
from plumbing.prometheus.syntax import (
    MAX_QUERY_CHARS,
    MAX_QUERY_NESTING,
    MAX_QUERY_OPERATORS,
    Shape,
    shape,
    syntax_error,
)
from tests.measure import Run

GOOD = [
    'sum(rate(http_requests_total{job="api"}[5m]))',
    'histogram_quantile(0.9, sum by (le) (rate(latency_seconds_bucket[5m])))',
    'avg(gpu_utilization_ratio{pod=~"embed-.*"}) or vector(0)',
    "sum(inference_queue_depth) / count(up == 1)",
    'avg_over_time(x[10m:1m] offset 5m)',
    "1",
    'sum(x{a="((((", b=\'[[\'})',  # brackets inside strings do not nest
]
BAD = [
    ("sum(rate(x[5m])", "unclosed left parenthesis"),
    ("rate(x)", "expected type matrix in call to function 'rate', got vector"),
    ("foo{", "unexpected end of input inside braces"),
    ("sum(x) +", "PromQL syntax error"),
    ("no_such_function(x)", "PromQL syntax error"),
]


@pytest.mark.parametrize("query", GOOD)
def test_valid_queries_parse(query: str) -> None:
    assert syntax_error(query) is None


@pytest.mark.parametrize(("query", "reason"), BAD, ids=[b[0] for b in BAD])
def test_syntax_errors_are_explained(query: str, reason: str) -> None:
    error = syntax_error(query)
    assert error is not None and error.startswith("PromQL syntax error: ") and reason in error


@pytest.mark.parametrize(("query", "expected"), [
    ('x{a="(", b="+"}', Shape(1, 0)),
    ("sum(rate(x[5m])) / sum(y)", Shape(3, 1)),
    ("a and b or c unless d", Shape(0, 3)),
    ("x >= 1 != 2", Shape(0, 2)),
])
def test_shape_skips_string_literals(query: str, expected: Shape) -> None:
    assert shape(query) == expected


@pytest.mark.parametrize(("query", "reason"), [
    ("(" * 4000 + "1" + ")" * 4000, f"nests brackets 4000 deep (at most {MAX_QUERY_NESTING})"),
    ("-" * 8000 + "1", f"has 8000 operators (at most {MAX_QUERY_OPERATORS})"),
    ("+".join(["x"] * 4000), f"has 3999 operators (at most {MAX_QUERY_OPERATORS})"),
    ("x" * (MAX_QUERY_CHARS + 1), f"(at most {MAX_QUERY_CHARS:,}); not parsed"),
], ids=["4000-brackets", "8000-unary", "4000-chain", "too-long"])
def test_queries_that_would_crash_the_native_parser_are_refused_first(query: str, reason: str) -> None:
    """Each of these segfaults or takes seconds in promql-parser; refused here, this process survives."""
    error = syntax_error(query)
    assert error is not None and reason in error


def test_problems_name_file_line_and_metric_once_per_query() -> None:
    ruleset = parse_rules("""\
rules:
  - name: a
    target: {kind: Deployment, namespace: ml, name: a}
    maxReplicas: 3
    metrics:
      - {name: good, query: 'sum(up)', type: Total, target: 1}
      - {name: broken, query: 'sum(up', type: Total, target: 1}
  - name: b
    target: {kind: Deployment, namespace: ml, name: b}
    maxReplicas: 3
    metrics:
      - {name: same, query: 'sum(up', type: Total, target: 1}
""", "r.yaml")
    assert [str(p) for p in syntax_problems(ruleset)] == [
        "r.yaml:7: metric broken: PromQL syntax error: unclosed left parenthesis",
        "r.yaml:12: metric same: PromQL syntax error: unclosed left parenthesis",
    ]


def test_check_reports_syntax_errors_without_prometheus(cli: Run, tmp_path: Path) -> None:
    (tmp_path / "bad.yaml").write_text("""\
rules:
  - name: a
    target: {kind: Deployment, namespace: ml, name: a}
    maxReplicas: 3
    metrics:
      - {name: util, query: 'avg(rate(gpu_utilization_ratio[1m])', type: Average, target: 0.8}
      - {name: queue, query: 'rate(queue_depth)', type: Total, target: 10}
""")
    result = cli("check", "bad.yaml")
    assert result.returncode == 2
    assert result.stdout.splitlines() == [
        "bad.yaml:6: metric util: PromQL syntax error: unclosed left parenthesis",
        "bad.yaml:7: metric queue: PromQL syntax error: expected type matrix in call to function 'rate', "
        "got vector",
        "bad.yaml: 2 problem(s)",
    ]
    assert result.stderr == ""


def test_check_with_an_unreachable_prometheus_stops_at_syntax_errors(cli: Run, tmp_path: Path) -> None:
    """A file with a syntax error never contacts the server: port 9 (discard) would fail the run otherwise."""
    (tmp_path / "bad.yaml").write_text("""\
rules:
  - name: a
    target: {kind: Deployment, namespace: ml, name: a}
    maxReplicas: 3
    metrics: [{name: util, query: 'sum(x', type: Average, target: 0.8}]
""")
    result = cli("check", "bad.yaml", "--prometheus", "http://127.0.0.1:9", "--timeout", "1")
    assert result.returncode == 2
    assert result.stdout.splitlines() == [
        "bad.yaml:5: metric util: PromQL syntax error: unclosed left parenthesis", "bad.yaml: 1 problem(s)"]
    assert "127.0.0.1:9" not in result.stdout + result.stderr
