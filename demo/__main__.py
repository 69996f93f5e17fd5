"""`python -m demo` (the README's `./scripts/demo.sh`): the closed loop on one machine, no cluster, no GPU.

A simulated GPU Deployment (demo.cluster) serves a day of load compressed into a few minutes; its replicas'
GPUs live in simulated NVML nodes served by real exporters (demo.world); a real Prometheus scrapes them; the
real controller (autoscaler.controller) runs the rule's PromQL and scales the Deployment through an in-memory
scale backend (demo.scale_backend), exactly as it patches Kubernetes. Before the first sync it waits (bounded,
saying what for) until the rule's queries read what the first load really is. One line per sync on stdout; at
the end (or on Ctrl-C / SIGTERM / SIGHUP, after stopping everything it started) timeline.csv, demo.png and
summary.md, the summary also on stdout.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import re
import signal
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Sequence
from pathlib import Path

from autoscaler.controller import Controller
from autoscaler.errors import RulesError
from autoscaler.metrics import ControllerMetrics
from autoscaler.policy import MetricSpec, Reason, Rule
from autoscaler.promconfig import single_endpoint
from autoscaler.prometheus import PromQLSettings
from autoscaler.rules import RuleSet, load_rules
from autoscaler.server import MetricsServer
from autoscaler.wiring import wire
from demo.cluster import ClusterSettings, SimulatedDeployment
from demo.processes import ProcessError, Stopped, start_prometheus
from demo.replay import query_range_seconds
from demo.report import DemoRecorder
from demo.scale_backend import InMemoryScaleBackend, RecordedEvent
from demo.traces import Trace, demo_day
from demo.world import SimulatedWorld, served_names_in
from plumbing.cli import duration, install_stop_handlers, silence_stdout

DEMO_RULES = Path(__file__).resolve().parent / "demo-rules.yaml"
REQUESTS_PER_GPU_SECOND = 10.0
"""Requests per second one simulated GPU serves at 100 % (the demo rules' target 9 = 90 % of a GPU)."""
TICK_SECONDS = 0.25
"""How often the load driver updates the GPUs and the request counter."""
READY_TIMEOUT_SECONDS = 30.0
"""Bound on Prometheus scraping every target once."""
SERIES_WAIT_SCRAPES = 5
SERIES_WAIT_SLACK_SECONDS = 2.0
"""Once every target was scraped, a query's series appears within two scrapes (rate() needs two samples):
one that returns nothing after this many scrape intervals (plus the slack) selects series the demo lacks."""
WINDOW_WAIT_CAP_SECONDS = 60.0
"""Longest wait for the rule's largest range window to fill with samples before the scenario starts."""
MAX_SCRAPE_FRACTION = 0.4
"""The scrape interval may be at most 2/5 of the smallest range window: 2.5 scrapes per window leave the two
samples rate() needs in every window, whatever its phase and the scrapes' jitter."""
_BRACKETS = re.compile(r"\[[^\[\]]*\]")

log = logging.getLogger("demo")


class NothingToDemo(Exception):
    """No query of the rule returns a series: the controller could read nothing, there is nothing to show."""


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m demo", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rules", type=Path, default=DEMO_RULES, metavar="FILE",
                        help="rules file to run (default: the demo's own, demo/demo-rules.yaml)")
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
    parser.add_argument("--scrape-interval", type=duration(0.2, 3600.0), default=1.0, metavar="DURATION",
                        help="Prometheus scrape interval, at most 2/5 of the smallest range window in the "
                             "rule's queries (default 1s)")
    args = parser.parse_args(argv)
    return args


def choose_rule(path: Path, name: str | None) -> Rule:
    """The rule to demo; raises RulesError (bad file) or KeyError (no such rule)."""
    rules = load_rules(path)
    if name is not None:
        return rules.get(name)
    if not rules.rules:
        raise KeyError(f"{path} has no rule")
    return rules.rules[0]


def range_windows(query: str) -> list[tuple[str, float]]:
    """Each range selector of a PromQL query as written and in seconds (`rate(x[5s])` -> [("[5s]", 5.0)]),
    a subquery by its range; `[0-9]` in a regex matcher is none."""
    found = [(text, query_range_seconds(text)) for text in _BRACKETS.findall(query)]
    return [(text, seconds) for text, seconds in found if seconds > 0]


def scrape_interval_problem(rule: Rule, path: str, scrape_interval: float) -> str | None:
    """Why `--scrape-interval` is too long for the rule's range windows (rate() needs two samples in its
    window, so with one the metric fails now and then), or None."""
    windows = [(seconds, text, metric)
               for metric in rule.metrics for text, seconds in range_windows(metric.query)]
    if not windows:
        return None
    seconds, text, metric = min(windows, key=lambda found: found[0])
    limit = seconds * MAX_SCRAPE_FRACTION
    if scrape_interval <= limit * (1 + 1e-9):
        return None
    where = f"{path}:{metric.line}" if metric.line else path
    return (f"--scrape-interval: {scrape_interval:g} s is too long for the {text} range window of metric "
            f"{metric.name!r} ({where}): rate() needs two samples in its window; use --scrape-interval "
            f"{limit:g} or less (2/5 of the rule's smallest window)")


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


STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
"""Ctrl-C, a stop request, and the terminal closing all stop the demo cleanly, writing what it recorded."""


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
            zero of an idle counter."""
            now = time.monotonic()
            world.drive(trace(0.0), now - last_drive[0])
            last_drive[0] = now

        keep_load_flowing()
        targets = sum(len(t) for t in jobs.values())
        if not warm_up(prometheus.url, targets, rule, _shown(args.rules), args.scrape_interval, world, stop,
                       keep_load_flowing):
            return
        wiring = stack.enter_context(wire(
            RuleSet(str(args.rules), (rule,)), backend, single_endpoint(prometheus.url),
            PromQLSettings(prometheus.url, query_timeout=max(args.interval / 2, 0.5),
                           budget=max(args.interval * 0.6, 0.5), max_attempts=2),
            metrics=metrics))
        controller = wiring.controller
        stack.callback(controller.stopping.set)
        print(f"demo: {rule.name} scales {rule.target} between {rule.min_replicas} and {rule.max_replicas}; "
              f"{trace.description}, {args.duration:g} s; Ctrl-C stops", flush=True)
        play(args, trace, world, controller, recorder, stop)


def warm_up(url: str, targets: int, rule: Rule, path: str, scrape_interval: float, world: SimulatedWorld,
            stop: threading.Event, between: Callable[[], object]) -> bool:
    """Bounded waits, each announced, until the first sync reads what the scenario's first load really is:
    every target scraped, every query returning a series, the largest range window filled with samples (a
    rate() Prometheus extrapolates over a window not yet filled reads a fraction of the real rate). False when
    `stop` was set; raises NothingToDemo when no query of the rule returns a series."""
    print(f"demo: waiting for Prometheus to scrape its {targets} targets "
          f"(at most {READY_TIMEOUT_SECONDS:g} s)", flush=True)
    scraped = wait_for_scrapes(url, targets, stop, READY_TIMEOUT_SECONDS, between)
    if stop.is_set():
        return False
    if not scraped:
        print(f"demo: warning: Prometheus has not scraped every target after {READY_TIMEOUT_SECONDS:g} s; "
              "the first syncs may fail", flush=True)
    scraped_at = time.monotonic()
    timeout = SERIES_WAIT_SLACK_SECONDS + SERIES_WAIT_SCRAPES * scrape_interval
    print(f"demo: waiting for each query of rule {rule.name} to return a series (at most {timeout:g} s)",
          flush=True)
    empty = set(wait_for_series(url, [m.query for m in rule.metrics], stop, timeout, between))
    if stop.is_set():
        return False
    if empty:
        explain_empty(rule, path, [m for m in rule.metrics if m.query in empty], world, timeout)
    found = [(t, s) for m in rule.metrics if m.query not in empty for t, s in range_windows(m.query)]
    text, window = max(found, key=lambda pair: pair[1], default=("", 0.0))
    wait = min(window, WINDOW_WAIT_CAP_SECONDS) - (time.monotonic() - scraped_at)
    if wait > 0:
        capped = (f" (at most {WINDOW_WAIT_CAP_SECONDS:g} s: the first syncs' rate() reads below the real "
                  "one)" if window > WINDOW_WAIT_CAP_SECONDS else "")
        print(f"demo: waiting {wait:.0f} s until the rule's largest range window {text} holds scraped "
              f"samples, so the first rate() is the real one{capped}", flush=True)
        deadline = time.monotonic() + wait
        while not stop.is_set() and (left := deadline - time.monotonic()) > 0:
            between()
            stop.wait(min(TICK_SECONDS, left))
    return not stop.is_set()


def explain_empty(rule: Rule, path: str, empty: Sequence[MetricSpec], world: SimulatedWorld,
                  waited: float) -> None:
    """Say which metrics find nothing, why (names the demo does not serve, or label values that do not match)
    and what the demo serves; raises NothingToDemo when none of the rule's metrics finds a series."""
    count = ("none" if len(empty) == len(rule.metrics) else f"{len(rule.metrics) - len(empty)}")
    lines = [f"{count} of the {len(rule.metrics)} metrics of rule {rule.name} ({path}:{rule.line}) returned "
             f"a series after {waited:g} s of scrapes; no series for:"]
    for metric in empty:
        served = served_names_in(metric.query)
        why = (f"it selects {', '.join(served)}, which the demo serves: check its label values against these"
               if served else "it names no series the demo serves")
        lines.append(f"  - {metric.name} ({path}:{metric.line}): {metric.query}\n    {why}")
    lines.append(world.describe_series())
    if len(empty) == len(rule.metrics):
        raise NothingToDemo("\n".join([*lines, "Nothing to demo: the controller could read none of the "
                                       "rule's metrics; point their queries at these series."]))
    print("demo: warning: " + "\n".join([*lines, "The syncs will report these metrics failed (NoSeries); "
                                       "the others still scale the Deployment."]), flush=True)


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
