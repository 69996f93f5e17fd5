"""Benchmark: one controller sync of 1,000 rules x 2 metrics against a real Prometheus on this machine.

    .venv/bin/python -m benchmarks.controller_sync [--rules 1000] [--syncs 20] [--workers 16]

Dry-run with an in-memory scale backend, so the figure is the controller's own cost: all queries
(deduplicated, concurrent, retried within the budget), 1,000 decisions, metrics and logs. The second metric
of every rule is a per-group total shared by 10 rules, so 2,000 metric instances make 1,100 distinct
queries: the runner must send exactly one request per distinct query (counted both by the runner and by
Prometheus' own request counter).
Baseline, measured in the same run: the naive loop, one sequential request per metric instance.
"""

from __future__ import annotations

import argparse
import logging
import statistics
import sys
import textwrap
import time
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Literal

import requests
from prometheus_api_client import PrometheusConnect
from prometheus_client import CollectorRegistry, Gauge, start_http_server

from autoscaler.controller import Controller, ControllerSettings
from autoscaler.kube import ScaleState
from autoscaler.policy import TargetRef
from autoscaler.prometheus import PromQLRunner, PromQLSettings, QueryResult
from autoscaler.rules import RuleSet, parse_rules
from demo.processes import free_port, running, start_prometheus

GROUP_SIZE = 10


@dataclass
class MemoryBackend:
    """Every target exists with 4 replicas; nothing is ever patched (dry-run)."""

    replicas: int = 4

    def read_scale(self, ref: TargetRef) -> ScaleState:
        return ScaleState(self.replicas, self.replicas, {}, "1")

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
    parts = ["rules:"]
    for i in range(n):
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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.controller_sync", description=__doc__)
    parser.add_argument("--rules", type=int, default=1000)
    parser.add_argument("--syncs", type=int, default=20)
    parser.add_argument("--baseline-runs", type=int, default=3)
    parser.add_argument("--workers", type=int, default=16)
    args = parser.parse_args(argv)
    logging.getLogger("autoscaler").setLevel(logging.WARNING)  # one decision line per rule: keep stdout clean

    registry = CollectorRegistry()
    util = Gauge("bench_util", "GPU utilization percent", ["svc"], registry=registry)
    queue = Gauge("bench_queue", "queue depth", ["svc", "group"], registry=registry)
    for i in range(args.rules):
        util.labels(svc=f"svc-{i}").set(60 + i % 40)
        queue.labels(svc=f"svc-{i}", group=f"g-{i // GROUP_SIZE}").set(i % 30)
    port = free_port()
    server, thread = start_http_server(port, addr="127.0.0.1", registry=registry)
    config: dict[str, object] = {
        "global": {"scrape_interval": "1s"},
        "scrape_configs": [{"job_name": "bench", "static_configs": [{"targets": [f"127.0.0.1:{port}"]}]}],
    }
    rules = make_rules(args.rules)
    distinct = len({m.query for r in rules.rules for m in r.metrics})
    instances = sum(len(r.metrics) for r in rules.rules)
    try:
        with running(start_prometheus(config)) as prom:
            probe = f"count(bench_util) == {args.rules}"
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline:
                result = requests.get(f"{prom.url}/api/v1/query", params={"query": probe}, timeout=5).json()
                if result["data"]["result"]:
                    break
                time.sleep(0.2)
            else:
                print("Prometheus never scraped the benchmark target", file=sys.stderr)
                return 1
            runner = PromQLRunner(
                PromQLSettings(prom.url, query_timeout=5.0, budget=10.0, workers=args.workers)
            )
            source = CountingSource(runner)
            controller = Controller(
                MemoryBackend(),
                source,
                rules,
                time.time,
                settings=ControllerSettings(dry_run=True, workers=args.workers),
            )
            durations, requests_per_sync, prom_requests = [], [], []
            failures = 0
            try:
                controller.sync_once()  # warm-up: connections, imports
                for _ in range(args.syncs):
                    sent, served = runner.requests_sent, prometheus_query_requests(prom.url)
                    started = time.perf_counter()
                    report = controller.sync_once()
                    durations.append(time.perf_counter() - started)
                    requests_per_sync.append(runner.requests_sent - sent)
                    # Prometheus counts its own /metrics scrape separately: only the query handler is counted
                    prom_requests.append(prometheus_query_requests(prom.url) - served)
                    failures += sum(1 for o in report.outcomes if not o.ok)
            finally:
                controller.close()
                runner.close()

            client = PrometheusConnect(url=prom.url)
            baseline = []
            for _ in range(args.baseline_runs):
                started = time.perf_counter()
                for rule in rules.rules:
                    for metric in rule.metrics:
                        client.custom_query(metric.query)
                baseline.append(time.perf_counter() - started)
            client.close()
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)

    median = statistics.median(durations)
    base = statistics.median(baseline)
    print(
        f"controller sync: {args.rules} rules x 2 metrics = {instances} metric instances, "
        f"{distinct} distinct queries, dry-run, {args.workers} workers, {args.syncs} syncs"
    )
    print(
        f"  sync duration median {median:.3f} s, p99 {percentile(durations, 0.99):.3f} s, "
        f"min {min(durations):.3f} s, max {max(durations):.3f} s (target: median < 2 s)"
    )
    print(
        f"  HTTP requests per sync: runner {statistics.median(requests_per_sync):.0f}, "
        f"Prometheus-counted {statistics.median(prom_requests):.0f} "
        f"(distinct queries {distinct}; target: at most one request per distinct query)"
    )
    print(f"  rules not synced ok: {failures}")
    print(
        f"baseline (sequential, one request per metric instance, {instances} requests): "
        f"median {base:.3f} s over {args.baseline_runs} runs"
    )
    print(f"speed-up vs baseline: {base / median:.1f}x")
    ok = median < 2.0 and max(requests_per_sync) <= distinct and failures == 0
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
