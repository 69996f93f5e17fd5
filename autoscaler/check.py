"""`gpu-autoscaler check`: validate a rules file and, with --prometheus, run every query once.

Every problem is printed as `file:line: field: message` (exit 2 if any, 0 if none), so a CI job or a
pre-commit hook can gate a rules change before the controller ever loads it. A query must return exactly one
finite number, as the controller requires.
"""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Callable
from dataclasses import dataclass

import requests

from autoscaler.errors import AutoscalerError, Problem, RulesError
from autoscaler.promql_syntax import syntax_problems
from autoscaler.rules import MetricSpec, Rule, RuleSet, load_rules

HELP = "validate a rules file; with --prometheus also run every query once"
AGGREGATE_HINT = "the autoscaler needs exactly one series: wrap it in sum() or avg()"


class PrometheusUnreachable(AutoscalerError):
    """No answer from the Prometheus server at all (not a problem of one query)."""


@dataclass(frozen=True, slots=True)
class QueryCheck:
    """The outcome of running one query: its value, or why it cannot drive autoscaling."""

    value: float | None
    error: str | None


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("rules", help="rules file (YAML)")
    parser.add_argument("--prometheus", metavar="URL",
                        help="Prometheus base URL (e.g. http://prometheus:9090): run each query once")
    parser.add_argument("--timeout", type=float, default=10.0, metavar="SECONDS",
                        help="timeout of each query (default 10)")


def run(args: argparse.Namespace) -> int:
    out = sys.stdout
    try:
        ruleset = load_rules(args.rules)
    except RulesError as exc:
        for problem in exc.problems:
            print(problem, file=out)
        print(f"{args.rules}: {len(exc.problems)} problem(s)", file=out)
        return 2
    metrics = sum(len(rule.metrics) for rule in ruleset.rules)
    problems: list[Problem] = syntax_problems(ruleset)  # offline, first: a typo never reaches a server
    if args.prometheus and not problems:
        with requests.Session() as session:
            def runner(query: str) -> QueryCheck:
                return run_query(session, args.prometheus, query, args.timeout)

            problems = check_queries(ruleset, runner, lambda line: print(line, file=out))
    for problem in problems:
        print(problem, file=out)
    if problems:
        print(f"{ruleset.path}: {len(problems)} problem(s)", file=out)
        return 2
    checked = f", every query returned one value from {args.prometheus}" if args.prometheus else ""
    print(f"{ruleset.path}: OK: {len(ruleset.rules)} rule(s), {metrics} metric(s){checked}", file=out)
    return 0


def check_queries(ruleset: RuleSet, runner: Callable[[str], QueryCheck],
                  report: Callable[[str], None]) -> list[Problem]:
    """Run each distinct query once; a Problem for each metric whose query cannot drive autoscaling."""
    results: dict[str, QueryCheck] = {}
    problems: list[Problem] = []
    for index, rule in enumerate(ruleset.rules):
        for m_index, metric in enumerate(rule.metrics):
            if metric.query not in results:
                results[metric.query] = runner(metric.query)
            result = results[metric.query]
            field = f"rules[{index}].metrics[{m_index}].query"
            if result.error is not None:
                problems.append(Problem(ruleset.path, metric.line, field, result.error))
            else:
                report(_ok_line(ruleset.path, rule, metric, field, result))
    return problems


def _ok_line(path: str, rule: Rule, metric: MetricSpec, field: str, result: QueryCheck) -> str:
    return (f"{path}:{metric.line}: {field}: ok: {rule.name}/{metric.name} = {result.value:g} "
            f"(target {metric.target:g}, {metric.type})")


def run_query(session: requests.Session, base_url: str, query: str, timeout: float) -> QueryCheck:
    """One instant query through the Prometheus HTTP API (/api/v1/query)."""
    url = base_url.rstrip("/") + "/api/v1/query"
    try:
        response = session.get(url, params={"query": query}, timeout=timeout)
    except requests.Timeout as exc:
        return QueryCheck(None, f"no answer from Prometheus within {timeout:g}s ({exc.__class__.__name__})")
    except requests.RequestException as exc:
        raise PrometheusUnreachable(f"cannot reach Prometheus at {base_url}: {exc}") from exc
    try:
        body = response.json()
    except ValueError:
        body = None
    if not isinstance(body, dict) or "status" not in body:
        raise PrometheusUnreachable(
            f"{base_url} does not look like Prometheus (HTTP {response.status_code} from {url}, "
            "not a Prometheus API answer)")
    if body.get("status") != "success":
        kind = body.get("errorType", "error")
        return QueryCheck(None, f"Prometheus rejected the query ({kind}): {body.get('error', 'no message')}")
    return interpret(body.get("data"))


def interpret(data: object) -> QueryCheck:
    """A query's `data` as the controller will see it: exactly one finite sample, or why not."""
    if not isinstance(data, dict):
        return QueryCheck(None, "malformed answer from Prometheus (no data)")
    kind, result = data.get("resultType"), data.get("result")
    sample: object
    if kind == "scalar" and isinstance(result, list):
        sample = result
    elif kind == "vector" and isinstance(result, list):
        if not result:
            return QueryCheck(None, "returned no series (does the selector match anything now?); "
                                    f"{AGGREGATE_HINT}, and add `or vector(0)` if no series means 0")
        if len(result) > 1:
            shown = ", ".join(_labels(entry) for entry in result[:2])
            more = ", ..." if len(result) > 2 else ""
            return QueryCheck(None, f"returned {len(result)} series ({shown}{more}); {AGGREGATE_HINT}")
        sample = result[0].get("value") if isinstance(result[0], dict) else None
    elif kind == "matrix":
        return QueryCheck(None, "returned a range vector; the autoscaler needs an instant value "
                                "(drop the [range] or wrap it in e.g. avg_over_time())")
    else:
        return QueryCheck(None, f"returned a {kind} result; the autoscaler needs a number")
    try:
        value = float(sample[1])  # type: ignore[index]  # any shape: errors caught below
    except (TypeError, ValueError, IndexError):
        return QueryCheck(None, f"returned a sample that is not a number: {sample!r}")
    if not math.isfinite(value):
        shown = "NaN" if math.isnan(value) else ("+Inf" if value > 0 else "-Inf")
        return QueryCheck(None, f"returned {shown}; the autoscaler treats NaN and Inf as a failed metric")
    return QueryCheck(value, None)


def _labels(entry: object) -> str:
    metric = entry.get("metric", {}) if isinstance(entry, dict) else {}
    if not isinstance(metric, dict):
        return "{}"
    return "{" + ", ".join(f'{k}="{v}"' for k, v in sorted(metric.items())) + "}"
