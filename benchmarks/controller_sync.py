"""Benchmark: syncs of 1,000 and 10,000 rules x 2 metrics against a real Prometheus on this machine.

    .venv/bin/python -m benchmarks.controller_sync [--syncs 20] [--large-syncs 100] [--workers 16]

Dry-run with an in-memory scale backend, so the figure is the controller's own cost: all queries
(deduplicated, concurrent, retried within the budget), the decisions, metrics and logs. The second metric
of every rule is a per-group total shared by 10 rules, so 1,000 rules make 1,100 distinct queries.
Two runners in the same run, against the same Prometheus: the per-query one (--prometheus-batch-size 0, one
request per distinct query) and the batched one (the default, 100 queries per request). Requests are counted
by the runner and by Prometheus' own counter. 10,000 rules: the batched runner for 100 syncs, the process's
RSS at syncs 1, 50 and 100; the per-query runner for a few. Then the growth from 10 to 10,000 rules, plotted
to docs/images/controller-sync-growth.png.
"""

from __future__ import annotations

import argparse
import logging
import os
import statistics
import sys
import textwrap
import time
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import requests
from prometheus_client import CollectorRegistry, Gauge, start_http_server

from autoscaler.config.rules import RuleSet, parse_rules
from autoscaler.controller.loop import Controller, ControllerSettings
from autoscaler.kube.backend import ScaleState
from autoscaler.policy import TargetRef
from demo.processes import free_port, running, start_prometheus
from plumbing.prometheus.runner import PromQLRunner, PromQLSettings, QueryResult

GROUP_SIZE = 10


@dataclass
class MemoryBackend:
    """Every target exists with 4 replicas; nothing is ever patched (dry-run)."""

    replicas: int = 4

    def read_scale(self, ref: TargetRef) -> ScaleState:
        return ScaleState(
            spec_replicas=self.replicas, status_replicas=self.replicas, annotations={}, resource_version="1"
        )

    def patch_scale(self, ref: TargetRef, replicas: int) -> None:
        raise AssertionError("dry-run must never patch")

    def emit_event(
        self, ref: TargetRef, type_: Literal["Normal", "Warning"], reason: str, message: str
    ) -> None:
        pass

    def unschedulable_since(self, ref: TargetRef, selector: str | None) -> tuple[float, ...]:
        return ()  # the benchmark's rules have no capacity guard: never asked


class CountingSource:
    """Wraps the runner to record the queries asked for in each sync."""

    def __init__(self, runner: PromQLRunner) -> None:
        self.runner = runner
        self.asked: list[int] = []

    def run_queries(self, queries: Collection[str]) -> Mapping[str, QueryResult]:
        self.asked.append(len(queries))
        return self.runner.run_queries(queries)


def make_rules(n: int) -> RuleSet:
    """`n` rules, parsed 1,000 at a time (a rules file is refused past 250,000 YAML nodes)."""
    chunks = [_make_rules(start, min(start + 1000, n)) for start in range(0, n, 1000)]
    return RuleSet("bench-rules.yaml", tuple(rule for chunk in chunks for rule in chunk.rules))


def _make_rules(first: int, end: int) -> RuleSet:
    parts = ["rules:"]
    for i in range(first, end):
        parts.append(
            textwrap.dedent(f"""
          - name: svc-{i}
            target: {{kind: Deployment, namespace: bench, name: svc-{i}}}
            minReplicas: 1
            maxReplicas: 50
            metrics:
              - {{name: util, query: 'avg(bench_util{{svc="svc-{i}"}})', type: Average, target: 80}}
              - {{name: queue, query: 'sum(bench_queue{{group="g-{i // GROUP_SIZE}"}})', type: Total,
                 target: 50}}
        """)
        )
    return parse_rules("".join(parts), "bench-rules.yaml")


def prometheus_query_requests(url: str) -> float:
    total = 0.0
    for line in requests.get(f"{url}/metrics", timeout=5).text.splitlines():
        if line.startswith("prometheus_http_requests_total{") and 'handler="/api/v1/query"' in line:
            total += float(line.rsplit(" ", 1)[1])
    return total


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))]


def rss_mib() -> float:
    with open(f"/proc/{os.getpid()}/statm") as stream:
        return int(stream.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


@dataclass
class Run:
    """The syncs of one runner over one rule set."""

    rules: int
    batch_size: int
    durations: list[float]
    requests: list[int]
    """Counted by the runner, per sync."""
    served: list[float]
    """Counted by Prometheus, per sync."""
    failures: int
    rss: dict[int, float]
    """Sync number -> the process's RSS in MiB after it."""

    @property
    def median(self) -> float:
        return statistics.median(self.durations)


class SyncClock:
    """The controller's clock as it runs in a cluster: each sync is one interval (15 s) after the previous.

    The benchmark syncs back to back (a sync every few seconds at 10,000 rules); on the wall clock each rule's
    history would then keep every recommendation of the last 300 s scale-down window, several times the 20 a
    15 s interval keeps, and grow for the whole run: memory and time that no cluster sees. The controller
    reads its clock once per sync."""

    def __init__(self, start: float, interval: float = 15.0) -> None:
        self.now = start
        self.interval = interval

    def __call__(self) -> float:
        now = self.now
        self.now += self.interval
        return now


def measure(url: str, rules: RuleSet, syncs: int, batch_size: int, workers: int,
            rss_at: tuple[int, ...] = ()) -> Run:
    runner = PromQLRunner(PromQLSettings(url, query_timeout=5.0, budget=30.0, workers=workers,
                                         batch_size=batch_size))
    controller = Controller(MemoryBackend(), CountingSource(runner), rules, SyncClock(time.time()),
                            settings=ControllerSettings(dry_run=True, workers=workers))
    run = Run(len(rules.rules), batch_size, [], [], [], 0, {})
    try:
        controller.sync_once()  # warm-up: connections, imports, the batch plan's cache
        for number in range(1, syncs + 1):
            sent, served = runner.requests_sent, prometheus_query_requests(url)
            started = time.perf_counter()
            report = controller.sync_once()
            run.durations.append(time.perf_counter() - started)
            run.requests.append(runner.requests_sent - sent)
            # Prometheus counts its own /metrics scrape separately: only the query handler is counted
            run.served.append(prometheus_query_requests(url) - served)
            run.failures += sum(1 for o in report.outcomes if not o.ok)
            if number in rss_at:
                run.rss[number] = rss_mib()
    finally:
        controller.close()
        runner.close()
    return run


def line(name: str, run: Run) -> str:
    return (f"  {name:<26} median {run.median:6.3f} s, p99 {percentile(run.durations, 0.99):6.3f} s, "
            f"requests per sync: runner {statistics.median(run.requests):,.0f}, "
            f"Prometheus {statistics.median(run.served):,.0f}; not ok: {run.failures}")


def plot(growth: dict[int, tuple[Run, Run]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    sizes = sorted(growth)
    fig, ax = plt.subplots(figsize=(6.4, 4.0), dpi=100)
    ax.plot(sizes, [growth[n][0].median for n in sizes], "o-", label="per query (--prometheus-batch-size 0)")
    ax.plot(sizes, [growth[n][1].median for n in sizes], "s-", label="batched (100 per request)")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("rules (x 2 metrics; 1.1 distinct queries per rule)")
    ax.set_ylabel("median sync duration, s")
    ax.set_title("One controller sync against a real Prometheus (2 cores)")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend()
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.controller_sync", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--syncs", type=int, default=20, help="syncs per runner at 1,000 rules")
    parser.add_argument("--large", type=int, default=10_000, help="rules of the large run")
    parser.add_argument("--large-syncs", type=int, default=100, help="syncs of the batched runner there")
    parser.add_argument("--large-per-query-syncs", type=int, default=3)
    parser.add_argument("--growth", default="10,100,1000", help="further rule counts for the plot")
    parser.add_argument("--growth-syncs", type=int, default=5)
    parser.add_argument("--batch-size", type=int, default=100)
    parser.add_argument("--workers", type=int, default=16)
    parser.add_argument("--plot", type=Path, default=Path("docs/images/controller-sync-growth.png"))
    args = parser.parse_args(argv)
    logging.getLogger("autoscaler").setLevel(logging.WARNING)  # one decision line per rule: keep stdout clean

    largest = args.large
    registry = CollectorRegistry()
    util = Gauge("bench_util", "GPU utilization percent", ["svc"], registry=registry)
    queue = Gauge("bench_queue", "queue depth", ["svc", "group"], registry=registry)
    for i in range(largest):
        util.labels(svc=f"svc-{i}").set(60 + i % 40)
        queue.labels(svc=f"svc-{i}", group=f"g-{i // GROUP_SIZE}").set(i % 30)
    port = free_port()
    server, thread = start_http_server(port, addr="127.0.0.1", registry=registry)
    config: dict[str, object] = {
        "global": {"scrape_interval": "5s"},
        "scrape_configs": [{"job_name": "bench", "static_configs": [{"targets": [f"127.0.0.1:{port}"]}]}],
    }
    growth: dict[int, tuple[Run, Run]] = {}
    try:
        with running(start_prometheus(config)) as prom:
            probe = f"count(bench_util) == {largest}"
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                result = requests.get(f"{prom.url}/api/v1/query", params={"query": probe}, timeout=5).json()
                if result["data"]["result"]:
                    break
                time.sleep(0.2)
            else:
                print("Prometheus never scraped the benchmark target", file=sys.stderr)
                return 1
            small = make_rules(1000)
            per_query = measure(prom.url, small, args.syncs, 0, args.workers)
            batched = measure(prom.url, small, args.syncs, args.batch_size, args.workers)
            growth[1000] = (per_query, batched)
            print(f"1,000 rules x 2 metrics = 1,100 distinct queries, dry-run, {args.workers} workers, "
                  f"{args.syncs} syncs each")
            print(line("per query", per_query))
            print(line(f"batched ({args.batch_size} per request)", batched))
            print(f"  batched / per query: time {batched.median / per_query.median:.2f}x "
                  f"(speed-up {per_query.median / batched.median:.1f}x), requests "
                  f"{statistics.median(batched.served) / statistics.median(per_query.served):.3f}x "
                  "(target: median <= 0.25 s, <= 30 requests)")

            large = make_rules(largest)
            big_batched = measure(prom.url, large, args.large_syncs, args.batch_size, args.workers,
                                  rss_at=(1, args.large_syncs // 2, args.large_syncs))
            big_per_query = measure(prom.url, large, args.large_per_query_syncs, 0, args.workers)
            growth[largest] = (big_per_query, big_batched)
            print(f"{largest:,} rules x 2 metrics = {largest * 11 // 10:,} distinct queries: batched "
                  f"{args.large_syncs} syncs, per query {args.large_per_query_syncs}")
            print(line("per query", big_per_query))
            print(line(f"batched ({args.batch_size} per request)", big_batched))
            rss = ", ".join(f"sync {n}: {v:.1f} MiB" for n, v in sorted(big_batched.rss.items()))
            print(f"  batched / per query: time {big_batched.median / big_per_query.median:.2f}x "
                  f"(speed-up {big_per_query.median / big_batched.median:.1f}x); RSS of the whole benchmark "
                  f"process (controller, target, client) {rss} (target: median <= 2.5 s, <= 200 MiB, flat)")

            for n in (int(x) for x in args.growth.split(",") if x.strip()):
                if n not in growth:
                    rules = make_rules(n)
                    growth[n] = (measure(prom.url, rules, args.growth_syncs, 0, args.workers),
                                 measure(prom.url, rules, args.growth_syncs, args.batch_size, args.workers))
            print("growth (median sync, per query -> batched):")
            for n in sorted(growth):
                print(f"  {n:>6,} rules: {growth[n][0].median:7.3f} s -> {growth[n][1].median:6.3f} s")
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)
    plot(growth, args.plot)
    print(f"plot: {args.plot}")
    rss_values = list(big_batched.rss.values())
    ok = (batched.median <= 0.25 and max(batched.served) <= 30 and big_batched.median <= 2.5
          and max(rss_values) <= 200 and batched.failures == big_batched.failures == 0)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
