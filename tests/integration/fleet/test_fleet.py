"""`gpu-fleet status`, `select` and `wait` as processes against a real Prometheus scraping live exporters."""

from __future__ import annotations

import csv
import io
import json
import subprocess
import time
from collections.abc import Callable

import pytest
import yaml

from demo.processes import free_port
from tests.integration.fleet.conftest import FLEET, Cluster, holding, uuid
from tests.support import reap

pytestmark = pytest.mark.integration


def test_status_shows_every_gpu_of_every_node_and_the_dead_one_as_stale(cluster: Cluster) -> None:
    result = cluster.fleet("status")
    assert result.returncode == 3, result.stderr  # answered, but a node's exporter is down
    lines = result.stdout.splitlines()
    assert lines[0].split()[:3] == ["NODE", "GPU", "MODEL"]
    rows = [line.split() for line in lines[1:]]
    expected = [("node-a", "0"), ("node-a", "1"), ("node-a", "2"), ("node-b", "0"), ("node-b", "1"),
                ("node-c", "0"), ("node-c", "1"), ("node-d", "0")]
    assert [(r[0], r[1]) for r in rows] == expected
    assert lines[1].endswith("ml/trainer-0") and "critical" in lines[5]
    assert "stale (exporter down, last seen " in lines[8] and "NVIDIA H100" in lines[8]
    assert result.stderr == "1 GPU(s) stale on node-d: their exporter is down or no longer reports them\n"


def test_the_ranking_score_is_0_for_critical_and_stale_gpus(cluster: Cluster) -> None:
    result = cluster.fleet("status", "-o", "json", "--sort", "score")
    document = json.loads(result.stdout)
    assert document["schemaVersion"] == 1
    gpus = document["gpus"]
    critical, stale = gpus[-2:]  # both idle H100s: the exporter's score is the best, the ranking's 0
    assert (critical["uuid"], critical["health"], critical["score"]) == (uuid("node-b", 1), "critical", 0.0)
    assert critical["availability_score"] > 0.9
    assert (stale["uuid"], stale["stale"], stale["score"], stale["target_down"]) == (uuid("node-d", 0), True,
                                                                                     0.0, True)
    assert cluster.started < stale["last_seen"] < time.time()  # its last sample, to the second
    assert all(isinstance(g["index"], int) for g in gpus)


def test_status_json_filters_and_sorts(cluster: Cluster) -> None:
    result = cluster.fleet("status", "-o", "json", "--node", "node-a", "--sort", "score")
    assert result.returncode == 0, result.stderr
    gpus = json.loads(result.stdout)["gpus"]
    assert [g["uuid"] for g in gpus] == [uuid("node-a", 0), uuid("node-a", 2), uuid("node-a", 1)]
    assert gpus[0]["holders"] == [{"namespace": "ml", "pod": "trainer-0", "container": "main",
                                   "resource": "nvidia.com/gpu"}]
    assert all(isinstance(g["memory_total_bytes"], int) and g["memory_total_bytes"] > 0
               and 0 <= g["availability_score"] <= 1 for g in gpus)
    held = cluster.fleet("status", "--json", "--namespace", "ml")  # --json: the old name of -o json
    assert [g["uuid"] for g in json.loads(held.stdout)["gpus"]] == [uuid("node-a", 0)]
    none = cluster.fleet("status", "--node", "node-z")
    assert none.returncode == 1 and none.stdout == ""  # the message is on stderr
    assert none.stderr.startswith("no GPU found for --node node-z")


def test_status_csv_without_headers(cluster: Cluster) -> None:
    result = cluster.fleet("status", "-o", "csv", "--no-headers", "--node", "node-c")
    rows = list(csv.reader(io.StringIO(result.stdout)))
    assert [(r[0], r[1], r[3]) for r in rows] == [("node-c", "0", "NVIDIA L4"), ("node-c", "1", "NVIDIA L4")]


def terminated(cluster: Cluster, *args: str, ready: Callable[[subprocess.Popen[str]], None]
               ) -> tuple[int, str, str]:
    """Start `gpu-fleet args` on the cluster's Prometheus, let `ready` read what it waits for, then SIGTERM
    it: its exit status and the rest of its stdout and stderr."""
    proc = subprocess.Popen([FLEET, *args, "--prometheus", cluster.prometheus.url],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        ready(proc)
        proc.terminate()
        out, err = proc.communicate(timeout=30)
        return proc.returncode, out, err
    finally:
        reap(proc)


def test_status_watch_prints_a_json_line_per_look_until_sigterm(cluster: Cluster) -> None:
    looks: list[list[dict[str, object]]] = []

    def two_looks(proc: subprocess.Popen[str]) -> None:
        assert proc.stdout is not None
        # a pipe: one plain line per look
        looks.extend(json.loads(proc.stdout.readline())["gpus"] for _ in range(2))

    code, _, _ = terminated(cluster, "status", "--watch", "0.2", "-o", "json", "--node", "node-b",
                            ready=two_looks)
    assert [[g["uuid"] for g in look] for look in looks] == [[uuid("node-b", 0), uuid("node-b", 1)]] * 2
    assert code == 0


def test_select_takes_the_best_free_gpus_never_held_or_critical(cluster: Cluster) -> None:
    result = cluster.fleet("select", "--gpus", "2", "-o", "json")
    assert result.returncode == 0, result.stderr
    chosen = json.loads(result.stdout)
    # idle a-0 (held) and b-1 (critical) score highest but are left out; then a-2 (10 % busy), b-0 (20 %)
    assert [g["uuid"] for g in chosen["gpus"]] == [uuid("node-a", 2), uuid("node-b", 0)]
    terms = chosen["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert terms["nodeSelectorTerms"][0]["matchExpressions"][0]["values"] == ["node-a", "node-b"]


def test_select_leaves_out_gpus_busier_than_max_utilization(cluster: Cluster) -> None:
    """node-a's two free H100s are 10 % and 60 % busy: not two on one node at the default 50 %."""
    busy = cluster.fleet("select", "--gpus", "2", "--same-node", "--model", "h100")
    assert busy.returncode == 1 and "1 too busy" in busy.stderr, busy.stderr
    assert "--max-utilization above 50 admits the too busy" in busy.stderr  # the flag that admits it
    idle = cluster.fleet("select", "--gpus", "3", "--idle", "-o", "json")
    assert idle.returncode == 1  # the L4s at exactly 30 % are not idle (below 30 %), nor a-1 at 60 %
    assert json.loads(idle.stdout)["excluded"]["not idle"] == 3
    at_30 = cluster.fleet("select", "--gpus", "4", "--max-utilization", "30", "-o", "json")
    assert [g["uuid"] for g in json.loads(at_30.stdout)["gpus"]][2:] == [uuid("node-c", 0), uuid("node-c", 1)]


def test_select_docker_and_kubernetes_outputs(cluster: Cluster) -> None:
    docker = cluster.fleet("select", "--gpus", "2", "-o", "docker", "--max-utilization", "100",
                           "--model", "H100")
    assert docker.stdout == f"--gpus '\"device={uuid('node-a', 2)},{uuid('node-a', 1)}\"'\n", docker.stderr
    placement = yaml.safe_load(cluster.fleet("select", "--gpus", "1", "-o", "kubernetes").stdout)
    assert placement == {"nodeSelector": {"kubernetes.io/hostname": "node-a"}}


def test_select_same_node_and_model_prints_a_node_selector(cluster: Cluster) -> None:
    result = cluster.fleet("select", "--gpus", "2", "--same-node", "--model", "h100",
                           "--min-free-memory", "40GiB", "--max-utilization", "100")
    assert result.returncode == 0, result.stderr
    table, snippet = result.stdout.split("\n\n")
    assert [line.split()[:2] for line in table.splitlines()[1:]] == [["node-a", "2"], ["node-a", "1"]]
    selector = yaml.safe_load(snippet)["nodeSelector"]
    assert selector["kubernetes.io/hostname"] == "node-a"
    assert selector["nvidia.com/gpu.product"].startswith("NVIDIA-H100")


def test_select_exits_1_when_not_enough(cluster: Cluster) -> None:
    result = cluster.fleet("select", "--gpus", "3", "--same-node", "--model", "H100")
    assert result.returncode == 1 and result.stdout == ""
    assert "not enough GPUs: 3 requested, at most 1 eligible on one node" in result.stderr
    for reason in ("1 critical", "1 held by a pod", "1 stale (exporter down)", "1 too busy"):
        assert reason in result.stderr
    as_json = cluster.fleet("select", "--gpus", "9", "-o", "json")
    assert as_json.returncode == 1 and json.loads(as_json.stdout)["exit_code"] == 1
    assert json.loads(as_json.stdout)["error"] == as_json.stderr.strip()
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
    assert result.returncode == 3 and len(result.stdout.splitlines()) == 9, result.stderr
    wrong = subprocess.run([FLEET, "status", "--prometheus-config", str(config), "--endpoint", "mimir"],
                           capture_output=True, text=True, timeout=60, check=False)
    assert wrong.returncode == 2 and "--endpoint: no endpoint 'mimir'" in wrong.stderr


def test_wait_times_out_with_exit_1(cluster: Cluster) -> None:
    # a process of its own: `wait` installs stop handlers for SIGTERM and SIGINT
    argv = [FLEET, "wait", "--gpus", "4", "--same-node", "--timeout", "2s", "--interval", "0.5s"]
    result = subprocess.run([*argv, "--prometheus", cluster.prometheus.url], capture_output=True, text=True,
                            timeout=60, check=False)
    assert result.returncode == 1 and result.stdout == ""
    attempts = [line for line in result.stderr.splitlines() if line.startswith("attempt ")]
    assert len(attempts) >= 2 and "not enough GPUs: 4 requested" in attempts[0]
    assert result.stderr.splitlines()[-1].startswith("timed out after")


def test_wait_succeeds_when_gpus_free_up(cluster: Cluster) -> None:
    cluster.set_pods(holding(0, 1, 2))
    proc = subprocess.Popen([FLEET, "wait", "--gpus", "2", "--same-node", "--model", "H100",
                             "--timeout", "90s", "--interval", "0.5s", "--max-utilization", "100",
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
        reap(proc)
        cluster.set_pods(holding(0))


def test_wait_ends_cleanly_on_sigterm(cluster: Cluster) -> None:
    def first_attempt(proc: subprocess.Popen[str]) -> None:
        assert proc.stderr is not None
        assert proc.stderr.readline().startswith("attempt 1:")

    code, out, err = terminated(cluster, "wait", "--gpus", "9", "--timeout", "5m", "--interval", "0.5s",
                                ready=first_attempt)
    assert code == 143 and out == ""
    assert "stopped by SIGTERM" in err


def test_estimate_takes_the_fleets_gpu_memory_and_then_selects(cluster: Cluster) -> None:
    """An "80GB" H100 has 79.6 GiB: 70B in bf16 at tp 2 with 35,000 tokens needs 79.8 GiB per GPU."""
    tight = cluster.fleet("estimate", "--params", "70B", "--tp", "2", "--pp", "1", "--context", "35000",
                          "--model", "H100")
    assert tight.returncode == 1, tight.stderr
    assert tight.stdout.splitlines()[-1] == ("does NOT fit in 79.6GiB per GPU (NVIDIA H100 80GB HBM3, from "
                                             "Prometheus): 2 GPU(s)")
    chosen = cluster.fleet("estimate", "--params", "8B", "--model", "H100", "--then-select", "-o", "json")
    assert chosen.returncode == 0, chosen.stderr
    assert [g["uuid"] for g in json.loads(chosen.stdout)["gpus"]] == [uuid("node-a", 2)]
    assert chosen.stderr.startswith("estimate: 1 GPU(s), each with ")
