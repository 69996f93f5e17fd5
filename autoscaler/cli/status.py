"""`gpu-autoscaler status`: one read-only sync as a table (rule, target, current, desired, metrics, why).

It runs the controller's own code path in dry-run with events off, so the table shows exactly what `run` would
decide now. It has no history: a fresh decision, as on the controller's first sync (a scale-down is held by
the scale-down window until the controller has watched that long). A rule with `slo` learns its target first,
and WHY says the learned target or why there is none.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from autoscaler.cli.args import add_cluster_arguments, add_namespaces_argument, prometheus_config
from autoscaler.cli.assumed import add_assume_argument, assumed_backend, assumed_replicas
from autoscaler.config.rules import load_rules
from autoscaler.controller.loop import ControllerSettings, RuleOutcome
from autoscaler.controller.slo_learning import SloLearning
from autoscaler.controller.wiring import wire
from autoscaler.errors import KubeConfigError, RulesError
from autoscaler.kube.backend import NamespaceScope, ScaleBackend
from autoscaler.planning.plan import describe_metrics
from autoscaler.policy import Reason, Rule
from autoscaler.reasons import OutcomeReason, SyncReason
from plumbing.cli import EXIT_USAGE, fail
from plumbing.display import aligned, as_csv
from plumbing.errors import ReportedError
from plumbing.output import CSV, JSON, WIDE, add_output_arguments, document, failure_json
from plumbing.prometheus.config import PrometheusConfig, single_endpoint
from plumbing.prometheus.runner import PromQLSettings

if TYPE_CHECKING:
    from kubernetes.client import ApiClient

PROG = "gpu-autoscaler status"

WHY: dict[OutcomeReason, str] = {
    Reason.AboveMaxReplicas: "above max",
    Reason.BelowMinReplicas: "below min",
    Reason.WithinTolerance: "within tolerance",
    Reason.DesiredWithinRange: "desired",
    Reason.ScaleUpStabilized: "stabilized",
    Reason.ScaleDownStabilized: "stabilized",
    Reason.ScaleUpLimit: "rate-limited",
    Reason.ScaleDownLimit: "rate-limited",
    Reason.ScalingDisabled: "scaling disabled",
    Reason.TooManyReplicas: "at max",
    Reason.TooFewReplicas: "at min",
    Reason.MetricsFailed: "metrics failed",
    Reason.MetricsPartiallyFailed: "metrics partially failed",
    Reason.Activated: "activated",
    Reason.Idle: "idle at zero",
    Reason.ScaledToZero: "scaled to zero",
    Reason.CapacityLimited: "capacity-limited",
    Reason.PanicScaleUp: "panic scale-up",
    Reason.PanicHold: "panic hold",
    Reason.Paused: "paused",
    Reason.PausedReplicas: "paused",
    Reason.Fallback: "fallback",
    SyncReason.FailedGetScale: "cannot read scale",
    SyncReason.Error: "error",
    SyncReason.UnknownEndpoint: "unknown Prometheus endpoint",
    SyncReason.Abandoned: "abandoned",
}
"""The WHY column's phrase for every outcome reason (a test checks that none is missing)."""
HEADER = ("RULE", "TARGET", "CURRENT", "DESIRED", "BOUNDS", "METRICS (value/target)", "WHY")
WIDE_HEADER = (*HEADER[:-1], "REASON", "COMPLETE", "MESSAGE")
CSV_FIELDS = ("rule", "kind", "namespace", "name", "current", "desired", "min", "max", "schedule", "reason",
              "complete", "message")


HELP = "show what the controller would decide now for every rule (read-only)"


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The flags of `status`."""
    p.description = ("Reads every target's scale and runs every query once, then prints a table: "
                     "rule, target, "
                     "current, desired, each metric's value/target, and why. Never patches, posts no events.")
    add_cluster_arguments(p)
    add_namespaces_argument(p)
    add_assume_argument(p, "as `run --dry-run --assume-replicas` does")
    add_output_arguments(p, what=": json and csv are docs/controller.md's shape")


NO_CLUSTER_HINT = ("no cluster? --assume-replicas N assumes N replicas for every rule "
                   "(docs/try-without-a-cluster.md)")


def run(args: argparse.Namespace) -> int:
    if args.assume_replicas and args.kubeconfig:
        return _failed(args, "--assume-replicas replaces the cluster: drop --kubeconfig, or drop "
                    "--assume-replicas")
    try:
        rules = load_rules(args.rules)
        endpoints = prometheus_config(args)
        if args.assume_replicas:
            backend: ApiClient | ScaleBackend = assumed_backend(
                assumed_replicas(args.assume_replicas), rules, dry_run=True, leader_elect=False)
        else:
            from autoscaler.kube.scale import load_api_client  # the client (0.35 s) loads for a cluster only

            backend = load_api_client(args.kubeconfig)
    except RulesError as e:
        return _failed(args, f"invalid rules file:\n{e}")
    except KubeConfigError as e:
        return _failed(args, f"{e}\n{NO_CLUSTER_HINT}")
    except ReportedError as e:
        return _failed(args, str(e))
    outcomes, learning = gather_learning(rules_path=args.rules, prometheus=endpoints or args.prometheus,
                                         api_client=backend, rules=rules, namespaces=args.namespaces)
    print(rendered(outcomes, args.output, headers=not args.no_headers, learning=learning))
    return 0 if all(o.complete for o in outcomes) else 1


def _failed(args: argparse.Namespace, message: str) -> int:
    """One message on stderr, exit 2; under -o json also the failure document on stdout."""
    if args.output == JSON:
        print(failure_json(message, EXIT_USAGE), flush=True)
    return fail(PROG, message)


def gather(
    rules_path: str, prometheus: str | PrometheusConfig, api_client: ApiClient | ScaleBackend,
    rules: Any | None = None, namespaces: frozenset[str] | None = None,
) -> tuple[RuleOutcome, ...]:
    """One dry-run sync without events, the outcomes in file order; with `namespaces`, a target elsewhere is
    refused before any API call, as `run --namespaces` refuses it. `api_client` is the cluster's client, or
    a backend of its own (the assumed counts of --assume-replicas)."""
    return gather_learning(rules_path, prometheus, api_client, rules, namespaces)[0]


def gather_learning(
    rules_path: str, prometheus: str | PrometheusConfig, api_client: ApiClient | ScaleBackend,
    rules: Any | None = None, namespaces: frozenset[str] | None = None,
) -> tuple[tuple[RuleOutcome, ...], dict[str, SloLearning]]:
    """`gather`'s outcomes, and what every slo rule learned (by rule name) for `-o json`."""
    rules = rules if rules is not None else load_rules(rules_path)
    config = single_endpoint(prometheus) if isinstance(prometheus, str) else prometheus
    backend: ScaleBackend
    if hasattr(api_client, "read_scale"):  # a backend of its own: no Kubernetes client is loaded
        backend = api_client
    else:
        from autoscaler.kube.scale import KubernetesScaleBackend

        backend = KubernetesScaleBackend(api_client)
    if namespaces:
        backend = NamespaceScope(backend, namespaces)
    with wire(
        rules=rules,
        backend=backend,
        prometheus=config,
        queries=PromQLSettings("", query_timeout=5.0, budget=10.0),
        settings=ControllerSettings(dry_run=True, emit_events=False),
    ) as wiring:
        controller = wiring.controller
        controller.learn_due(controller.clock())  # every slo rule's target, not one a sync as `run` does
        outcomes = controller.sync_once().outcomes
        learned = {o.rule.name: controller.slo(o.rule.name) for o in outcomes if o.rule.slo is not None}
        return outcomes, learned


def why(outcome: RuleOutcome) -> str:
    phrase = WHY[outcome.reason]
    return f"{phrase} ({outcome.reason}): {outcome.message}"


def render(outcomes: Sequence[RuleOutcome], headers: bool = True) -> str:
    rows = []
    for o in outcomes:
        target = str(o.rule.target)
        metrics = describe_metrics(o.rule, o.observations) if o.observations else "-"
        rows.append((o.rule.name, target, _num(o.current), _num(o.desired), _bounds(o), metrics, why(o)))
    # a message quoting a server or a label shows its control characters escaped
    return aligned(HEADER, rows, headers)


def rendered(outcomes: Sequence[RuleOutcome], output: str, headers: bool = True,
             learning: Mapping[str, SloLearning] | None = None) -> str:
    """The outcomes in the `-o` format: the table, the wide table, the JSON document or CSV; `learning`
    (by rule name) is what the slo rules learned, for the JSON's `slo`."""
    if output == JSON:
        return json.dumps(as_json(outcomes, learning), indent=2)
    if output == CSV:
        return as_csv((_record(o) for o in outcomes), CSV_FIELDS, headers)
    if output == WIDE:
        rows = [(o.rule.name, str(o.rule.target), _num(o.current), _num(o.desired), _bounds(o),
                 describe_metrics(o.rule, o.observations) if o.observations else "-", str(o.reason),
                 "yes" if o.complete else "no", o.message) for o in outcomes]
        return aligned(WIDE_HEADER, rows, headers)
    return render(outcomes, headers)


def _bounds(o: RuleOutcome) -> str:
    low, high = o.bounds
    return f"{low}-{high}" + (" (schedule)" if o.schedule is not None else "")


def _record(o: RuleOutcome) -> dict[str, object]:
    low, high = o.bounds
    target = o.rule.target
    return {"rule": o.rule.name, "kind": target.kind, "namespace": target.namespace, "name": target.name,
            "current": o.current, "desired": o.desired, "min": low, "max": high,
            "schedule": o.schedule is not None, "reason": str(o.reason), "complete": o.complete,
            "message": o.message}


def as_json(outcomes: Sequence[RuleOutcome], learning: Mapping[str, SloLearning] | None = None,
            ) -> dict[str, object]:
    """`status -o json`: one entry per rule, in file order (docs/controller.md)."""
    learning = learning or {}
    rules = []
    for o in outcomes:
        record = _record(o)
        target = {"apiVersion": o.rule.target.api_version, "kind": record.pop("kind"),
                  "namespace": record.pop("namespace"), "name": record.pop("name")}
        specs = {m.name: m for m in o.rule.metrics}
        metrics = [{"name": m.name, "value": m.value, "error": m.error,
                    "target": specs[m.name].target if m.name in specs else None,
                    "type": specs[m.name].type if m.name in specs else None} for m in o.observations]
        rules.append({"rule": record.pop("rule"), "target": target, **record, "why": WHY[o.reason],
                      "metrics": metrics, "slo": _slo_json(o.rule, learning.get(o.rule.name, SloLearning()))})
    return document(rules=rules)


def _slo_json(rule: Rule, learning: SloLearning) -> dict[str, object] | None:
    """The rule's objective as the controller holds it: the learned target, or why none (None: no slo)."""
    slo = rule.slo
    if slo is None:
        return None
    configured = next(m.target for m in rule.metrics if m.name == slo.learn)
    return {"metric": slo.learn, "learned_target": learning.target, "configured_target": configured,
            "mode": slo.mode, "reason": learning.why_none()}


def _num(value: int | None) -> str:
    return "-" if value is None else str(value)
