"""The `gpu-exporter` command as users run it: a subprocess, its exit codes, stderr and HTTP answers."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.integration.exporter.conftest import get
from tests.processes import run_exporter, start_exporter, stop_all

pytestmark = pytest.mark.integration

def run(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return run_exporter(*args, timeout=timeout)


@pytest.fixture
def serve() -> Iterator[list[subprocess.Popen[str]]]:
    started: list[subprocess.Popen[str]] = []
    yield started
    stop_all(started)


def start(started: list[subprocess.Popen[str]], *args: str) -> tuple[str, subprocess.Popen[str]]:
    return start_exporter(started, *args, env={**os.environ, "NODE_NAME": "cli-node"})


def test_serves_simulated_gpus_and_stops_cleanly_on_sigterm(serve: list[subprocess.Popen[str]]) -> None:
    base, proc = start(serve, "--simulate", "2", "--min-interval", "0.5")
    status, body, _ = get(base + "/metrics")
    assert status == 200
    text = body.decode()
    assert text.count("gpu_up{") == 2 and 'node="cli-node"' in text
    proc.send_signal(signal.SIGTERM)
    _, stderr = proc.communicate(timeout=20)
    assert proc.returncode == 0
    assert "Traceback" not in stderr and "stopped" in stderr


def test_without_a_driver_it_serves_nvml_up_zero_with_one_line(serve: list[subprocess.Popen[str]]) -> None:
    base, proc = start(serve)  # no --simulate: the real NVML, absent on this machine
    status, body, _ = get(base + "/metrics")
    if b"gpu_exporter_nvml_up 1.0" in body:  # pragma: no cover - a GPU machine
        return
    assert status == 200 and b"gpu_exporter_nvml_up 0.0" in body
    status, body, _ = get(base + "/readyz")
    assert status == 200 and body.startswith(b"ready: nvml down: ")  # Ready: the Service scrapes it
    proc.send_signal(signal.SIGTERM)
    _, stderr = proc.communicate(timeout=20)
    assert proc.returncode == 0
    nvml_lines = [line for line in stderr.splitlines() if "NVML init failed" in line]
    assert len(nvml_lines) == 1 and "retrying" in nvml_lines[0]


@pytest.mark.parametrize("args, expected", [
    (["--simulate", "many"], "argument --simulate: expected a GPU count from 0 to 64 (got 'many')"),
    (["--simulate", "2", "--simulate-config", "x.yaml"], "not allowed with argument"),
    (["--port", "70000"], "expected a port number from 0 to 65535 (got '70000')"),
    (["--min-interval", "-1"], "expected a duration like 15s, 500ms or 1m, in [0s, 3600s]"),
    (["--min-interval", "2h"], "in [0s, 3600s] (got '2h')"),
    (["status", "--simulate", "-3"], "expected a GPU count from 0 to 64 (got '-3')"),
    (["--simulate", "1", "status", "--simulate-config", "x.yaml"], "not allowed with argument"),
], ids=["bad-count", "both-backends", "bad-port", "bad-interval", "interval-too-long",
        "status-bad-count",
        "both-backends-across-subcommand"])
def test_bad_flags_one_line_exit_2(args: list[str], expected: str) -> None:
    result = run(*args)
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1 and expected in result.stderr
    assert result.stderr.startswith("gpu-exporter: error: ") and "Traceback" not in result.stderr


def test_an_unknown_flag_gets_the_usage_and_one_line_exit_2() -> None:
    result = run("--bogus")
    assert result.returncode == 2 and result.stderr.startswith("usage: gpu-exporter [")
    assert result.stderr.splitlines()[-1].startswith("gpu-exporter: error: unrecognized arguments: --bogus")


def test_bad_yaml_names_the_file_and_field(tmp_path: Path) -> None:
    config = tmp_path / "fleet.yaml"
    config.write_text("gpus:\n  - {model: H100, count: 2, load: {pattern: zigzag}}\n")
    result = run("--simulate-config", str(config))
    assert result.returncode == 2 and result.stderr.count("\n") == 1
    assert f"{config}:2: gpus[0].load.pattern: expected one of constant" in result.stderr
    missing = run("status", "--simulate-config", str(tmp_path / "absent.yaml"))
    assert missing.returncode == 2 and missing.stderr.endswith("absent.yaml: not found\n")


def test_non_utf8_config_is_one_line_exit_2(tmp_path: Path) -> None:
    config = tmp_path / "fleet.yaml"
    config.write_bytes(b"gpus:\n  - {model: H100}\xff\n")
    for args in (["--simulate-config", str(config)], ["status", "--simulate-config", str(config)]):
        result = run(*args)
        assert result.returncode == 2 and result.stderr.count("\n") == 1, result.stderr
        assert result.stderr.startswith(f"gpu-exporter: error: {config}:2: not UTF-8 text")
        assert "Traceback" not in result.stderr


def test_port_in_use_one_line_exit_2() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        port = sock.getsockname()[1]
        result = run("--simulate", "1", "--address", "127.0.0.1", "--port", str(port))
    assert result.returncode == 2
    assert f"gpu-exporter: error: cannot listen on 127.0.0.1:{port}: Address already in use" in result.stderr
    assert "Traceback" not in result.stderr


def test_status_table(tmp_path: Path) -> None:
    result = run("status", "--simulate", "3", "--node-name", "n7")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].startswith("node n7  driver 550.54.15  CUDA 12.4  3 GPU(s)")
    assert lines[1].split()[:3] == ["GPU", "NAME", "UUID"]
    assert len(lines) == 5 and all("NVIDIA H100 80GB HBM3" in line for line in lines[2:])
    assert result.stderr == ""


def test_backend_flags_before_the_subcommand_are_kept() -> None:
    result = run("--simulate", "2", "--node-name", "n8", "status", "-o", "json")
    assert result.returncode == 0, result.stderr
    document = json.loads(result.stdout)
    assert document["node"] == "n8" and len(document["gpus"]) == 2


def test_status_json_with_a_lost_gpu(tmp_path: Path) -> None:
    config = tmp_path / "fleet.yaml"
    config.write_text("gpus: [{model: L4, count: 2}]\nfaults: [{type: gpu_lost, gpu: 1}]\n")
    result = run("status", "-o", "json", "--simulate-config", str(config))
    assert result.returncode == 0, result.stderr
    document = json.loads(result.stdout)
    assert document["nvml_up"] is True and document["cuda_version"] == "12.4"
    first, second = document["gpus"]
    assert first["name"] == "NVIDIA L4" and first["up"] is True and 0 <= first["utilization_ratio"] <= 1
    assert isinstance(first["clocks_event_reasons"], list) and first["fan_speed_ratio"] is None
    assert first["pcie_tx_bytes_per_second"] > 0 and first["pcie_rx_bytes_per_second"] > 0
    assert first["process_sm_utilization_ratio"] == []  # supported, and no process runs on it
    assert second["up"] is False and "GpuIsLost" in second["error"]
    assert second["pcie_tx_bytes_per_second"] is None and second["process_sm_utilization_ratio"] is None


def test_status_without_a_driver_exits_1_naming_simulate() -> None:
    result = run("status")
    if result.returncode == 0:  # pragma: no cover - a GPU machine
        return
    assert result.returncode == 1 and result.stderr.count("\n") == 2
    error, hint = result.stderr.splitlines()
    assert "NVML init failed" in error
    assert hint.startswith("no GPU or driver here? --simulate N shows N simulated GPUs")
