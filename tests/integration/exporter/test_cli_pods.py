"""`gpu-exporter` as a process with its Kubernetes flags: --pod-resources-socket (a real gRPC server),
--proc-root, --config; `status` columns; a bad --config exits 2 with one message."""

from __future__ import annotations

import json
import os
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from demo.processes import promtool
from tests import REPO_ROOT
from tests.integration.exporter.pods.test_exporter_pods import write_driver_minors
from tests.kubelet import GPU, NODE_YAML, Claim, KubeletServer, node_pods
from tests.processes import run_exporter, start_exporter, stop_all
from tests.scrape import fetch, samples
from tests.support import wait_for

pytestmark = pytest.mark.integration

FAST_CONFIG = "pod_resources: {refresh_interval_seconds: 0.1}\n"


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return run_exporter(*args)


@pytest.fixture
def files(tmp_path: Path) -> dict[str, str]:
    node = tmp_path / "node.yaml"
    node.write_text(NODE_YAML)
    config = tmp_path / "exporter.yaml"
    config.write_text(FAST_CONFIG)
    return {"node": str(node), "config": str(config)}


@pytest.fixture
def processes() -> Iterator[list[subprocess.Popen[str]]]:
    started: list[subprocess.Popen[str]] = []
    yield started
    stop_all(started)


def serve(started: list[subprocess.Popen[str]], *args: str) -> tuple[str, subprocess.Popen[str]]:
    return start_exporter(started, "--min-interval", "0", "--node-name", "node-a", *args,
                          ready_path="/readyz")


def scrape(base: str) -> str:
    return fetch(base + "/metrics")


def series(text: str, name: str) -> list[tuple[dict[str, str], float]]:
    return samples(text).get(name, [])


def test_exporter_process_attributes_gpus_through_the_socket_flag(
        kubelet: KubeletServer, proc_root: str, files: dict[str, str],
        processes: list[subprocess.Popen[str]]) -> None:
    kubelet.set_pods(node_pods())
    base, proc = serve(processes, "--simulate-config", files["node"], "--config", files["config"],
                       "--pod-resources-socket", kubelet.socket_path, "--proc-root", proc_root)
    # four holders, each with memory; utilization for GPUs 0 and 1 only (NVML has none for the MIG GPU 2)
    wait_for(lambda: len(series(scrape(base), "gpu_pod_memory_used_bytes")) == 4
               and {s["gpu"] for s, _ in series(scrape(base), "gpu_pod_utilization_ratio")} == {"0", "1"},
             timeout=20)
    text = scrape(base)
    assert {labels["gpu"] for labels, _ in series(text, "gpu_utilization_ratio")} == {"0", "1", "3"}
    device = {labels["gpu"]: labels["pod"] for labels, _ in series(text, "gpu_memory_used_bytes")}
    assert device == {"0": "trainer-0", "1": "", "2": "", "3": ""}
    assert len(series(text, "gpu_allocation_info")) == 4
    assert series(text, "gpu_exporter_pod_resources_up") == [({}, 1.0)]
    pids = {labels["pid"]: labels["pod"] for labels, _ in series(text, "gpu_process_memory_used_bytes")}
    assert pids == {"101": "trainer-0", "201": "llm-a", "202": "llm-b", "301": "mig-job"}
    result = promtool("check", "metrics", stdin=text)
    assert (result.returncode, result.stdout, result.stderr) == (0, "", "")
    proc.send_signal(signal.SIGTERM)
    _, stderr = proc.communicate(timeout=20)
    assert proc.returncode == 0 and "Traceback" not in stderr


def test_simulate_without_a_kubelet_socket_serves_pod_resources_up_zero_and_logs_once(
        files: dict[str, str], tmp_path: Path, processes: list[subprocess.Popen[str]]) -> None:
    absent = str(tmp_path / "no-kubelet" / "kubelet.sock")
    base, proc = serve(processes, "--simulate", "2", "--config", files["config"],
                       "--pod-resources-socket", absent)
    wait_for(lambda: series(scrape(base), "gpu_exporter_pod_resources_up") == [({}, 0.0)], timeout=20)
    attempts = "gpu_exporter_pod_resources_refresh_attempts_total"
    first = series(scrape(base), attempts)[0][1]
    # five more failed refreshes
    wait_for(lambda: series(scrape(base), attempts)[0][1] >= first + 5, timeout=20)
    text = scrape(base)
    assert all(labels["pod"] == "" for labels, _ in series(text, "gpu_up"))
    proc.send_signal(signal.SIGTERM)
    _, stderr = proc.communicate(timeout=20)
    assert proc.returncode == 0
    lines = [line for line in stderr.splitlines() if "pod-resources" in line]
    assert len(lines) == 1 and absent in lines[0] and "WARNING" in lines[0], stderr


def test_status_shows_state_score_and_holder_pods(kubelet: KubeletServer, files: dict[str, str]) -> None:
    kubelet.set_pods(node_pods())
    result = run("status", "--simulate-config", files["node"], "--pod-resources-socket", kubelet.socket_path,
                 "--node-name", "node-a")
    assert result.returncode == 0 and result.stderr == "", result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].startswith("node node-a") and "pod-resources ok" in lines[0]
    header = lines[1].split()
    assert {"STATE", "SCORE", "PODS"} <= set(header)
    rows = {line.split()[0]: line for line in lines[2:]}
    assert rows["0"].endswith("ml/trainer-0") and rows["1"].endswith("serve/llm-a,serve/llm-b")
    assert rows["2"].endswith("batch/mig-job") and rows["3"].endswith("-")
    def cell(row: str, column: str) -> str:  # columns are left-aligned under their header
        return rows[row][lines[1].index(column):].split()[0]
    # the MIG GPU 2: NVML gives no utilization in MIG mode, hence no score; the others have both
    assert [(cell(r, "UTIL"), cell(r, "SCORE")) for r in "02"] == [("50%", "0.73"), ("-", "-")]
    doc = (REPO_ROOT / "docs" / "exporter.md").read_text()
    start = doc.index("node node-a  driver ")
    assert doc[start:doc.index("```", start)] == result.stdout  # docs/exporter.md shows this very run
    assert all(any(state in row for state in ("optimal", "normal", "throttled", "critical"))
               for row in rows.values())

    result = run("status", "-o", "json", "--simulate-config", files["node"],
                 "--pod-resources-socket", kubelet.socket_path)
    assert result.returncode == 0, result.stderr
    document = json.loads(result.stdout)
    assert document["pod_resources_up"] is True
    gpus = document["gpus"]
    assert [len(g["holders"]) for g in gpus] == [1, 2, 1, 0]
    assert gpus[1]["shared"] is True and gpus[0]["shared"] is False
    assert gpus[2]["shared"] is True and gpus[3]["shared"] is False  # one MIG holder: shared, as on /metrics
    assert all(g["state"] in ("optimal", "normal", "throttled", "critical") for g in gpus)
    assert all(g["speed_multiplier"] in (1.0, 0.8, 0.5, 0.0) for g in gpus)
    # the MIG GPU 2: NVML gives no utilization in MIG mode, so no score either (null, never 0)
    assert [g["utilization_ratio"] is None for g in gpus] == [False, False, True, False]
    assert [g["availability_score"] is None for g in gpus] == [False, False, True, False]
    assert all(0 <= g["availability_score"] <= 1 for g in gpus if g["availability_score"] is not None)
    assert gpus[2]["process_sm_utilization_ratio"] is None and gpus[1]["process_sm_utilization_ratio"]


def test_status_without_kubelet_says_so_in_the_header(tmp_path: Path) -> None:
    result = run("status", "--simulate", "1", "--pod-resources-socket", str(tmp_path / "none.sock"))
    assert result.returncode == 0 and result.stderr == ""
    assert "pod-resources unavailable" in result.stdout.splitlines()[0]


@pytest.mark.parametrize("text, expected", [
    ("health:\n  memory_percent: {normal: high}\n", ":2: health.memory_percent.normal: expected a number"),
    ("history:\n  max_samples: 1\n", ":2: history.max_samples: expected an integer in [2, 86400] (got 1)"),
    ("pod_resources: [1]\n", ":1: pod_resources: expected a mapping"),
    ("health: {temperature_celsius: {normal: 1\n", ":2: yaml: not valid YAML"),
], ids=["not-a-number", "too-small", "wrong-shape", "broken-yaml"])
def test_bad_config_exits_2_with_one_message(tmp_path: Path, text: str, expected: str) -> None:
    config = tmp_path / "exporter.yaml"
    config.write_text(text)
    for args in (["--simulate", "1", "--port", "0"], ["status", "--simulate", "1"]):
        result = run(*args, "--config", str(config))
        assert result.returncode == 2, result.stderr
        assert result.stderr.startswith(f"gpu-exporter: error: {config}{expected}"), result.stderr
        assert "Traceback" not in result.stderr and result.stdout == ""


def test_unreadable_config_exits_2(tmp_path: Path) -> None:
    result = run("--simulate", "1", "--config", str(tmp_path / "absent.yaml"))
    assert result.returncode == 2 and result.stderr.endswith("absent.yaml: not found\n")
    assert os.path.basename(str(tmp_path / "absent.yaml")) in result.stderr


def test_status_maps_gke_device_ids_by_the_drivers_device_minors(
        kubelet: KubeletServer, files: dict[str, str], proc_root: str) -> None:
    """`status` files GKE's `nvidia<minor>` ids as the running exporter does: minors opposite to the NVML
    index here, read from --proc-root given after the subcommand."""
    write_driver_minors(proc_root, {0: 3, 1: 2, 2: 1, 3: 0})
    kubelet.set_pods([
        ("ml", "trainer-0", [("main", [(GPU, ["nvidia3"])])]),
        ("serve", "llm-a", [("server", [(GPU, ["nvidia2/vgpu0"])])]),
        ("batch", "mig-job", [("worker", [(GPU, ["nvidia1/gi1"])])]),
    ])
    result = run("status", "-o", "json", "--simulate-config", files["node"],
                 "--pod-resources-socket", kubelet.socket_path, "--proc-root", proc_root)
    assert result.returncode == 0, result.stderr
    gpus = json.loads(result.stdout)["gpus"]
    assert [[h["pod"] for h in g["holders"]] for g in gpus] == [["trainer-0"], ["llm-a"], ["mig-job"], []]
    assert [g["shared"] for g in gpus] == [False, False, True, False]  # the GKE MIG slice is not the GPU


DRA_MIG_YAML = """
gpus:
  - {model: H100, mig_enabled: true, load: {pattern: constant, value: 0.5, noise: 0}}
faults:
  - {type: mig_create, gpu: 0, at: 8, mig_profile: 1g.10gb}
"""


def test_a_mig_device_the_dra_driver_creates_at_run_time_is_served_with_its_claims_pod_unprivileged(
        kubelet: KubeletServer, proc_root: str, files: dict[str, str], tmp_path: Path,
        processes: list[subprocess.Popen[str]]) -> None:
    """An H100 in MIG mode with no instance, as NVIDIA's DRA driver leaves it until a claim comes: the whole
    GPU is served; 8 s in, the driver creates the claim's 1g.10gb GPU instance, and the exporter, without the
    privilege that tells placements (the simulator's default, the base DaemonSet's), serves it with the
    claim's pod. Each change is logged once, MIG-on-without-instance too, not every pass."""
    node = tmp_path / "dra-mig.yaml"
    node.write_text(DRA_MIG_YAML)
    write_driver_minors(proc_root, {0: 0})
    kubelet.set_pods([("batch", "dra-job", [("worker", [Claim("mig-slice", ["gpu-0-mig-1g10gb-19-0"])])])])
    base, proc = serve(processes, "--simulate-config", str(node), "--config", files["config"],
                       "--pod-resources-socket", kubelet.socket_path, "--proc-root", proc_root)

    def mig_pods() -> list[tuple[str, str, str]]:
        return [(s["gpu_instance_id"], s["mig_profile"], s["pod"])
                for s, _ in series(scrape(base), "gpu_mig_memory_used_bytes")]

    wait_for(lambda: mig_pods() == [("7", "1g.10gb", "dra-job")], timeout=45)
    text = scrape(base)
    assert series(text, "gpu_up")[0][1] == 1.0 and series(text, "gpu_memory_used_bytes")
    holders = [(s["pod"], s["claim"]) for s, _ in series(text, "gpu_allocation_info")]
    assert holders == [("dra-job", "mig-slice")]
    result = promtool("check", "metrics", stdin=text)
    assert (result.returncode, result.stderr) == (0, "")
    proc.send_signal(signal.SIGTERM)
    _, stderr = proc.communicate(timeout=20)
    assert proc.returncode == 0
    for what in ("no MIG device yet", "MIG devices changed", "NoPermission"):
        assert len([line for line in stderr.splitlines() if what in line]) == 1, (what, stderr)
