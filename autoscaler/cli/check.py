"""`gpu-autoscaler check`: validate a rules file and, given a Prometheus, run every query once.

Every problem is printed as `file:line: field: message` (exit 2 if any, 0 if none), so a CI job or a
pre-commit hook can gate a rules change before the controller ever loads it. A query must return exactly one
finite number, as the controller requires; it is sent and judged by the controller's own runner and session
(`plumbing.prometheus`: `runner`, `session`, `answer`), so `check` sees what `run` will see. A server that
cannot be reached at all (refused, TLS, proxy) is one line on stderr, not a problem per query.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass
from typing import cast

from autoscaler.cli.args import add_prometheus_arguments, add_rules_argument, prometheus_config, rules_file
from autoscaler.config.query_syntax import syntax_problems
from autoscaler.config.rules import RuleSet, load_rules
from autoscaler.controller.observe import observe
from autoscaler.controller.sources import EndpointSources, QueryKey
from autoscaler.errors import Problem, RulesError, UsageError
from autoscaler.policy import MetricSpec, Rule
from plumbing.cli import duration
from plumbing.output import JSON, TABLE, WIDE, add_output_arguments, document
from plumbing.prometheus.config import PrometheusConfig, PrometheusConfigError
from plumbing.prometheus.runner import (
    PromQLSettings,
    QueryErrorReason,
    QueryResult,
    SeriesSource,
    close_all,
    runners,
)
from plumbing.prometheus.series import SeriesValues

HELP = "validate a rules file; with --prometheus (or $PROMETHEUS_URL) also run every query once"


# A query the runner gave no result for (never expected): failed, and never read as an empty result.
_NOT_RUN = QueryResult(None, cast(QueryErrorReason, "NoResult"), "not run")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_rules_argument(parser)
    add_prometheus_arguments(parser, fallback=None)
    parser.add_argument("--timeout", type=duration(0.0, 3600.0, above=True), default=10.0, metavar="DURATION",
                        help="timeout of each query, e.g. 10s, 500ms, 1m (default 10s)")
    add_output_arguments(parser, (TABLE, WIDE, JSON), headers=False,
                         what=": table and wide are the lines below, json one document (docs/rules.md)")


@dataclass(frozen=True)
class Answered:
    """A query that answered as the controller needs it: one `ok` line of the report."""

    file: str
    line: int
    field: str
    message: str

    def __str__(self) -> str:
        return f"{self.file}:{self.line}: {self.field}: ok: {self.message}"


@dataclass
class CheckReport:
    """What `check` found: the queries that answered, then the problems (none: the file is OK)."""

    file: str
    problems: list[Problem] = dataclasses.field(default_factory=list)
    answered: list[Answered] = dataclasses.field(default_factory=list)
    rules: int | None = None
    """Rules and metrics of the file; None when it could not be loaded."""
    metrics: int | None = None
    endpoints: tuple[str, ...] = ()
    """The Prometheus URLs every query was sent to (none: checked offline)."""


def run(args: argparse.Namespace) -> int:
    args.rules, _ = rules_file(args, "check")
    try:
        ruleset = load_rules(args.rules)
    except RulesError as exc:
        return show(CheckReport(args.rules, list(exc.problems)), args.output)
    try:
        config = prometheus_config(args)
    except PrometheusConfigError as exc:  # one message on stderr (and JSON on stdout under -o json): main
        raise UsageError(f"invalid Prometheus connections:\n{exc}") from exc
    report = CheckReport(ruleset.path, rules=len(ruleset.rules),
                         metrics=sum(len(rule.metrics) for rule in ruleset.rules))
    report.problems = syntax_problems(ruleset)  # offline, first: a typo never reaches a server
    if config is not None:
        report.problems += unknown_endpoints(ruleset, config)
    if config is not None and not report.problems:
        results = run_all(ruleset, config, args.timeout)
        unreachable = sorted({r.error or "" for r in results.values()
                              if r.error_reason == QueryErrorReason.UNREACHABLE})
        if unreachable:
            raise UsageError("\n".join(unreachable))
        report.problems = check_queries(ruleset, results, report.answered.append)
        report.problems += check_pod_costs(ruleset, config, args.timeout, report.answered.append)
        report.endpoints = tuple(e.display_url for e in config.endpoints.values())
    return show(report, args.output)


def show(report: CheckReport, output: str) -> int:
    """Print the report in the `-o` format; the exit status: 2 with a problem, else 0."""
    out = sys.stdout
    if output == JSON:
        print(json.dumps(document(
            file=report.file, ok=not report.problems, rules=report.rules, metrics=report.metrics,
            endpoints=list(report.endpoints), answered=[asdict(a) for a in report.answered],
            problems=[asdict(p) for p in report.problems]), indent=2), file=out)
    else:
        for line in [*report.answered, *report.problems]:
            print(line, file=out)
        if report.problems:
            print(f"{report.file}: {len(report.problems)} problem(s)", file=out)
        else:
            checked = (", every query returned one value from " + ", ".join(report.endpoints)
                       if report.endpoints else "")
            print(f"{report.file}: OK: {report.rules} rule(s), {report.metrics} metric(s){checked}", file=out)
    return 2 if report.problems else 0


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
        results = routed.run(ruleset.rules)
        latencies: dict[str, set[str]] = {}
        for rule in ruleset.rules:  # the slo latency queries: asked here only, `run` reads their history
            if rule.slo is not None and rule.prometheus in sources:
                latencies.setdefault(rule.prometheus, set()).add(rule.slo.latency)
        for name, queries in latencies.items():
            results.update(((name, q), r) for q, r in sources[name].run_queries(queries).items())
        return results
    finally:
        routed.close()
        close_all(sources)


def check_pod_costs(ruleset: RuleSet, config: PrometheusConfig, timeout: float,
                    report: Callable[[Answered], None]) -> list[Problem]:
    """Each `podDeletionCost` query, run once series by series as the controller runs it before a
    scale-down: a failure, or series none of which has the pod label, is a Problem."""
    wanted = [(index, rule) for index, rule in enumerate(ruleset.rules) if rule.pod_deletion_cost is not None]
    if not wanted:
        return []
    settings = PromQLSettings("", query_timeout=timeout, budget=2 * timeout + 1, max_attempts=2)
    sources = runners(config, settings)
    try:
        return [problem for index, rule in wanted
                for problem in _check_pod_cost(ruleset.path, index, rule, sources[rule.prometheus], report)]
    finally:
        close_all(sources)


def _check_pod_cost(path: str, index: int, rule: Rule, source: SeriesSource,
                    report: Callable[[Answered], None]) -> list[Problem]:
    cost = rule.pod_deletion_cost
    assert cost is not None
    field = f"rules[{index}].podDeletionCost.query"
    seen: SeriesValues = source.run_series(cost.query, cost.pod_label)
    if seen.error is not None:
        return [Problem(path, cost.line, field, seen.error)]
    if not seen.values and seen.skipped:
        return [Problem(path, cost.line, field, f"none of its {seen.skipped} series has a finite value and a "
                        f"label {cost.pod_label!r} naming a pod (podLabel)")]
    busiest = f", busiest {max(seen.values.items(), key=lambda kv: kv[1])[0]}" if seen.values else ""
    report(Answered(path, cost.line, field,
                    f"{rule.name}/podDeletionCost = {len(seen.values)} pod(s) by {cost.pod_label}{busiest}"))
    return []


def check_queries(ruleset: RuleSet, results: Mapping[QueryKey, QueryResult],
                  report: Callable[[Answered], None]) -> list[Problem]:
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
                report(Answered(ruleset.path, metric.line, field,
                                _ok_message(rule, metric, seen.value) + empty))
            if metric.panic_query:
                problems += _check_panic(ruleset.path, f"rules[{index}]", rule, metric, results, report)
        if rule.capacity is not None:
            problems += _check_capacity(ruleset.path, index, rule, results, report)
        if rule.slo is not None:
            problems += _check_slo(ruleset.path, index, rule, results, report)
    return problems


def _check_slo(path: str, index: int, rule: Rule, results: Mapping[QueryKey, QueryResult],
               report: Callable[[Answered], None]) -> list[Problem]:
    """The latency query must answer with one series; NaN (no requests in its window) is fine: the learning
    leaves such minutes out."""
    slo = rule.slo
    assert slo is not None
    result = results.get((rule.prometheus, slo.latency)) or _NOT_RUN
    field = f"rules[{index}].slo.latency"
    if result.value is None and result.error_reason != QueryErrorReason.NAN:
        return [Problem(path, slo.line, field, result.error or "failed")]
    seen = "NaN (no requests in its window)" if result.value is None else f"{result.value:g}s"
    objective = f"objective {slo.objective_seconds:g}s, learns {slo.learn}"
    report(Answered(path, slo.line, field, f"{rule.name}/latency = {seen} ({objective})"))
    return []


def _check_panic(path: str, where: str, rule: Rule, metric: MetricSpec,
                 results: Mapping[QueryKey, QueryResult],
                 report: Callable[[Answered], None]) -> list[Problem]:
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
    report(Answered(path, metric.line, field, f"{rule.name}/{metric.name} over {window}s = {seen.value:g}"))
    return []


def _check_capacity(path: str, index: int, rule: Rule, results: Mapping[QueryKey, QueryResult],
                    report: Callable[[Answered], None]) -> list[Problem]:
    capacity = rule.capacity
    assert capacity is not None
    result = results.get((rule.prometheus, capacity.query)) or _NOT_RUN
    field = f"rules[{index}].capacity.query"
    if result.value is None:
        return [Problem(path, capacity.line, field, result.error or "failed")]
    report(Answered(path, capacity.line, field, f"{rule.name}/capacity = {result.value:g} free GPU(s), "
                    f"{capacity.gpus_per_replica} per replica"))
    return []


def _ok_message(rule: Rule, metric: MetricSpec, value: float) -> str:
    return f"{rule.name}/{metric.name} = {value:g} (target {metric.target:g}, {metric.type})"
