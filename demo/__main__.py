"""`python -m demo` (the README's `./scripts/demo.sh`): the closed loop on one machine, no cluster, no GPU.

A simulated GPU Deployment (demo.cluster) serves a day of load compressed into a few minutes (or, with
`--scenario capacity`, outgrows a pool short of GPUs while a weekday schedule opens: demo.scenarios); its
replicas' GPUs live in simulated NVML nodes served by real exporters (demo.world); a real Prometheus scrapes
them; the real controller (autoscaler.controller.loop) runs the rule's PromQL and scales the Deployment
through an in-memory scale backend (demo.scale_backend), exactly as it patches Kubernetes. Before the first
sync it waits (bounded, saying what for: demo.warmup) until the rule's queries read what the first load
really is. One line per sync on stdout; at the end (or on Ctrl-C / SIGTERM / SIGHUP, after stopping
everything it started) timeline.csv, demo.png and summary.md, the summary also on stdout.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import logging
import signal
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path

from autoscaler.config.rules import RuleSet, load_rules
from autoscaler.controller.http_endpoint import MetricsServer
from autoscaler.controller.loop import Controller
from autoscaler.controller.self_metrics import ControllerMetrics
from autoscaler.controller.wiring import wire
from autoscaler.errors import RulesError
from autoscaler.policy import Reason, Rule
from demo.cluster import SimulatedDeployment
from demo.llm_server import DRAIN_SECONDS
from demo.processes import ProcessError, Stopped, start_prometheus
from demo.report import DemoRecorder
from demo.scale_backend import InMemoryScaleBackend, RecordedEvent
from demo.scenarios import DEMO_RULES, RATE_RULES, SCENARIOS, Scenario, ShiftedClock  # noqa: F401  (re-exported)
from demo.traces import Trace
from demo.warmup import (  # noqa: F401  (re-exported: the demo's tests and users import them from here)
    TICK_SECONDS,
    NothingToDemo,
    explain_empty,
    range_windows,
    scrape_interval_problem,
    wait_for_scrapes,
    wait_for_series,
    warm_up,
)
from demo.world import SimulatedWorld
from plumbing.cli import duration, install_stop_handlers, silence_stdout
from plumbing.prometheus.config import single_endpoint
from plumbing.prometheus.runner import PromQLSettings

REQUESTS_PER_GPU_SECOND = 8.0
"""Requests per second one GPU's worth of load sends: about what one replica of the emulated server (default
profile and lengths) serves flat out, so a load of 1.0 is one busy replica (the rate rules' 7: ~90 %)."""
log = logging.getLogger("demo")


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m demo", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--scenario", choices=sorted(SCENARIOS), default="day",
                        help="day: a day of load compressed into the run (default); capacity: a pool of 8 "
                             "GPUs too small for the load, a capacity guard and a weekday schedule opening "
                             "at 09:00 Europe/Berlin on the controller's (shifted) clock")
    parser.add_argument("--rules", type=Path, metavar="FILE",
                        help="rules file to run (default: the scenario's, demo/llm-rules.yaml or "
                             "demo/capacity-rules.yaml; demo/demo-rules.yaml scales on the request rate)")
    parser.add_argument("--rule", metavar="NAME", help="which rule of FILE (default: the first)")
    parser.add_argument("--duration", type=duration(1.0, 86400.0), default=180.0, metavar="DURATION",
                        help="length of the scenario, e.g. 3m or 180 (seconds): a day of load played in it "
                             "(default 3m)")
    parser.add_argument("--output", type=Path, default=Path("demo-output"), metavar="DIR",
                        help="where timeline.csv, demo.png and summary.md go (default ./demo-output)")
    parser.add_argument("--startup-delay", type=duration(0.0, 3600.0), default=10.0, metavar="DURATION",
                        help="how long a new replica loads its model before it serves (default 10s)")
    parser.add_argument("--interval", type=duration(0.2, 3600.0), default=2.0, metavar="DURATION",
                        help="time between controller syncs (default 2s)")
    parser.add_argument("--drain", dest="drain_seconds", type=duration(0.0, 3600.0), default=DRAIN_SECONDS,
                        metavar="DURATION",
                        help="how long a replica a scale-down removes serves its requests in flight, "
                             "taking no new one, before what is left is cut: vLLM's --shutdown-timeout "
                             f"within the pod's grace period (default {DRAIN_SECONDS:g}s; 0: cut at once, "
                             "vLLM's default)")
    parser.add_argument("--scrape-interval", type=duration(0.2, 3600.0), default=1.0, metavar="DURATION",
                        help="Prometheus scrape interval, at most 2/5 of the smallest range window in the "
                             "rule's queries (default 1s)")
    args = parser.parse_args(argv)
    if args.rules is None:
        args.rules = SCENARIOS[args.scenario].rules
    return args


def choose_rule(path: Path, name: str | None) -> Rule:
    """The rule to demo; raises RulesError (bad file) or KeyError (no such rule)."""
    rules = load_rules(path)
    if name is not None:
        return rules.get(name)
    if not rules.rules:
        raise KeyError(f"{path} has no rule")
    return rules.rules[0]


STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
"""Ctrl-C, a stop request, and the terminal closing all stop the demo cleanly, writing what it recorded."""


def run(args: argparse.Namespace, rule: Rule, recorder: DemoRecorder, stop: threading.Event) -> None:
    """Start everything, play the scenario until it ends or `stop` is set, stop everything; never leaks."""
    scenario: Scenario = SCENARIOS[args.scenario]
    settings = dataclasses.replace(scenario.pool(rule), startup_delay_seconds=args.startup_delay)
    deployment = SimulatedDeployment(rule.target.namespace, rule.target.name, rule.min_replicas,
                                     time.monotonic, settings)
    trace = scenario.trace(args.duration)
    deployment.set_others(trace.others_at(0.0))
    clock = ShiftedClock(time.monotonic)

    def on_event(event: RecordedEvent) -> None:
        if event.type == "Warning":
            print(f"          event {event.type} {event.reason}: {event.message}", flush=True)

    with contextlib.ExitStack() as stack:
        world = SimulatedWorld(deployment, REQUESTS_PER_GPU_SECOND, drain_seconds=args.drain_seconds)
        stack.callback(world.stop)
        world.start()
        backend = InMemoryScaleBackend(on_event=on_event, to_controller_clock=clock.from_base)
        backend.add(rule.target, deployment)
        metrics = ControllerMetrics(reasons=list(Reason))
        metrics_server = MetricsServer(metrics.exposition, lambda: (True, "ok"), 0, "127.0.0.1").start()
        stack.callback(metrics_server.stop)
        jobs = {**world.scrape_targets(), "gpu-autoscaler": [f"127.0.0.1:{metrics_server.port}"]}
        scrape = f"{round(args.scrape_interval * 1000)}ms"  # Prometheus durations take integers only
        prometheus = start_prometheus(stop=stop, config={
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
            """The scenario's first load while waiting, so the windows the first syncs read hold it, not the
            zero of an idle counter; the LLM server queues none of it (no autoscaler could act yet)."""
            now = time.monotonic()
            world.drive(trace(0.0), now - last_drive[0], backlog=False)
            last_drive[0] = now

        keep_load_flowing()
        targets = sum(len(t) for t in jobs.values())
        if not warm_up(prometheus.url, targets, rule, _shown(args.rules), args.scrape_interval, world, stop,
                       keep_load_flowing):
            return
        wiring = stack.enter_context(
            wire(
                rules=RuleSet(str(args.rules), (rule,)),
                backend=backend,
                prometheus=single_endpoint(prometheus.url),
                # Most of a sync's interval for the queries: on a loaded machine (a 2-core CI runner building
                # an image) a query of the demo's fresh Prometheus can take over half a second, and a failed
                # capacity query would let a scale-up past the guard.
                queries=PromQLSettings(
                    prometheus.url,
                    query_timeout=max(args.interval * 0.8, 0.8),
                    budget=max(args.interval * 0.9, 0.9),
                    max_attempts=2,
                ),
                metrics=metrics,
                clock=clock,
            )
        )
        controller = wiring.controller
        stack.callback(controller.stopping.set)
        print(f"demo: {rule.name} scales {rule.target} between {rule.min_replicas} and {rule.max_replicas}; "
              f"{trace.description}, {args.duration:g} s; Ctrl-C stops", flush=True)
        start = scenario.start(args.duration)
        if start is not None:
            clock.start_at(start)
            print(f"demo: on a pool of {settings.gpu_count} GPUs; the controller's clock starts at "
                  f"{recorder.clock_text(start)} and runs at normal speed", flush=True)
        play(args, trace, world, controller, recorder, stop)


def play(args: argparse.Namespace, trace: Trace, world: SimulatedWorld, controller: Controller,
         recorder: DemoRecorder, stop: threading.Event) -> None:
    """The scenario loop: drive the GPUs every tick, sync the controller every interval."""
    start = last = time.monotonic()
    next_sync = start
    recorder.start_serving(world.llm.tally(), world.llm.objective, world.llm.drain_seconds)
    while not stop.is_set():
        now = time.monotonic()
        elapsed = now - start
        if elapsed >= args.duration:
            break
        world.deployment.set_others(trace.others_at(elapsed))
        snapshot = world.drive(trace(elapsed), now - last)
        recorder.tick(snapshot, now - last)
        last = now
        if now >= next_sync:
            report = controller.sync_once()
            snapshot = world.deployment.snapshot(snapshot.load)
            served = world.llm.tally()
            for outcome in report.outcomes:
                print(recorder.sync(elapsed, snapshot, outcome, report.timestamp, served), flush=True)
            next_sync += args.interval
            if next_sync < time.monotonic():  # a slow sync: skip the missed ones, do not burst
                next_sync = time.monotonic() + args.interval
        stop.wait(max(0.0, min(TICK_SECONDS, next_sync - time.monotonic())))
    recorder.elapsed = min(time.monotonic() - start, args.duration)
    recorder.record_served(world.llm.tally())


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
    problem = scrape_interval_problem(rule, _shown(args.rules), args.scrape_interval)
    if problem is not None:
        print(f"demo: {problem}", file=sys.stderr)
        return 2
    stop = threading.Event()
    received: list[int] = []
    install_stop_handlers(stop, received.append, STOP_SIGNALS)
    recorder = DemoRecorder(rule, _shown(args.rules), args.startup_delay, args.interval)
    code = 0
    try:
        run(args, rule, recorder, stop)
    except Stopped:
        pass  # Ctrl-C while Prometheus was starting: already stopped, the signal sets the exit code
    except NothingToDemo as exc:
        print(f"demo: {exc}", file=sys.stderr)
        code = 2
    except ProcessError as exc:
        print(f"demo: cannot start Prometheus: {exc}", file=sys.stderr)
        code = 1
    except BrokenPipeError:  # `| head`, or a `| tee` closed: the reader left; stop as on Ctrl-C, quietly
        silence_stdout()
        recorder.ended_by = "stopped: the output pipe was closed"
    finally:  # whatever happened, everything is stopped by now: write what was recorded
        if received:
            recorder.ended_by = f"stopped by {signal.Signals(received[0]).name}"
            code = 128 + received[0]
        if recorder.points or received:
            written = recorder.write(args.output)
            try:
                print(f"\n{recorder.summary()}", flush=True)  # the summary.md just written, on the terminal
                for path in written:
                    print(f"demo: wrote {path}", flush=True)
            except BrokenPipeError:
                silence_stdout()
    return code


if __name__ == "__main__":
    raise SystemExit(main())
