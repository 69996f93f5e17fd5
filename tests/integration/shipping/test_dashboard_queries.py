"""Every dashboard query runs on a real Prometheus that scraped the simulated exporter (`gpu-exporter
--simulate-config`) and a dry-run autoscaler (`gpu-autoscaler run --dry-run` against the fake API server of
the controller tests), with the shipped recording rules loaded and template variables substituted as Grafana
would ("All"): no query errors, instant or range, and the main panels return data.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from demo.processes import ManagedProcess, ProcessError, free_port, running, start_prometheus, wait_http_ok
from tests.integration.shipping.conftest import prom_api, query
from tests.prom import reload_scrape_configs
from tests.support import stop_process, wait_for
from tests.unit.shipping.promql_names import ROOT, RULE_FILES
from tests.unit.shipping.scrape_jobs import as_static_job, pod_meta_labels, shipped_jobs

pytestmark = pytest.mark.integration

BIN = Path(sys.executable).parent
NODE = "gpu-node-1"
VARIABLES = {"node": ".*", "gpu": ".*", "namespace": ".*", "rule": ".*", "__rate_interval": "1m",
             "__range": "1m", "__range_s": "60", "__interval": "1s"}
SIM_CONFIG = """
gpus:
  - {model: H100, count: 2, load: {pattern: sine, base: 0.6, amplitude: 0.3, period_seconds: 60},
     processes: [{pid: 4242, memory_gib: 20}]}
  - {model: A100, count: 1, load: {pattern: constant, value: 0.02, noise: 0}}
"""
RULES = """
rules:
  - name: embed
    target: {kind: Deployment, namespace: ml, name: embed}
    minReplicas: 1
    maxReplicas: 4
    metrics:
      - {name: gpu_util, query: '100 * avg(gpu_utilization_ratio)', type: Average, target: 50}
"""
MAIN_PANELS = {
    "gpu-fleet.json": {"GPUs up", "Average utilization", "Memory used", "Power", "Hottest GPU",
                       "GPU utilization", "Temperature", "Power draw and limit", "SM clock", "Memory clock",
                       "Energy per node over the time range", "GPU up"},
    "gpu-autoscaler.json": {"Leader", "Rules loaded", "Dry run", "Since last successful sync",
                            "Current vs desired replicas", "Metric value vs target", "Metric value / target",
                            "Sync duration", "Limiting reason"},
    "gpu-workloads.json": {"GPUs allocated", "GPUs busy by namespace", "Utilization by workload",
                           "Utilization by pod"},
}


def holders() -> list[tuple[str, str, list[tuple[str, list[tuple[str, list[str]]]]]]]:
    """Pods holding the simulated GPUs (kubelet pod-resources shape): GPU 0 exclusive, GPU 1 time-sliced
    between two namespaces, GPU 2 free."""
    from exporter.simulator.physics import gpu_uuid

    gpu0, gpu1 = gpu_uuid(1, 0), gpu_uuid(1, 1)
    return [("ml", "embed-7d9f8b6c5-x2x4z", [("server", [("nvidia.com/gpu", [gpu0])])]),
            ("ml", "asr-0", [("server", [("nvidia.com/gpu", [f"{gpu1}::0"])])]),
            ("research", "notebook-0", [("jupyter", [("nvidia.com/gpu", [f"{gpu1}::1"])])])]


def yaml_groups() -> list[dict[str, object]]:
    return [group for path in RULE_FILES for group in yaml.safe_load(path.read_text())["groups"]]


def substitute(expr: str) -> str:
    return re.sub(r"\$\{?(\w+)\}?", lambda m: VARIABLES[m.group(1)], expr)


def cli_help(*argv: str) -> str:
    """`argv --help`; a missing command or flag is a regression the fixture must report, not skip."""
    result = subprocess.run([str(BIN / argv[0]), *argv[1:], "--help"], capture_output=True, text=True,
                            timeout=60, check=False)
    assert result.returncode == 0, f"`{' '.join(argv)} --help` failed: {result.stderr.strip()}"
    return result.stdout


@dataclass
class Stack:
    prometheus: ManagedProcess


def _popen(stack: contextlib.ExitStack, argv: list[str], log: Path) -> subprocess.Popen[bytes]:
    """Start a process whose stderr goes to `log`; the stack stops it (TERM, then KILL) and closes the log."""
    log_file = stack.enter_context(log.open("wb"))
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=log_file)

    stack.callback(stop_process, proc)  # type: ignore[arg-type]
    return proc


def _start_kubelet(stack: contextlib.ExitStack) -> list[str]:
    """A fake kubelet pod-resources server holding holders(), as exporter flags."""
    assert "--pod-resources-socket" in cli_help("gpu-exporter"), "gpu-exporter lacks --pod-resources-socket"
    from tests.kubelet import KubeletServer

    socket_dir = tempfile.mkdtemp(prefix="podres-", dir="/tmp")  # unix socket paths are short
    stack.callback(shutil.rmtree, socket_dir, ignore_errors=True)
    kubelet = KubeletServer(os.path.join(socket_dir, "kubelet.sock"))
    kubelet.start()
    stack.callback(kubelet.stop)
    kubelet.set_pods(holders())
    return ["--pod-resources-socket", kubelet.socket_path]


def _serve(stack: contextlib.ExitStack, argv_at: Callable[[int], list[str]], log: Path,
           attempts: int = 3) -> int:
    """Start a server on a free port and wait until its /metrics answers; return the port. The port can be
    taken between choosing and binding it (another worker's server, an outgoing connection's ephemeral port):
    a server that exits before answering starts again on another port, up to `attempts` times."""
    for attempt in range(1, attempts + 1):
        port = free_port()
        proc = _popen(stack, argv_at(port), log)
        try:
            wait_http_ok(f"http://127.0.0.1:{port}/metrics", 60, proc=proc)
            return port
        except ProcessError as e:
            if proc.poll() is None or attempt == attempts:
                raise AssertionError(f"{e}\n--- {log.name}:\n{_tail(log)}") from None
    raise AssertionError("unreachable")


def _tail(log: Path, lines: int = 30) -> str:
    return "\n".join(log.read_text(errors="replace").splitlines()[-lines:])


def _start_autoscaler(stack: contextlib.ExitStack, work: Path, prometheus_url: str) -> int:
    """`gpu-autoscaler run --dry-run` against the controller tests' fake API server; returns its metrics
    port."""
    cli_help("gpu-autoscaler", "run")
    from tests.fake_kube.apiserver import FakeApiServer

    apiserver = FakeApiServer().start()
    stack.callback(apiserver.stop)
    apiserver.add("embed", 2, namespace="ml")
    (work / "kubeconfig").write_text(apiserver.kubeconfig())
    (work / "rules.yaml").write_text(RULES)
    return _serve(stack, lambda port: [
        str(BIN / "gpu-autoscaler"), "run", "--rules", str(work / "rules.yaml"),
        "--prometheus", prometheus_url, "--interval", "1s", "--dry-run",
        "--kubeconfig", str(work / "kubeconfig"), "--metrics-port", str(port)], work / "autoscaler.log")


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    """The exporter and the autoscaler each start on a port they could bind; Prometheus, started between
    them (the autoscaler needs its URL), learns both targets by a reload."""
    work = tmp_path_factory.mktemp("dashboards")
    (work / "sim.yaml").write_text(SIM_CONFIG)
    with contextlib.ExitStack() as cleanup:
        attribution = _start_kubelet(cleanup)
        exporter_port = _serve(cleanup, lambda port: [
            str(BIN / "gpu-exporter"), "--simulate-config", str(work / "sim.yaml"), "--address", "127.0.0.1",
            "--port", str(port), "--node-name", NODE, *attribution], work / "exporter.log")
        config = {"global": {"scrape_interval": "500ms", "evaluation_interval": "500ms"}}
        rule_files = {path.name: path.read_text() for path in RULE_FILES}
        prometheus = cleanup.enter_context(running(start_prometheus(config, rule_files=rule_files)))
        autoscaler_port = _start_autoscaler(cleanup, work, prometheus.url)
        jobs = shipped_jobs()
        exporter_target = (f"127.0.0.1:{exporter_port}",
                           pod_meta_labels("gpu-exporter", "gpu-exporter-x2x4z", "gpu-autoscaler", NODE))
        autoscaler_target = (f"127.0.0.1:{autoscaler_port}",
                             pod_meta_labels("gpu-autoscaler", "gpu-autoscaler-x2", "gpu-autoscaler", "n2"))
        reload_scrape_configs(prometheus, [
            as_static_job(jobs["gpu-exporter"], [exporter_target], "500ms"),
            as_static_job(jobs["gpu-autoscaler"], [autoscaler_target], "500ms")])

        def has(expr: str) -> list[dict[str, object]]:
            return query(prometheus.url, expr)

        def wait(expr: str, what: str) -> None:
            try:
                wait_for(lambda: has(expr), 60, what)
            except AssertionError as e:
                logs = "".join(f"\n--- {name}:\n{_tail(work / name)}"
                               for name in ("exporter.log", "autoscaler.log"))
                raise AssertionError(f"{e}{logs}\n--- prometheus:\n{prometheus.log_tail()}") from None

        wait("node:gpu_utilization_ratio:avg", "recorded node series")
        wait("count_over_time(gpu_up[1m]) > 4", "several scrapes")
        wait("increase(gpu_autoscaler_sync_duration_seconds_count[1m]) > 1", "autoscaler syncs scraped twice")
        wait("gpu_allocation_info", "GPUs attributed to the kubelet's pods")
        yield Stack(prometheus)


def panels() -> list[tuple[str, dict[str, object]]]:
    return [(path.name, panel) for path in sorted((ROOT / "dashboards").glob("*.json"))
            for panel in json.loads(path.read_text())["panels"] if panel["type"] != "row"]


@pytest.mark.parametrize(("dashboard", "panel"), panels(),
                         ids=[f"{d}:{p['title']}" for d, p in panels()])
def test_panel_queries_run_without_errors(stack: Stack, dashboard: str, panel: dict[str, object]) -> None:
    now = time.time()
    for target in panel["targets"]:  # type: ignore[attr-defined]
        expr = substitute(target["expr"])
        query(stack.prometheus.url, expr)
        if not target["instant"]:
            prom_api(stack.prometheus.url, "/api/v1/query_range",
                     {"query": expr, "start": str(now - 30), "end": str(now), "step": "1"})


def _has_data(stack: Stack, panel: dict[str, object]) -> bool:
    return any(query(stack.prometheus.url, substitute(t["expr"])) for t in panel["targets"])  # type: ignore


def _check_main_panels(stack: Stack, dashboard: str) -> None:
    by_title = {p["title"]: p for d, p in panels() if d == dashboard}
    assert MAIN_PANELS[dashboard] <= set(by_title)
    empty = [title for title in sorted(MAIN_PANELS[dashboard]) if not _has_data(stack, by_title[title])]
    assert not empty, f"{dashboard}: main panels without data: {empty}"


def test_fleet_main_panels_have_data(stack: Stack) -> None:
    _check_main_panels(stack, "gpu-fleet.json")


def test_autoscaler_main_panels_have_data(stack: Stack) -> None:
    _check_main_panels(stack, "gpu-autoscaler.json")


def test_workload_main_panels_have_data(stack: Stack) -> None:
    assert query(stack.prometheus.url, "gpu_allocation_info"), "no GPU attributed to the kubelet's pods"
    _check_main_panels(stack, "gpu-workloads.json")


def test_template_variables_resolve(stack: Stack) -> None:
    nodes = prom_api(stack.prometheus.url, "/api/v1/label/node/values", {"match[]": "gpu_up"})
    assert NODE in nodes
    selector = f'gpu_up{{node=~"{NODE}"}}'
    gpus = prom_api(stack.prometheus.url, "/api/v1/label/gpu/values", {"match[]": selector})
    assert gpus == ["0", "1", "2"]


def test_every_shipped_rule_evaluates_cleanly_on_real_series(stack: Stack) -> None:
    """No rule fails on what the real exporter and autoscaler serve (e.g. many-to-many matching)."""
    def evaluated() -> list[dict[str, object]] | None:
        rules = [rule for group in prom_api(stack.prometheus.url, "/api/v1/rules", {})["groups"]
                 for rule in group["rules"]]
        done = rules and all(rule.get("lastEvaluation", "").startswith("20") for rule in rules)
        return rules if done else None

    rules = wait_for(evaluated, 30, "every rule evaluated once")
    failing = {rule["name"]: rule.get("lastError") for rule in rules if rule["health"] != "ok"}
    assert not failing
    assert len(rules) == sum(len(g["rules"]) for g in yaml_groups())  # type: ignore[arg-type]


def test_recording_rules_aggregate_the_real_exporter(stack: Stack) -> None:
    def values(expr: str) -> dict[str, float]:
        return {"/".join(v for k, v in sorted(s["metric"].items()) if k in ("namespace", "workload", "node")):
                float(s["value"][1]) for s in query(stack.prometheus.url, expr)}

    assert values("node:gpus:count") == {NODE: 3}
    assert query(stack.prometheus.url, "gpu_allocation_info"), "no GPU attributed to the kubelet's pods"
    assert values("node:gpus_allocated:count") == {NODE: 2}  # the shared GPU counts once
    assert values("namespace:gpus_allocated:count") == {"ml": 2, "research": 1}
    workloads = set(values("namespace_workload:gpus_allocated:count"))
    assert workloads == {"ml/embed", "ml/asr", "research/notebook"}


def test_capacity_rules_count_the_real_exporters_free_gpu(stack: Stack) -> None:
    """GPU 0 is held, GPU 1 time-sliced between two pods, GPU 2 held by none: one GPU free on the node and in
    the cluster. No kube-state-metrics is scraped: its capacity rules return nothing (a failed capacity query,
    which limits nothing), never a 0 that would stop every scale-up."""
    def free() -> dict[str, float]:
        found = query(stack.prometheus.url, "node:gpus_unallocated:count or cluster:gpus_unallocated:sum")
        return {str(s["metric"].get("node", "cluster")): float(s["value"][1]) for s in found}

    assert query(stack.prometheus.url, "gpu_allocation_info"), "no GPU attributed to the kubelet's pods"
    wait_for(lambda: free() == {NODE: 1.0, "cluster": 1.0}, 30, "one free GPU recorded")
    assert query(stack.prometheus.url, "cluster:kube_gpus_free:sum") == []
