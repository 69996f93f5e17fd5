"""`gpu-autoscaler run` and `status` as real processes: exit codes, JSON logs, SIGTERM, read-only status."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import requests

from demo.processes import free_port
from tests.fake_kube.apiserver import FakeApiServer
from tests.prom import Prom
from tests.rules import minimal_rules
from tests.support import reap, start_process, stop_process, wait_for

pytestmark = pytest.mark.integration

CLI = [sys.executable, "-m", "autoscaler.cli.main"]


def write_files(tmp_path: Path, api: FakeApiServer, query: str) -> tuple[Path, Path]:
    rules = tmp_path / "rules.yaml"
    rules.write_text(minimal_rules("web", query=query))
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(api.kubeconfig())
    return rules, kubeconfig


@pytest.fixture
def web(apiserver: FakeApiServer, prom: Prom) -> str:
    apiserver.add("web", 2)
    prom.target.set("cli-web", 160)
    query = 'test_load{series="cli-web"}'
    prom.wait_value(query, 160)
    return query


def test_run_once_patches_and_logs_json(
    apiserver: FakeApiServer, prom: Prom, web: str, tmp_path: Path
) -> None:
    rules, kubeconfig = write_files(tmp_path, apiserver, web)
    done = subprocess.run(
        [
            *CLI,
            "run",
            "--rules",
            str(rules),
            "--prometheus",
            prom.url,
            "--kubeconfig",
            str(kubeconfig),
            "--once",
            "--metrics-port",
            "0",
            "--log-format",
            "json",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert apiserver.patches("web") == [4]
    lines = [json.loads(line) for line in done.stderr.splitlines() if line.startswith("{")]
    decisions = [line for line in lines if line.get("rule") == "web"]
    assert len(decisions) == 1
    assert (
        decisions[0]["current"] == 2 and decisions[0]["desired"] == 4 and decisions[0]["action"] == "scaled"
    )
    assert decisions[0]["metrics"] == {"util": 160.0} and decisions[0]["level"] == "info"


def test_dry_run_never_patches(apiserver: FakeApiServer, prom: Prom, web: str, tmp_path: Path) -> None:
    rules, kubeconfig = write_files(tmp_path, apiserver, web)
    done = subprocess.run(
        [
            *CLI,
            "run",
            "--rules",
            str(rules),
            "--prometheus",
            prom.url,
            "--kubeconfig",
            str(kubeconfig),
            "--once",
            "--dry-run",
            "--metrics-port",
            "0",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert apiserver.patches() == [] and apiserver.replicas("web") == 2
    assert "would scale Deployment/ml/web 2 -> 4" in done.stderr


INTERVAL = 60
"""Long enough that waiting it out cannot pass for a prompt stop, on however busy a machine."""


def test_sigterm_exits_without_waiting_out_the_interval(
    apiserver: FakeApiServer, prom: Prom, web: str, tmp_path: Path
) -> None:
    rules, kubeconfig = write_files(tmp_path, apiserver, web)
    port = free_port()
    proc = start_process(
        [
            *CLI,
            "run",
            "--rules",
            str(rules),
            "--prometheus",
            prom.url,
            "--kubeconfig",
            str(kubeconfig),
            "--interval",
            f"{INTERVAL}s",
            "--metrics-port",
            str(port),
        ]
    )
    try:
        wait_for(lambda: apiserver.replicas("web") == 4, 60, "the first sync to scale")

        def metrics_up() -> bool:
            try:
                return (
                    "gpu_autoscaler_leader 1.0"
                    in requests.get(f"http://127.0.0.1:{port}/metrics", timeout=10).text
                )
            except requests.ConnectionError:
                return False

        wait_for(metrics_up, 30, "/metrics")
        assert requests.get(f"http://127.0.0.1:{port}/healthz", timeout=10).status_code == 200
        sent = time.monotonic()
        code = stop_process(proc, timeout=INTERVAL)
        # the stop cuts the wait for the next sync short: a controller that waited out its interval would
        # take about a minute; a shutdown takes well under a second idle and a few on a busy machine
        assert time.monotonic() - sent < INTERVAL / 2
        assert code == 0
    finally:
        stderr = reap(proc, timeout=5)
    assert "received SIGTERM" in stderr and "gpu-autoscaler stopped" in stderr
    assert apiserver.patches("web") == [4]


def test_status_prints_the_table_and_writes_nothing(
    apiserver: FakeApiServer, prom: Prom, web: str, tmp_path: Path
) -> None:
    rules, kubeconfig = write_files(tmp_path, apiserver, web)
    done = subprocess.run(
        [*CLI, "status", "--rules", str(rules), "--prometheus", prom.url, "--kubeconfig", str(kubeconfig)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    header, row = done.stdout.splitlines()[:2]
    assert header.split()[:4] == ["RULE", "TARGET", "CURRENT", "DESIRED"]
    assert row.split()[:6] == ["web", "Deployment/ml/web", "2", "4", "1-10", "util=160"]
    assert "(DesiredWithinRange)" in row
    assert [r.method for r in apiserver.requests if r.method != "GET"] == []


def test_bad_rules_file_exits_2_naming_file_and_line(tmp_path: Path) -> None:
    rules = tmp_path / "rules.yaml"
    rules.write_text("rules:\n  - name: web\n    maxReplicas: 0\n")
    done = subprocess.run(
        [*CLI, "run", "--rules", str(rules), "--kubeconfig", str(tmp_path / "none")],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2
    assert f"{rules}:" in done.stderr and "maxReplicas" in done.stderr


@pytest.mark.parametrize("port", ["70000", "-1", "http"])
def test_metrics_port_out_of_range_is_one_usage_message(tmp_path: Path, port: str) -> None:
    rules = tmp_path / "rules.yaml"
    rules.write_text("rules: []\n")  # never read: the flag is checked first
    done = subprocess.run(
        [*CLI, "run", "--rules", str(rules), "--metrics-port", port],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2
    assert done.stderr.splitlines()[-1] == (
        f"gpu-autoscaler run: error: argument --metrics-port: expected a port number from 0 to 65535 "
        f"(got {port!r})"
    )


def test_busy_metrics_port_names_the_flag_and_exits_2(
    apiserver: FakeApiServer, tmp_path: Path
) -> None:
    rules, kubeconfig = write_files(tmp_path, apiserver, "up")
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        done = subprocess.run(
            [*CLI, "run", "--rules", str(rules), "--kubeconfig", str(kubeconfig), f"--metrics-port={port}"],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip() == (
        f"gpu-autoscaler run: cannot serve /metrics on --metrics-port {port} (0.0.0.0:{port}): "
        "Address already in use"
    )
    assert apiserver.requests == []  # nothing was read, patched or leased
