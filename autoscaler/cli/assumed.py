"""Trying `run --dry-run` without a cluster: assumed replica counts instead of the Kubernetes API.

`--assume-replicas N` (every rule) and `--assume-replicas RULE=N` (repeatable, wins for that rule) replace the
Kubernetes backend with `AssumedScaleBackend`, so a user can watch what the controller would decide from their
own Prometheus before installing anything. The counts stay fixed: with --dry-run nothing is ever patched, so
this is exactly what `run --dry-run` sees in a cluster where nobody scales the targets; playing the decisions
forward in time is `simulate`'s job. Each sync's decisions are printed to stdout, one line per rule.
"""

from __future__ import annotations

import argparse
import datetime as dt
import re
import sys
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal, TextIO

from autoscaler.config.rules import RuleSet
from autoscaler.controller.outcome import RuleOutcome, SyncReport
from autoscaler.errors import KubeApiError, NotFoundError, UsageError
from autoscaler.kube.backend import ScaleState
from autoscaler.planning.plan import describe_metrics
from autoscaler.policy import MAX_REPLICAS, TargetRef
from plumbing.cli import whole_number

_RULE_COUNT = re.compile(r"([A-Za-z0-9][A-Za-z0-9._-]{0,252})=([^=]*)")


@dataclass(frozen=True)
class AssumedReplicas:
    """The parsed --assume-replicas flags: a count for every rule and/or per rule name."""

    default: int | None = None
    per_rule: Mapping[str, int] = field(default_factory=dict)

    def count(self, rule_name: str) -> int | None:
        return self.per_rule.get(rule_name, self.default)

    def problems(self, rules: RuleSet) -> list[str]:
        """Rule names given that the rules file does not have, and rules left without a count."""
        names = [r.name for r in rules.rules]
        unknown = sorted(set(self.per_rule) - set(names))
        problems = [f"--assume-replicas {n}=...: no rule named {n!r} in {rules.path}" for n in unknown]
        missing = [n for n in names if self.count(n) is None]
        if missing:
            problems.append(
                f"no assumed count for rule(s) {', '.join(missing)}: add --assume-replicas RULE=N or a plain "
                "--assume-replicas N for every rule"
            )
        return problems


replica_count = whole_number(0, MAX_REPLICAS, what="a replica count")
"""argparse type of an assumed count: ASCII digits, 0 to the API's int32 maximum."""


def assume_item(text: str) -> tuple[str | None, int]:
    """argparse type of one --assume-replicas: 'N' or 'RULE=N'."""
    match = _RULE_COUNT.fullmatch(text)
    if match is not None:
        return match.group(1), replica_count(match.group(2))
    if "=" in text:
        raise argparse.ArgumentTypeError(f"expected N or RULE=N with a rule name (got {text[:60]!r})")
    return None, replica_count(text)


def add_assume_argument(parser: argparse.ArgumentParser, needs: str) -> None:
    """`--assume-replicas [RULE=]N` (repeatable), as `run` and `status` spell it; `needs` ends its help."""
    parser.add_argument(
        "--assume-replicas",
        type=assume_item,
        action="append",
        metavar="[RULE=]N",
        help=f"no cluster: assume N replicas for every rule, or for RULE (repeatable); {needs} "
        "(docs/try-without-a-cluster.md)",
    )


def assumed_replicas(items: Sequence[tuple[str | None, int]]) -> AssumedReplicas:
    """The flags combined; the last plain N and the last RULE=N for a rule win, as repeated flags do."""
    default = None
    per_rule: dict[str, int] = {}
    for name, count in items:
        if name is None:
            default = count
        else:
            per_rule[name] = count
    return AssumedReplicas(default, per_rule)


def refusal(args: argparse.Namespace) -> str | None:
    """Why --assume-replicas cannot run with these flags (None: it can)."""
    if not args.dry_run:
        return "--assume-replicas needs --dry-run: without a cluster there is nothing to scale"
    if args.leader_elect:
        return "--assume-replicas cannot be used with --leader-elect: there is no cluster to hold a Lease"
    if args.kubeconfig:
        return "--assume-replicas replaces the cluster: drop --kubeconfig, or drop --assume-replicas"
    return None


def assumed_backend(
    assumed: AssumedReplicas, rules: RuleSet, dry_run: bool, leader_elect: bool
) -> AssumedScaleBackend:
    """The backend for these flags, or UsageError listing every problem (unknown rule, missing count)."""
    problems = assumed.problems(rules)
    if leader_elect or not dry_run:
        problems.insert(0, "--assume-replicas runs with --dry-run and without --leader-elect")
    if problems:
        raise UsageError("\n".join(problems))
    return AssumedScaleBackend(assumed, rules)


class AssumedScaleBackend:
    """A `ScaleBackend` with fixed, assumed replica counts and no cluster: reads answer them, nothing else."""

    def __init__(self, assumed: AssumedReplicas, rules: RuleSet) -> None:
        self._assumed = assumed
        self._lock = threading.Lock()
        self._counts: dict[TargetRef, int | None] = {}
        self.set_rules(rules)

    def set_rules(self, rules: RuleSet) -> None:
        """Follow a reloaded rules file: a new rule gets the plain count (or fails to read without one)."""
        counts = {r.target: self._assumed.count(r.name) for r in rules.rules}
        with self._lock:
            self._counts = counts

    def read_scale(self, ref: TargetRef) -> ScaleState:
        with self._lock:
            count = self._counts.get(ref)
        if count is None:
            raise NotFoundError(
                f"{ref.kind} {ref.namespace}/{ref.name}: no assumed count (--assume-replicas RULE=N)"
            )
        return ScaleState(spec_replicas=count, status_replicas=count, annotations={}, resource_version=None)

    def patch_scale(self, ref: TargetRef, replicas: int) -> None:
        raise KubeApiError("--assume-replicas runs with --dry-run: nothing is ever patched")

    def emit_event(
        self, ref: TargetRef, type_: Literal["Normal", "Warning"], reason: str, message: str
    ) -> None:
        """No cluster to post to: the printed decision line and the log carry the same facts."""

    def unschedulable_since(self, ref: TargetRef, selector: str | None) -> tuple[float, ...]:
        """No cluster, no Pending pods: the guard limits by the capacity query alone."""
        return ()


def decision_line(outcome: RuleOutcome, timestamp: float) -> str:
    """'2026-11-23T13:40:00Z embed: 3 -> 5 ScaleUpLimit | util=95 (target 80) | scale up 3 -> 8 ...'."""
    when = dt.datetime.fromtimestamp(timestamp, dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    current = "-" if outcome.current is None else str(outcome.current)
    desired = "-" if outcome.desired is None else str(outcome.desired)
    metrics = describe_metrics(outcome.rule, outcome.observations) if outcome.observations else "-"
    head = f"{when} {outcome.rule.name}: {current} -> {desired} {outcome.reason}"
    return f"{head} | {metrics} | {outcome.message}"


def decision_printer(out: TextIO = sys.stdout) -> Callable[[SyncReport], None]:
    """An `on_sync` callback printing one line per rule, flushed, so a pipe shows each sync as it ends."""

    def print_report(report: SyncReport) -> None:
        for outcome in report.outcomes:
            out.write(decision_line(outcome, report.timestamp) + "\n")
        out.flush()

    return print_report
