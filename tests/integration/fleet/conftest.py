"""A small cluster for `gpu-fleet`: three live simulated exporters (node-a with pods through a fake kubelet
gRPC socket, node-b with a critical GPU, node-c with L4s) and a dead one (node-d: scraped, then stopped, so
its GPU is stale), scraped every second by a real Prometheus on 127.0.0.1."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest

from demo.processes import ManagedProcess, running, start_prometheus
from exporter.simulator.physics import gpu_uuid
from tests.kubelet import GPU, KubeletServer, PodSpec
from tests.measure import Measured, run_captured
from tests.processes import start_exporter, stop_all
from tests.support import wait_for

FLEET = str(Path(sys.executable).parent / "gpu-fleet")
SEEDS = {"node-a": 11, "node-b": 12, "node-c": 13, "node-d": 14}


def gpu_yaml(model: str, load: float) -> str:
    return f"  - {{model: {model}, load: {{pattern: constant, value: {load}, noise: 0}}}}\n"


NODES = {
    # node-a: GPU 0 held by ml/trainer-0 (idle, so the best score of all, yet never chosen)
    "node-a": gpu_yaml("H100", 0.0) + gpu_yaml("H100", 0.6) + gpu_yaml("H100", 0.1),
    # node-b: GPU 1 is critical (a failed row remap), idle and otherwise the best
    "node-b": gpu_yaml("H100", 0.2) + gpu_yaml("H100", 0.0)
    + "faults:\n  - {type: row_remap_failed, gpu: 1}\n",
    "node-c": gpu_yaml("L4", 0.3) + gpu_yaml("L4", 0.3),
    # node-d: an idle H100 whose exporter is stopped once Prometheus has scraped it
    "node-d": gpu_yaml("H100", 0.0),
}
DEAD = "node-d"


def uuid(node: str, index: int) -> str:
    return gpu_uuid(SEEDS[node], index)


def holding(*indexes: int) -> list[PodSpec]:
    """Pods on node-a holding its GPUs `indexes`, one pod each."""
    return [("ml", f"trainer-{i}", [("main", [(GPU, [uuid("node-a", i)])])]) for i in indexes]


@dataclass
class Cluster:
    prometheus: ManagedProcess
    kubelet: KubeletServer
    started: float
    """Unix time the cluster's exporters were started."""

    def fleet(self, *args: str) -> Measured:
        """`gpu-fleet ARGS --prometheus URL` through its entry point, in this process (the tests that need the
        process itself, `wait` and its signals, start it)."""
        return run_captured([FLEET, *args, "--prometheus", self.prometheus.url])

    def query(self, query: str) -> list[dict[str, object]]:
        url = f"{self.prometheus.url}/api/v1/query?{urllib.parse.urlencode({'query': query})}"
        with urllib.request.urlopen(url, timeout=5) as response:
            return list(json.load(response)["data"]["result"])

    def holders(self) -> set[str]:
        return {str(s["metric"]["pod"]) for s in self.query("gpu_allocation_info")}  # type: ignore[index]

    def set_pods(self, pods: Sequence[PodSpec]) -> None:
        """Hold these GPUs, and wait until Prometheus has scraped it."""
        self.kubelet.set_pods(pods)
        wanted = {pod for _, pod, _ in pods}
        wait_for(lambda: self.holders() == wanted, timeout=30, what=f"holders {sorted(wanted)} in Prometheus")


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    workdir = Path(tempfile.mkdtemp(prefix="fleet-", dir="/tmp"))  # short: a unix socket path is <= 107 bytes
    started: list[subprocess.Popen[str]] = []
    kubelet = KubeletServer(str(workdir / "kubelet.sock"))
    kubelet.start()
    try:
        kubelet.set_pods(holding(0))
        config = workdir / "exporter.yaml"
        config.write_text("pod_resources: {refresh_interval_seconds: 0.1}\n")
        targets = []
        exporters = {}
        started_at = time.time()
        for node, gpus in NODES.items():
            sim = workdir / f"{node}.yaml"
            sim.write_text(f"seed: {SEEDS[node]}\ngpus:\n{gpus}")
            socket = kubelet.socket_path if node == "node-a" else str(workdir / "absent.sock")
            base, exporters[node] = start_exporter(
                started, "--min-interval", "0", "--node-name", node, "--simulate-config", str(sim),
                "--config", str(config), "--pod-resources-socket", socket, ready_path="/readyz")
            targets.append(base.removeprefix("http://"))
        prom_config = {"global": {"scrape_interval": "1s"},
                       "scrape_configs": [{"job_name": "gpu", "static_configs": [{"targets": targets}]}]}
        with running(start_prometheus(prom_config, workdir=workdir / "prometheus")) as prometheus:
            cluster = Cluster(prometheus, kubelet, started_at)
            wait_for(lambda: len(cluster.query("gpu_info")) == 8, timeout=60, what="8 GPUs in Prometheus")
            exporters[DEAD].kill()
            exporters[DEAD].wait(timeout=10)
            wait_for(lambda: len(cluster.query("gpu_info")) == 7 and len(cluster.query("up == 0")) == 1
                     and cluster.holders() == {"trainer-0"}
                     and cluster.query('gpu_health_state{state="critical"} == 1')
                     and len(cluster.query("gpu_availability_score")) == 7,
                     timeout=60, what="7 live GPUs, a dead target, one holder and one critical GPU")
            yield cluster
    finally:
        stop_all(started)
        kubelet.stop()
        shutil.rmtree(workdir, ignore_errors=True)
