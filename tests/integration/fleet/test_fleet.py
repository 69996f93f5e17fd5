"""`gpu-fleet status`, `select` and `wait` as processes against a real Prometheus scraping live exporters."""

from __future__ import annotations

import json
import subprocess

import pytest
import yaml

from demo.processes import free_port
from tests.integration.fleet.conftest import FLEET, Cluster, holding, uuid
from tests.support import reap, wait_for

pytestmark = pytest.mark.integration


def test_status_shows_every_gpu_of_every_node(cluster: Cluster) -> None:
    result = cluster.fleet("status")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].split()[:3] == ["NODE", "GPU", "MODEL"]
    rows = [line.split() for line in lines[1:]]
    expected = [("node-a", "0"), ("node-a", "1"), ("node-a", "2"), ("node-b", "0"), ("node-b", "1"),
                ("node-c", "0"), ("node-c", "1")]
    assert [(r[0], r[1]) for r in rows] == expected
    assert lines[1].endswith("ml/trainer-0") and "critical" in lines[5]


def test_status_json_filters_and_sorts(cluster: Cluster) -> None:
    result = cluster.fleet("status", "--json", "--node", "node-a", "--sort", "score")
    assert result.returncode == 0, result.stderr
    gpus = json.loads(result.stdout)
    assert [g["uuid"] for g in gpus] == [uuid("node-a", 0), uuid("node-a", 2), uuid("node-a", 1)]
    assert gpus[0]["holders"] == [{"namespace": "ml", "pod": "trainer-0", "container": "main",
                                   "resource": "nvidia.com/gpu"}]
    assert all(g["memory_total_bytes"] > 0 and 0 <= g["availability_score"] <= 1 for g in gpus)
    held = cluster.fleet("status", "--json", "--namespace", "ml")
    assert [g["uuid"] for g in json.loads(held.stdout)] == [uuid("node-a", 0)]
    none = cluster.fleet("status", "--node", "node-z")
    assert none.returncode == 1 and "no GPU found for --node node-z" in none.stdout


def test_select_takes_the_best_free_gpus_never_held_or_critical(cluster: Cluster) -> None:
    result = cluster.fleet("select", "--gpus", "2", "--json")
    assert result.returncode == 0, result.stderr
    chosen = json.loads(result.stdout)
    # idle a-0 (held) and b-1 (critical) score highest but are left out; then a-2 (10 % busy), b-0 (20 %)
    assert [g["uuid"] for g in chosen["gpus"]] == [uuid("node-a", 2), uuid("node-b", 0)]
    terms = chosen["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert terms["nodeSelectorTerms"][0]["matchExpressions"][0]["values"] == ["node-a", "node-b"]


def test_select_same_node_and_model_prints_a_node_selector(cluster: Cluster) -> None:
    result = cluster.fleet("select", "--gpus", "2", "--same-node", "--model", "h100",
                           "--min-free-memory", "40GiB")
    assert result.returncode == 0, result.stderr
    table, snippet = result.stdout.split("\n\n")
    assert [line.split()[:2] for line in table.splitlines()[1:]] == [["node-a", "2"], ["node-a", "1"]]
    selector = yaml.safe_load(snippet)["nodeSelector"]
    assert selector["kubernetes.io/hostname"] == "node-a"
    assert selector["nvidia.com/gpu.product"].startswith("NVIDIA-H100")


def test_select_exits_1_when_not_enough(cluster: Cluster) -> None:
    result = cluster.fleet("select", "--gpus", "3", "--same-node", "--model", "H100")
    assert result.returncode == 1 and result.stdout == ""
    assert "not enough GPUs: 3 requested, at most 2 eligible on one node" in result.stderr
    assert "1 critical" in result.stderr and "1 held by a pod" in result.stderr
    assert cluster.fleet("select", "--gpus", "1", "--min-free-memory", "200GiB").returncode == 1


def test_bad_input_is_one_line_naming_the_flag(cluster: Cluster) -> None:
    result = cluster.fleet("select", "--gpus", "2", "--min-free-memory", "40 gigs")
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr == ("gpu-fleet select: --min-free-memory: expected a size like 40GiB, 80G or 512MiB "
                             "(got '40 gigs')\n")
    assert cluster.fleet("select", "--gpus", "0").stderr.startswith("gpu-fleet select: --gpus: expected")


def test_an_unreachable_prometheus_is_one_line_and_exit_2() -> None:
    url = f"http://127.0.0.1:{free_port()}"
    result = subprocess.run([FLEET, "status", "--prometheus", url], capture_output=True, text=True,
                            timeout=60, check=False)
    assert result.returncode == 2
    assert result.stderr == f"gpu-fleet status: cannot reach Prometheus at {url}: connection refused\n"


def test_the_prometheus_config_file_is_read(cluster: Cluster, tmp_path) -> None:  # type: ignore[no-untyped-def]
    config = tmp_path / "connections.yaml"
    config.write_text(f"endpoints:\n  thanos:\n    url: {cluster.prometheus.url}\n")
    result = subprocess.run([FLEET, "status", "--prometheus-config", str(config)], capture_output=True,
                            text=True, timeout=60, check=False)
    assert result.returncode == 0 and len(result.stdout.splitlines()) == 8, result.stderr
    wrong = subprocess.run([FLEET, "status", "--prometheus-config", str(config), "--endpoint", "mimir"],
                           capture_output=True, text=True, timeout=60, check=False)
    assert wrong.returncode == 2 and "--endpoint: no endpoint 'mimir'" in wrong.stderr


def test_wait_times_out_with_exit_1(cluster: Cluster) -> None:
    result = cluster.fleet("wait", "--gpus", "4", "--same-node", "--timeout", "2s", "--interval", "0.5s")
    assert result.returncode == 1 and result.stdout == ""
    attempts = [line for line in result.stderr.splitlines() if line.startswith("attempt ")]
    assert len(attempts) >= 2 and "not enough GPUs: 4 requested" in attempts[0]
    assert result.stderr.splitlines()[-1].startswith("timed out after")


def test_wait_succeeds_when_gpus_free_up(cluster: Cluster) -> None:
    cluster.set_pods(holding(0, 1, 2))
    proc = subprocess.Popen([FLEET, "wait", "--gpus", "2", "--same-node", "--model", "H100",
                             "--timeout", "90s", "--interval", "0.5s",
                             "--prometheus", cluster.prometheus.url],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stderr is not None
        first = proc.stderr.readline()  # one plain line per attempt: stderr is not a terminal
        assert first.startswith("attempt 1: not enough GPUs: 2 requested"), first
        assert proc.poll() is None
        cluster.set_pods(holding(0))
        out, err = proc.communicate(timeout=60)
        assert proc.returncode == 0, err
        assert "kubernetes.io/hostname: node-a" in out
        assert [line.split()[:2] for line in out.split("\n\n")[0].splitlines()[1:]] == [["node-a", "2"],
                                                                                        ["node-a", "1"]]
    finally:
        reap(proc)  # type: ignore[arg-type]
        cluster.set_pods(holding(0))


def test_wait_ends_cleanly_on_sigterm(cluster: Cluster) -> None:
    proc = subprocess.Popen([FLEET, "wait", "--gpus", "9", "--timeout", "5m", "--interval", "0.5s",
                             "--prometheus", cluster.prometheus.url],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stderr is not None
        assert proc.stderr.readline().startswith("attempt 1:")
        proc.terminate()
        out, err = proc.communicate(timeout=30)
        assert proc.returncode == 143 and out == ""
        assert "stopped by SIGTERM" in err
    finally:
        reap(proc)  # type: ignore[arg-type]
    wait_for(lambda: proc.poll() is not None, timeout=5)
