"""`gpu-autoscaler check`: validate a rules file and, given a Prometheus, run every query once.

Every problem is printed as `file:line: field: message` (exit 2 if any, 0 if none), so a CI job or a
pre-commit hook can gate a rules change before the controller ever loads it. A query must return exactly one
finite number, as the controller requires; it is sent and judged by the controller's own runner and session
(`plumbing.prometheus`: `runner`, `session`, `answer`), so `check` sees what `run` will see. A server that
cannot be reached at all (refused, TLS, proxy) is one line on stderr, not a problem per query.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Mapping
from typing import cast

from autoscaler.cli.args import add_prometheus_arguments, add_rules_argument, prometheus_config, rules_file
from autoscaler.config.query_syntax import syntax_problems
from autoscaler.config.rules import RuleSet, load_rules
from autoscaler.controller.observe import observe
from autoscaler.controller.sources import EndpointSources, QueryKey
from autoscaler.errors import Problem, RulesError
from autoscaler.policy import MetricSpec, Rule
from plumbing.cli import duration, fail
from plumbing.prometheus.config import PrometheusConfig, PrometheusConfigError
from plumbing.prometheus.runner import PromQLSettings, QueryErrorReason, QueryResult, close_all, runners

HELP = "validate a rules file; with --prometheus (or $PROMETHEUS_URL) also run every query once"


# A query the runner gave no result for (never expected): failed, and never read as an empty result.
_NOT_RUN = QueryResult(None, cast(QueryErrorReason, "NoResult"), "not run")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_rules_argument(parser)
    add_prometheus_arguments(parser, fallback=None)
    parser.add_argument("--timeout", type=duration(0.0, 3600.0, above=True), default=10.0, metavar="DURATION",
                        help="timeout of each query, e.g. 10s, 500ms, 1m (default 10s)")


def run(args: argparse.Namespace) -> int:
    out = sys.stdout
    args.rules, _ = rules_file(args, "check")
    try:
        ruleset = load_rules(args.rules)
    except RulesError as exc:
        for problem in exc.problems:
            print(problem, file=out)
        print(f"{args.rules}: {len(exc.problems)} problem(s)", file=out)
        return 2
    try:
        config = prometheus_config(args)
    except PrometheusConfigError as exc:
        return fail(None, f"invalid Prometheus connections:\n{exc}")
    metrics = sum(len(rule.metrics) for rule in ruleset.rules)
    problems: list[Problem] = syntax_problems(ruleset)  # offline, first: a typo never reaches a server
    if config is not None:
        problems += unknown_endpoints(ruleset, config)
    if config is not None and not problems:
        results = run_all(ruleset, config, args.timeout)
        unreachable = sorted({r.error or "" for r in results.values()
                              if r.error_reason == QueryErrorReason.UNREACHABLE})
        if unreachable:
            return fail(None, "\n".join(unreachable))
        problems = check_queries(ruleset, results, lambda line: print(line, file=out))
    for problem in problems:
        print(problem, file=out)
    if problems:
        print(f"{ruleset.path}: {len(problems)} problem(s)", file=out)
        return 2
    checked = ""
    if config is not None:
        checked = ", every query returned one value from " + ", ".join(
            e.display_url for e in config.endpoints.values())
    print(f"{ruleset.path}: OK: {len(ruleset.rules)} rule(s), {metrics} metric(s){checked}", file=out)
    return 0


def unknown_endpoints(ruleset: RuleSet, config: PrometheusConfig) -> list[Problem]:
    """A Problem for each rule naming an endpoint the connections file does not define."""
    names = ", ".join(sorted(config.endpoints))
    return [Problem(ruleset.path, rule.line, f"rules[{index}].prometheus",
                    f"no endpoint {rule.prometheus!r} in {config.path} (endpoints: {names})")
            for index, rule in enumerate(ruleset.rules) if rule.prometheus not in config.endpoints]


def run_all(ruleset: RuleSet, config: PrometheusConfig, timeout: float) -> dict[QueryKey, QueryResult]:
    """Every distinct query once per endpoint, through the controller's runners."""
    settings = PromQLSettings("", query_timeout=timeout, budget=2 * timeout + 1, max_attempts=2)
    sources = runners(config, settings)
    routed = EndpointSources(dict(sources))
    try:
        return routed.run(ruleset.rules)
    finally:
        routed.close()
        close_all(sources)


def check_queries(ruleset: RuleSet, results: Mapping[QueryKey, QueryResult],
                  report: Callable[[str], None]) -> list[Problem]:
    """A Problem for each metric whose query cannot drive autoscaling; `report` gets the good ones."""
    problems: list[Problem] = []
    for index, rule in enumerate(ruleset.rules):
        for m_index, metric in enumerate(rule.metrics):
            result = results.get((rule.prometheus, metric.query)) or _NOT_RUN
            field = f"rules[{index}].metrics[{m_index}].query"
            seen = observe(metric, result).observation
            if seen.value is None:
                problems.append(Problem(ruleset.path, metric.line, field, result.error or "failed"))
            else:
                empty = " (empty result, read as 0: whenEmpty zero)" if result.value is None else ""
                report(_ok_line(ruleset.path, rule, metric, field, seen.value) + empty)
            if metric.panic_query:
                problems += _check_panic(ruleset.path, f"rules[{index}]", rule, metric, results, report)
        if rule.capacity is not None:
            problems += _check_capacity(ruleset.path, index, rule, results, report)
    return problems


def _check_panic(path: str, where: str, rule: Rule, metric: MetricSpec,
                 results: Mapping[QueryKey, QueryResult], report: Callable[[str], None]) -> list[Problem]:
    """The metric over the panic window must answer too, or panic would only ever read the long window."""
    result = results.get((rule.prometheus, metric.panic_query)) or _NOT_RUN
    seen = observe(metric, result).observation
    window = rule.behavior.panic.window_seconds if rule.behavior.panic is not None else 0
    field = f"{where}.behavior.panic.windowSeconds"
    if seen.value is None:
        return [Problem(path, metric.line, field,
                        f"metric {metric.name} over {window}s ({metric.panic_query}) failed: "
                        f"{result.error or 'failed'}; a rate needs two samples in its window: make "
                        "windowSeconds at least twice the scrape interval")]
    report(f"{path}:{metric.line}: {field}: ok: {rule.name}/{metric.name} over {window}s = {seen.value:g}")
    return []


def _check_capacity(path: str, index: int, rule: Rule, results: Mapping[QueryKey, QueryResult],
                    report: Callable[[str], None]) -> list[Problem]:
    capacity = rule.capacity
    assert capacity is not None
    result = results.get((rule.prometheus, capacity.query)) or _NOT_RUN
    field = f"rules[{index}].capacity.query"
    if result.value is None:
        return [Problem(path, capacity.line, field, result.error or "failed")]
    report(f"{path}:{capacity.line}: {field}: ok: {rule.name}/capacity = {result.value:g} free GPU(s), "
           f"{capacity.gpus_per_replica} per replica")
    return []


def _ok_line(path: str, rule: Rule, metric: MetricSpec, field: str, value: float) -> str:
    return (f"{path}:{metric.line}: {field}: ok: {rule.name}/{metric.name} = {value:g} "
            f"(target {metric.target:g}, {metric.type})")
