"""`python -m demo` (the README's `./scripts/demo.sh`): the closed loop on one machine, no cluster, no GPU.

A simulated GPU Deployment (demo.cluster) serves a day of load compressed into a few minutes; its replicas'
GPUs live in simulated NVML nodes served by real exporters (demo.world); a real Prometheus scrapes them; the
real controller (autoscaler.controller) runs the rule's PromQL and scales the Deployment through an in-memory
scale backend (demo.scale_backend), exactly as it patches Kubernetes. One line per sync on stdout; at the
end (or on Ctrl-C / SIGTERM / SIGHUP, after stopping everything it started) timeline.csv, demo.png and
summary.md.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import signal
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Sequence
from pathlib import Path
from types import FrameType

from autoscaler.controller import Controller
from autoscaler.errors import RulesError
from autoscaler.metrics import ControllerMetrics
from autoscaler.policy import Reason
from autoscaler.prometheus import PromQLRunner, PromQLSettings
from autoscaler.rules import Rule, RuleSet, load_rules
from autoscaler.server import MetricsServer
from demo.cluster import ClusterSettings, SimulatedDeployment
from demo.processes import ProcessError, start_prometheus
from demo.report import DemoRecorder
from demo.scale_backend import InMemoryScaleBackend, RecordedEvent
from demo.traces import Trace, demo_day
from demo.world import SimulatedWorld

DEMO_RULES = Path(__file__).resolve().parent / "demo-rules.yaml"
REQUESTS_PER_GPU_SECOND = 10.0
"""Requests per second one simulated GPU serves at 100 % (the demo rules' target 9 = 90 % of a GPU)."""
TICK_SECONDS = 0.25
"""How often the load driver updates the GPUs and the request counter."""
READY_TIMEOUT_SECONDS = 30.0

log = logging.getLogger("demo")


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m demo", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rules", type=Path, default=DEMO_RULES, metavar="FILE",
                        help="rules file to run (default: the demo's own, demo/demo-rules.yaml)")
    parser.add_argument("--rule", metavar="NAME", help="which rule of FILE (default: the first)")
    parser.add_argument("--duration", type=float, default=180.0, metavar="SECONDS",
                        help="length of the scenario: a day of load played in it (default %(default)g)")
    parser.add_argument("--output", type=Path, default=Path("demo-output"), metavar="DIR",
                        help="where timeline.csv, demo.png and summary.md go (default ./demo-output)")
    parser.add_argument("--startup-delay", type=float, default=10.0, metavar="SECONDS",
                        help="seconds a new replica loads its model before it serves (default %(default)g)")
    parser.add_argument("--interval", type=float, default=2.0, metavar="SECONDS",
                        help="seconds between controller syncs (default %(default)g)")
    parser.add_argument("--scrape-interval", type=float, default=1.0, metavar="SECONDS",
                        help="Prometheus scrape interval (default %(default)g)")
    args = parser.parse_args(argv)
    minimums = (("--duration", args.duration, 1.0), ("--startup-delay", args.startup_delay, 0.0),
                ("--interval", args.interval, 0.2), ("--scrape-interval", args.scrape_interval, 0.2))
    for flag, value, minimum in minimums:
        if not value >= minimum:
            parser.error(f"{flag}: expected seconds >= {minimum:g} (got {value:g})")
    return args


def choose_rule(path: Path, name: str | None) -> Rule:
    """The rule to demo; raises RulesError (bad file) or KeyError (no such rule)."""
    rules = load_rules(path)
    if name is not None:
        return rules.get(name)
    if not rules.rules:
        raise KeyError(f"{path} has no rule")
    return rules.rules[0]


def _query(url: str, promql: str) -> list[dict[str, object]]:
    query = urllib.parse.urlencode({"query": promql})
    with urllib.request.urlopen(f"{url}/api/v1/query?{query}", timeout=2) as response:
        return list(json.load(response)["data"]["result"])


def wait_for_scrapes(url: str, targets: int, stop: threading.Event, timeout: float,
                     between: Callable[[], object] = lambda: None) -> bool:
    """Until every target was scraped once (bounded), so the first syncs see data; `between` runs before
    every poll (the demo keeps its load flowing)."""
    deadline = time.monotonic() + timeout
    while not stop.is_set() and time.monotonic() < deadline:
        between()
        try:
            result = _query(url, "count(up == 1)")
            if result and int(float(result[0]["value"][1])) >= targets:  # type: ignore[index]
                return True
        except (urllib.error.URLError, OSError, ValueError, KeyError):
            pass
        stop.wait(0.2)
    return False


def wait_for_series(url: str, queries: Sequence[str], stop: threading.Event, timeout: float,
                    between: Callable[[], object] = lambda: None) -> list[str]:
    """Until each query returns a series (bounded); the queries that still return none. `between` runs
    before every poll, as for wait_for_scrapes.

    One scrape is not enough: rate() needs two samples in its window, so the first sync would report the
    request metric failed (and post a FailedGetMetrics event) although nothing is wrong.
    """
    deadline = time.monotonic() + timeout
    pending = list(dict.fromkeys(queries))
    while pending and not stop.is_set() and time.monotonic() < deadline:
        between()
        still = []
        for promql in pending:
            try:
                if not _query(url, promql):
                    still.append(promql)
            except (urllib.error.URLError, OSError, ValueError, KeyError):
                still.append(promql)
        pending = still
        if pending:
            stop.wait(0.2)
    return pending


def install_signal_handlers(stop: threading.Event, received: list[int]) -> None:
    def handle(signum: int, frame: FrameType | None) -> None:
        received.append(signum)
        stop.set()

    signal.signal(signal.SIGINT, handle)
    signal.signal(signal.SIGTERM, handle)
    if hasattr(signal, "SIGHUP"):  # the terminal closed: stop as cleanly as on Ctrl-C (not on Windows)
        signal.signal(signal.SIGHUP, handle)


def run(args: argparse.Namespace, rule: Rule, recorder: DemoRecorder, stop: threading.Event) -> None:
    """Start everything, play the scenario until it ends or `stop` is set, stop everything; never leaks."""
    settings = ClusterSettings(nodes=2, gpus_per_node=max(6, (rule.max_replicas + 1) // 2),
                               startup_delay_seconds=args.startup_delay)
    deployment = SimulatedDeployment(rule.target.namespace, rule.target.name, rule.min_replicas,
                                     time.monotonic, settings)
    trace = demo_day(args.duration)

    def on_event(event: RecordedEvent) -> None:
        if event.type == "Warning":
            print(f"          event {event.type} {event.reason}: {event.message}", flush=True)

    with contextlib.ExitStack() as stack:
        world = SimulatedWorld(deployment, REQUESTS_PER_GPU_SECOND)
        stack.callback(world.stop)
        world.start()
        backend = InMemoryScaleBackend(on_event=on_event)
        backend.add(rule.target, deployment)
        metrics = ControllerMetrics(reasons=[r.value for r in Reason])
        metrics_server = MetricsServer(metrics.exposition, lambda: (True, "ok"), 0, "127.0.0.1").start()
        stack.callback(metrics_server.stop)
        jobs = {**world.scrape_targets(), "gpu-autoscaler": [f"127.0.0.1:{metrics_server.port}"]}
        scrape = f"{round(args.scrape_interval * 1000)}ms"  # Prometheus durations take integers only
        prometheus = start_prometheus({
            "global": {"scrape_interval": scrape, "evaluation_interval": scrape,
                       "scrape_timeout": f"{round(args.scrape_interval * 900)}ms"},
            "scrape_configs": [{"job_name": job, "static_configs": [{"targets": targets}]}
                               for job, targets in jobs.items()],
        })
        stack.callback(prometheus.stop)
        print(f"demo: exporters on ports {world.exporter_ports}, service on {world.service_port}, "
              f"Prometheus at {prometheus.url}, controller metrics on {metrics_server.port}", flush=True)
        last_drive = [time.monotonic()]

        def keep_load_flowing() -> None:
            """The scenario's first load while waiting, so the first rate() Prometheus computes is the real
            one, not the zero of an idle counter."""
            now = time.monotonic()
            world.drive(trace(0.0), now - last_drive[0])
            last_drive[0] = now

        keep_load_flowing()
        targets = sum(len(t) for t in jobs.values())
        if not wait_for_scrapes(prometheus.url, targets, stop, READY_TIMEOUT_SECONDS, keep_load_flowing):
            print("demo: warning: Prometheus has not scraped every target yet; first syncs may fail",
                  flush=True)
        else:
            queries = [m.query for m in rule.metrics]
            for promql in wait_for_series(prometheus.url, queries, stop, READY_TIMEOUT_SECONDS,
                                          keep_load_flowing):
                print(f"demo: warning: no series yet for {promql}; the first syncs may report it failed",
                      flush=True)
        runner = PromQLRunner(PromQLSettings(prometheus.url, query_timeout=max(args.interval / 2, 0.5),
                                             budget=max(args.interval * 0.6, 0.5), max_attempts=2))
        stack.callback(runner.close)
        controller = Controller(backend, runner, RuleSet(str(args.rules), (rule,)), time.time,
                                metrics=metrics)
        stack.callback(controller.close)
        stack.callback(controller.stopping.set)
        print(f"demo: {rule.name} scales {rule.target} between {rule.min_replicas} and {rule.max_replicas}; "
              f"{trace.description}, {args.duration:g} s; Ctrl-C stops", flush=True)
        play(args, trace, world, controller, recorder, stop)


def play(args: argparse.Namespace, trace: Trace, world: SimulatedWorld, controller: Controller,
         recorder: DemoRecorder, stop: threading.Event) -> None:
    """The scenario loop: drive the GPUs every tick, sync the controller every interval."""
    start = last = time.monotonic()
    next_sync = start
    while not stop.is_set():
        now = time.monotonic()
        elapsed = now - start
        if elapsed >= args.duration:
            break
        snapshot = world.drive(trace(elapsed), now - last)
        recorder.tick(snapshot, now - last)
        last = now
        if now >= next_sync:
            report = controller.sync_once()
            snapshot = world.deployment.snapshot(snapshot.load)
            for outcome in report.outcomes:
                print(recorder.sync(elapsed, snapshot, outcome), flush=True)
            next_sync += args.interval
            if next_sync < time.monotonic():  # a slow sync: skip the missed ones, do not burst
                next_sync = time.monotonic() + args.interval
        stop.wait(max(0.0, min(TICK_SECONDS, next_sync - time.monotonic())))
    recorder.elapsed = min(time.monotonic() - start, args.duration)


def _shown(path: Path) -> str:
    """The rules path as the user would type it: relative to the working directory when inside it."""
    try:
        return str(path.resolve().relative_to(Path.cwd()))
    except ValueError:
        return str(path)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    try:
        rule = choose_rule(args.rules, args.rule)
    except RulesError as exc:
        print(f"demo: invalid rules file:\n{exc}", file=sys.stderr)
        return 2
    except KeyError as exc:
        print(f"demo: --rule: {exc.args[0]}", file=sys.stderr)
        return 2
    stop = threading.Event()
    received: list[int] = []
    install_signal_handlers(stop, received)
    recorder = DemoRecorder(rule, _shown(args.rules), args.startup_delay, args.interval)
    code = 0
    try:
        run(args, rule, recorder, stop)
    except ProcessError as exc:
        print(f"demo: cannot start Prometheus: {exc}", file=sys.stderr)
        code = 1
    finally:  # whatever happened, everything is stopped by now: write what was recorded
        if received:
            recorder.ended_by = f"stopped by {signal.Signals(received[0]).name}"
            code = 128 + received[0]
        if recorder.points or received:
            for path in recorder.write(args.output):
                print(f"demo: wrote {path}", flush=True)
    return code


if __name__ == "__main__":
    raise SystemExit(main())
