"""`gpu-autoscaler run`: the controller process (flags, wiring, signals, the loop).

`HELP`, `add_arguments` and `run` are the subcommand contract (autoscaler/cli/main.py); `serve` wires an
already-built API client, so tests run the whole process in-process against their fake API server, and `run`
runs it for real.
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from autoscaler.cli.args import DEFAULT_PROMETHEUS, add_cluster_arguments, add_namespaces_argument
from autoscaler.cli.assumed import (
    AssumedReplicas,
    AssumedScaleBackend,
    add_assume_argument,
    assumed_backend,
    assumed_replicas,
    decision_printer,
    refusal,
)
from autoscaler.config.rules import RuleSet
from autoscaler.controller.decision_log import WithoutDecisionLines
from autoscaler.controller.logfmt import configure_logging
from autoscaler.controller.loop import Controller, ControllerSettings, SyncReport
from autoscaler.controller.reload import RulesWatcher, WatchedRules, load_watched
from autoscaler.controller.self_metrics import ControllerMetrics
from autoscaler.controller.wiring import Endpoint, wire
from autoscaler.errors import AutoscalerError, KubeConfigError, Problem, RulesError
from autoscaler.kube.backend import NamespaceScope, ScaleBackend
from autoscaler.reasons import DECISION_REASONS
from plumbing.cli import fail, install_stop_handlers, parse_duration, port_number, whole_number
from plumbing.errors import ReportedError
from plumbing.prometheus.config import PrometheusConfig, PrometheusConfigError, endpoints_of
from plumbing.prometheus.runner import PromQLSettings
from plumbing.web import WebConfig, WebConfigError, load_web_config
from plumbing.web.server import ListenError

if TYPE_CHECKING:
    from kubernetes.client import ApiClient

    from autoscaler.kube.leader import LeaseSettings

log = logging.getLogger(__name__)

PROG = "gpu-autoscaler run"

@dataclass(frozen=True)
class RunOptions:
    """The `run` flags, parsed. Durations in seconds."""

    rules: str
    prometheus: str = DEFAULT_PROMETHEUS
    prometheus_config: str | None = None
    """The --prometheus-config file (named endpoints with auth and TLS); when set, `prometheus` is unused."""
    interval: float = 15.0
    dry_run: bool = False
    once: bool = False
    metrics_port: int | None = 9401
    """None: no HTTP server (tests that only need the loop)."""
    leader_elect: bool = False
    lease: LeaseSettings | None = None
    metrics_host: str = "0.0.0.0"
    web_config_file: str | None = None
    """TLS and basic auth of /metrics (exporter-toolkit format, docs/web-config.md); None: plain HTTP."""
    namespaces: frozenset[str] | None = None
    """--namespaces: the only namespaces whose targets are read and scaled (None: every namespace)."""
    assume_replicas: AssumedReplicas | None = None
    """--assume-replicas: no cluster, these fixed counts instead (dry-run only; autoscaler/cli/assumed.py)."""
    prometheus_batch_size: int = 100
    """--prometheus-batch-size: queries per request to Prometheus (0 or 1: each query alone)."""

    def endpoints(self) -> PrometheusConfig:
        """The Prometheus endpoints the flags name; raises PrometheusConfigError."""
        config = endpoints_of(self.prometheus, self.prometheus_config)
        if config is None:
            raise PrometheusConfigError([Problem("--prometheus", 0, "url", "expected a Prometheus URL")])
        return config

    @property
    def query_budget(self) -> float:
        """Half the interval for all queries of a sync, retries included, so a sync never overruns it."""
        return self.interval * 0.5

    @property
    def request_timeout(self) -> float:
        return max(min(5.0, self.interval / 4), 0.1)


batch_size = whole_number(0, 1000, what="an integer")
"""argparse type of --prometheus-batch-size: an integer in [0, 1000]."""


HELP = "run the controller: query Prometheus, decide, patch the scale of the targets"


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The flags of `run`."""
    p.description = ("Every --interval: read each rule's target scale, run its PromQL queries, decide "
                     "with the "
                     "HPA algorithm and patch the scale subresource when the count changes.")
    add_cluster_arguments(p, rules_help="rules file (reloaded when it changes)")
    add_namespaces_argument(p)
    add_assume_argument(p, "needs --dry-run; prints each sync's decisions to stdout")
    p.add_argument(
        "--interval",
        type=parse_duration,
        default=15.0,
        metavar="DURATION",
        help="time between syncs, e.g. 15s, 500ms, 1m (default: 15s)",
    )
    p.add_argument(
        "--prometheus-batch-size",
        type=batch_size,
        default=100,
        metavar="N",
        help="queries sent to Prometheus per request, each answer split back per query; 0 or 1 sends every "
        "query alone (default: 100)",
    )
    p.add_argument("--dry-run", action="store_true", help="decide and report, never patch")
    p.add_argument(
        "--once",
        action="store_true",
        help="run one sync and exit (0 if every rule synced, 1 if not or if this replica never led)",
    )
    p.add_argument(
        "--metrics-port",
        type=port_number,
        default=9401,
        metavar="PORT",
        help="port of /metrics, /healthz and /readyz (default: 9401; 0 disables)",
    )
    p.add_argument(
        "--web-config-file",
        metavar="FILE",
        help="TLS and basic auth for /metrics, /healthz, /readyz (exporter-toolkit web config format)",
    )
    p.add_argument(
        "--leader-elect",
        action="store_true",
        help="run several replicas; only the holder of a coordination.k8s.io Lease acts",
    )
    p.add_argument(
        "--leader-elect-namespace",
        default=os.environ.get("POD_NAMESPACE", "gpu-autoscaler"),
        metavar="NS",
        help="namespace of the Lease (default: $POD_NAMESPACE or %(default)s)",
    )
    p.add_argument(
        "--leader-elect-name",
        default="gpu-autoscaler",
        metavar="NAME",
        help="name of the Lease (default: %(default)s)",
    )
    p.add_argument("--log-format", choices=("text", "json"), default="text", help="log line format")


def run(args: argparse.Namespace) -> int:
    """The `run` handler: exit 0 (stopped by a signal, or --once with all rules synced), 1, 2 (bad input:
    rules file, kubeconfig, a --metrics-port that cannot be served)."""
    configure_logging(args.log_format)
    options = RunOptions(
        rules=args.rules,
        prometheus=args.prometheus,
        prometheus_config=args.prometheus_config,
        interval=args.interval,
        dry_run=args.dry_run,
        once=args.once,
        metrics_port=args.metrics_port or None,
        web_config_file=args.web_config_file,
        namespaces=args.namespaces,
        prometheus_batch_size=args.prometheus_batch_size,
        assume_replicas=assumed_replicas(args.assume_replicas) if args.assume_replicas else None,
        leader_elect=args.leader_elect,
        lease=_lease(args) if args.leader_elect else None,
    )
    refused = refusal(args) if options.assume_replicas is not None else None
    if refused is not None:
        return fail(PROG, refused)
    try:
        loaded = load_watched(options.rules)  # a bad rules file is reported before anything else is tried
        options.endpoints()
        api_client = None if options.assume_replicas else _api_client(args.kubeconfig)
    except RulesError as e:
        return fail(PROG, f"invalid rules file, not starting:\n{e}")
    except KubeConfigError as e:
        hint = ("no cluster? --dry-run --assume-replicas N assumes N replicas for every rule "
                "(docs/try-without-a-cluster.md)")
        return fail(PROG, f"{e}\n{hint}")
    except ReportedError as e:
        return fail(PROG, str(e))
    stop = threading.Event()
    install_stop_handlers(stop, _stopping)
    printer = decision_printer() if options.assume_replicas else None
    if printer is not None and sys.stdout.isatty():  # the printed line is the decision line on a terminal
        for handler in logging.getLogger().handlers:
            handler.addFilter(WithoutDecisionLines())
    return serve(options, api_client, stop, printer, loaded=loaded)


# The Kubernetes client takes 0.35 s to import: it is loaded where a cluster is used (the functions below),
# never by `run --dry-run --assume-replicas`, which has none.
def _api_client(kubeconfig: str | None) -> ApiClient:
    from autoscaler.kube.scale import load_api_client

    return load_api_client(kubeconfig)


def _lease(args: argparse.Namespace) -> LeaseSettings:
    from autoscaler.kube.leader import LeaseSettings

    return LeaseSettings(namespace=args.leader_elect_namespace, name=args.leader_elect_name)


def _stopping(signum: int) -> None:
    log.info("received %s: finishing the current sync and exiting", signal.Signals(signum).name)


def serve(
    options: RunOptions,
    api_client: ApiClient | None,
    stop: threading.Event,
    on_sync: Callable[[SyncReport], None] | None = None,
    *,
    loaded: WatchedRules | None = None,
) -> int:
    """Run the controller until `stop` is set (or once); returns the process exit code. `loaded`: the rules
    file as `run` read it (None: read here), so the file is read once."""
    if loaded is None:
        try:
            loaded = load_watched(options.rules)
        except RulesError as e:
            return fail(PROG, f"invalid rules file, not starting:\n{e}")
    rules = loaded.rules
    web_config: WebConfig | None = None
    if options.web_config_file is not None and options.metrics_port is not None:
        try:
            web_config = load_web_config(options.web_config_file)
        except WebConfigError as e:
            return fail(PROG, f"invalid --web-config-file, not starting:\n{e}")
    try:
        backend = scale_backend(options, api_client, rules)
    except ReportedError as e:
        return fail(PROG, str(e))
    metrics = ControllerMetrics(reasons=DECISION_REASONS)
    elector = None
    if options.leader_elect:
        from autoscaler.kube.leader import LeaderElector, LeaseSettings

        elector = LeaderElector(
            api_client,
            options.lease or LeaseSettings(),
            on_change=lambda leader: setattr(metrics, "leader", leader),
        )
    try:
        endpoints = options.endpoints()
    except PrometheusConfigError as e:
        return fail(PROG, f"invalid Prometheus connections, not starting:\n{e}")
    try:
        wiring = wire(
            rules=rules,
            backend=backend,
            prometheus=endpoints,
            queries=PromQLSettings(options.prometheus, query_timeout=min(5.0, options.query_budget),
                                   budget=options.query_budget, batch_size=options.prometheus_batch_size),
            settings=ControllerSettings(dry_run=options.dry_run),
            metrics=metrics,
            is_leader=elector.is_leader if elector is not None else (lambda: True),
            endpoint=None if options.metrics_port is None else Endpoint(
                options.metrics_port, options.interval, options.metrics_host, web_config),
        )
    except ListenError as e:  # busy port, or a privileged one without the capability
        return fail(PROG, f"cannot serve /metrics on --metrics-port {options.metrics_port} "
                          f"({options.metrics_host}:{options.metrics_port}): {e.reason}")
    controller = wiring.controller
    watcher = RulesWatcher(
        options.rules,
        _rules_listener(controller, backend),
        lambda valid: setattr(metrics, "rules_valid", valid),
        loaded=loaded,
    )
    election = elector.start(stop) if elector is not None else None
    log.info(
        "gpu-autoscaler running %d rule(s) from %s every %gs against %s%s%s",
        len(rules.rules),
        options.rules,
        options.interval,
        ", ".join(f"{name}={e.display_url}" for name, e in endpoints.endpoints.items()),
        " (dry-run)" if options.dry_run else "",
        f" (leader election as {elector.identity})" if elector else "",
    )
    stop_watch = threading.Thread(target=_propagate, args=(stop, controller.stopping), daemon=True)
    stop_watch.start()
    report: SyncReport | None = None
    if elector is not None and options.once:  # one sync is only useful once this replica leads
        deadline = time.monotonic() + 2 * elector.settings.lease_duration
        while not stop.is_set() and not elector.is_leader() and time.monotonic() < deadline:
            stop.wait(0.05)
    try:
        while not stop.is_set():
            began = time.monotonic()
            try:
                watcher.check()
            except Exception:  # the loop's broad except: a surprise in reloading never stops the syncs
                log.exception("checking the rules file %s failed; keeping the current rules", options.rules)
            report = controller.sync_once()
            if on_sync is not None:
                on_sync(report)
            if options.once:
                break
            stop.wait(max(options.interval - (time.monotonic() - began), 0.0))
    finally:
        stop.set()
        wiring.close()
        if election is not None:
            election.join(timeout=5.0)  # it releases the Lease so a standby takes over at once
        log.info("gpu-autoscaler stopped")
    if options.once and report is not None:
        if not report.acted and elector is not None:
            lease = elector.settings
            log.error(
                "--once: nothing synced: this replica did not become the leader (Lease %s/%s) within %ds; "
                "another replica holds it, or the Kubernetes API is unreachable",
                lease.namespace,
                lease.name,
                2 * lease.lease_duration,
            )
            return 1
        return 0 if all(o.complete for o in report.outcomes) else 1
    return 0


def scale_backend(options: RunOptions, api_client: ApiClient | None, rules: RuleSet) -> ScaleBackend:
    """The cluster, or the fixed counts of --assume-replicas, kept inside --namespaces."""
    backend: ScaleBackend
    if options.assume_replicas is not None:
        backend = assumed_backend(options.assume_replicas, rules, options.dry_run, options.leader_elect)
    elif api_client is None:
        raise AutoscalerError("no Kubernetes API client (and no --assume-replicas)")
    else:
        from autoscaler.kube.scale import KubernetesScaleBackend

        backend = KubernetesScaleBackend(api_client, request_timeout=options.request_timeout)
    return NamespaceScope(backend, options.namespaces) if options.namespaces else backend


def _rules_listener(controller: Controller, backend: ScaleBackend) -> Callable[[RuleSet], None]:
    """A reloaded rules file goes to the controller, and to the assumed counts, which are per rule."""
    assumed = backend.inner if isinstance(backend, NamespaceScope) else backend

    def set_rules(rules: RuleSet) -> None:
        if isinstance(assumed, AssumedScaleBackend):
            assumed.set_rules(rules)
        controller.set_rules(rules)

    return set_rules


def _propagate(stop: threading.Event, stopping: threading.Event) -> None:
    stop.wait()
    stopping.set()
