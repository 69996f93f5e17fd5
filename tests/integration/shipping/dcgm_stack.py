"""A real Prometheus scraping a real simulated `gpu-exporter` through the shipped scrape job, with
rules/gpu-dcgm-compat.rules.yaml loaded: what the DCGM query tests run dcgm-exporter users' queries on.

The exporter runs on node gpu-node-1 (the node our users' guide queries) with three GPUs: GPU 0 held by one
pod (a fake kubelet pod-resources server), GPU 1 held by none and an XID 13 on it from the start, GPU 2
(an A100) held by none. The queries come from dcgm_queries.yaml, copied unchanged from their sources.
"""

from __future__ import annotations

import contextlib
import functools
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from demo.processes import free_port, running, start_prometheus, wait_http_ok
from tests.integration.shipping.conftest import prom_api, query
from tests.support import stop_process, wait_for
from tests.unit.shipping.promql_names import PROFILING_EXPORTER_NAMES, ROOT, metric_names
from tests.unit.shipping.scrape_jobs import as_static_job, pod_meta_labels, shipped_jobs

BIN = Path(sys.executable).parent
NODE = "gpu-node-1"
DCGM_RULES = ROOT / "rules" / "gpu-dcgm-compat.rules.yaml"
QUERIES = yaml.safe_load((Path(__file__).parent / "dcgm_queries.yaml").read_text())
SIM_CONFIG = """
gpus:
  - {model: H100, count: 2, load: {pattern: sine, base: 0.6, amplitude: 0.3, period_seconds: 60},
     processes: [{pid: 4242, memory_gib: 20}]}
  - {model: A100, count: 1, load: {pattern: constant, value: 0.3, noise: 0}}
faults:
  - {type: xid, gpu: 1, at: 0, code: 13}
"""
HOLDER = ("ml", "embed-7d9f8b6c5-x2x4z", "server")


@dataclass(frozen=True)
class Query:
    """One query as its source has it, and where it comes from (for test ids and messages)."""

    source: str
    title: str
    expr: str


@functools.cache
def dcgm_sources() -> dict[str, frozenset[str]]:
    """DCGM name -> the exporter series its recording rule reads (parsed once: every worker collects the
    tests that ask)."""
    groups = yaml.safe_load(DCGM_RULES.read_text())["groups"]
    recorded = {rule["record"]: metric_names(rule["expr"]) for group in groups for rule in group["rules"]}
    resolved: dict[str, set[str]] = {}
    for name, reads in recorded.items():
        names = set(reads)
        while helpers := names & (set(recorded) - {name}):
            names = (names - helpers) | set().union(*(recorded[h] for h in helpers))
        resolved[name] = names
    return {name: frozenset(reads) for name, reads in resolved.items() if name.startswith("DCGM_")}


def needs_profiling(expr: str) -> bool:
    """Whether `expr` reads a DCGM series recorded from the exporter's profiling/NVLink/memory-temperature
    series (see PROFILING_EXPORTER_NAMES)."""
    sources = dcgm_sources()
    return any(sources.get(name, frozenset()) & PROFILING_EXPORTER_NAMES for name in metric_names(expr))


def all_queries() -> list[Query]:
    guide = [Query("guide", q["title"], q["expr"]) for q in QUERIES["guide"]]
    panels = [Query("dashboard 12239", p["title"], p["expr"]) for p in QUERIES["dashboard_12239"]["panels"]]
    return guide + panels


def queries(*, profiling: bool) -> list[Query]:
    return [q for q in all_queries() if needs_profiling(q.expr) == profiling]


def query_id(q: Query) -> str:
    return f"{q.source}:{q.title}"


@dataclass
class DcgmStack:
    prometheus_url: str
    exporter_url: str

    def query(self, expr: str) -> list[dict[str, Any]]:
        return query(self.prometheus_url, expr)

    def label_values(self, spec: str) -> list[str]:
        """Grafana's `label_values(metric, label)`, as its Prometheus data source asks the series API."""
        match = re.fullmatch(r"label_values\((\w+),\s*(\w+)\)", spec)
        assert match, spec
        metric, label = match.groups()
        data = prom_api(self.prometheus_url, f"/api/v1/label/{label}/values", {"match[]": metric})
        return sorted(data)

    def dashboard_expr(self, expr: str) -> str:
        """`expr` with the dashboard's variables as Grafana substitutes "All" of a multi-value variable
        without a custom all value: every value, regex-escaped, as `(v1|v2|...)`."""
        values = {name: self.label_values(spec)
                  for name, spec in QUERIES["dashboard_12239"]["variables"].items()}
        for name, found in values.items():
            assert found, f"variable ${name} has no values"

        def regex(match: re.Match[str]) -> str:
            return "(" + "|".join(re.escape(v).replace("\\", "\\\\") for v in values[match.group(1)]) + ")"

        return re.sub(r"\$\{?(\w+)\}?", regex, expr)

    def run(self, q: Query) -> list[dict[str, Any]]:
        expr = self.dashboard_expr(q.expr) if q.source.startswith("dashboard") else q.expr
        return self.query(expr)


def _start_kubelet(stack: contextlib.ExitStack) -> list[str]:
    """A fake kubelet pod-resources server holding GPU 0 for HOLDER, as exporter flags."""
    from exporter.simulator.physics import gpu_uuid
    from tests.kubelet import KubeletServer

    socket_dir = tempfile.mkdtemp(prefix="podres-", dir="/tmp")  # unix socket paths are short
    stack.callback(shutil.rmtree, socket_dir, ignore_errors=True)
    kubelet = KubeletServer(os.path.join(socket_dir, "kubelet.sock"))
    kubelet.start()
    stack.callback(kubelet.stop)
    namespace, pod, container = HOLDER
    kubelet.set_pods([(namespace, pod, [(container, [("nvidia.com/gpu", [gpu_uuid(1, 0)])])])])
    return ["--pod-resources-socket", kubelet.socket_path]


def _start_exporter(stack: contextlib.ExitStack, work: Path, port: int, flags: list[str]) -> None:
    log = stack.enter_context((work / "exporter.log").open("wb"))
    proc = subprocess.Popen([str(BIN / "gpu-exporter"), "--simulate-config", str(work / "sim.yaml"),
                             "--address", "127.0.0.1", "--port", str(port), "--node-name", NODE, *flags],
                            stdout=subprocess.DEVNULL, stderr=log)

    stack.callback(stop_process, proc)  # type: ignore[arg-type]
    wait_http_ok(f"http://127.0.0.1:{port}/metrics", 30, proc)  # type: ignore[arg-type]


@contextlib.contextmanager
def dcgm_stack(work: Path) -> Iterator[DcgmStack]:
    """Start the stack, wait until the DCGM series are recorded from several scrapes; stop it all after."""
    (work / "sim.yaml").write_text(SIM_CONFIG)
    port = free_port()
    with contextlib.ExitStack() as cleanup:
        _start_exporter(cleanup, work, port, _start_kubelet(cleanup))
        target = (f"127.0.0.1:{port}", pod_meta_labels("gpu-exporter", "gpu-exporter-x2x4z", "gpu-autoscaler",
                                                       NODE))
        config = {"global": {"scrape_interval": "500ms", "evaluation_interval": "500ms"}, "scrape_configs": [
            as_static_job(shipped_jobs()["gpu-exporter"], [target], "500ms")]}
        prometheus = cleanup.enter_context(running(start_prometheus(
            config, rule_files={DCGM_RULES.name: DCGM_RULES.read_text()})))
        stack = DcgmStack(prometheus.url, f"http://127.0.0.1:{port}")
        wait_for(lambda: stack.query("count_over_time(DCGM_FI_DEV_GPU_UTIL[1m]) > 2"), 60,
                 "DCGM_FI_DEV_GPU_UTIL recorded from several scrapes")
        wait_for(lambda: stack.query('DCGM_FI_DEV_GPU_UTIL{pod!=""}'), 60, "GPU 0 attributed to its pod")
        wait_for(lambda: stack.query('DCGM_FI_DEV_XID_ERRORS{err_code="13"}'), 60, "the XID 13 recorded")
        yield stack
