"""Every query of a rules file parsed offline (plumbing.prometheus.syntax), before any server is contacted:
`gpu-autoscaler check` runs it first, so a typo is reported as `file:line: metric NAME: ...` in CI."""

from __future__ import annotations

from autoscaler.config.rules import RuleSet
from autoscaler.errors import Problem
from plumbing.prometheus.syntax import syntax_error


def syntax_problems(ruleset: RuleSet) -> list[Problem]:
    """One Problem per metric, panic-window, capacity, slo latency or podDeletionCost query that does not
    parse (`file:line: metric NAME: ...`); each query once."""
    results: dict[str, str | None] = {}
    problems: list[Problem] = []
    for rule in ruleset.rules:
        queries = [(metric.line, f"metric {metric.name}", metric.query) for metric in rule.metrics]
        queries += [(metric.line, f"metric {metric.name} over the panic window", metric.panic_query)
                    for metric in rule.metrics if metric.panic_query]
        if rule.capacity is not None:
            queries.append((rule.capacity.line, "capacity.query", rule.capacity.query))
        if rule.slo is not None:
            queries.append((rule.slo.line, "slo.latency", rule.slo.latency))
        if rule.pod_deletion_cost is not None:
            cost = rule.pod_deletion_cost
            queries.append((cost.line, "podDeletionCost.query", cost.query))
        for line, field, query in queries:
            if query not in results:
                results[query] = syntax_error(query)
            error = results[query]
            if error is not None:
                problems.append(Problem(ruleset.path, line, field, error))
    return problems
