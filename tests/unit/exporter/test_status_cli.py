"""`gpu-exporter status --json` on the simulated backend: every field the GPU supports is filled, including
the ones the running exporter samples in the background (PCIe, per-process SM utilization)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from exporter.config import ExporterConfig, PodResourcesConfig
from exporter.simulator.config_file import parse_sim_config
from exporter.simulator.nvml import SimulatedNvml
from exporter.status_cli import run_status
from tests.unit.exporter.conftest import FakeClock

FLEET = """
pcie_latency_seconds: 0
gpus:
  - model: H100
    count: 2
    load: {pattern: constant, value: 0.5, noise: 0}
    processes: [{pid: 4242, memory_gib: 30}, {pid: 4243, memory_gib: 10, sm_share: 3}]
faults:
  - {type: not_supported, gpu: 1, calls: [nvmlDeviceGetPcieThroughput, nvmlDeviceGetProcessUtilization]}
"""




def test_status_json_fills_pcie_and_process_utilization(tmp_path: Path, clock: FakeClock,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    sim = SimulatedNvml(parse_sim_config(FLEET, "fleet.yaml"), clock=clock)
    config = ExporterConfig(pod_resources=PodResourcesConfig(socket=str(tmp_path / "absent.sock")))
    assert run_status(sim, "n1", config, as_json=True, prog="gpu-exporter") == 0
    first, second = json.loads(capsys.readouterr().out)["gpus"]
    assert first["pcie_tx_bytes_per_second"] == pytest.approx(64_000_000 * 0.35 * 0.5 * 1024, rel=0.01)
    assert first["pcie_rx_bytes_per_second"] == pytest.approx(64_000_000 * 0.15 * 0.5 * 1024, rel=0.01)
    assert first["process_sm_utilization_ratio"] == [[4242, 0.13], [4243, 0.37]]  # 50 % split 1:3, whole %
    # not supported on GPU 1: null, and the rest of GPU 1 still reports
    assert second["pcie_tx_bytes_per_second"] is None and second["pcie_rx_bytes_per_second"] is None
    assert second["process_sm_utilization_ratio"] is None and second["utilization_ratio"] == 0.5


def test_status_json_names_the_cause_of_each_state(tmp_path: Path, clock: FakeClock,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    fleet = ("pcie_latency_seconds: 0\ngpus: [{model: H100, count: 2, load: {pattern: constant, value: 0.1, "
             "noise: 0}}]\nfaults: [{type: gpu_lost, gpu: 1}]\n")
    sim = SimulatedNvml(parse_sim_config(fleet, "fleet.yaml"), clock=clock)
    config = ExporterConfig(pod_resources=PodResourcesConfig(socket=str(tmp_path / "absent.sock")))
    assert run_status(sim, "n1", config, as_json=True, prog="gpu-exporter") == 0
    first, second = json.loads(capsys.readouterr().out)["gpus"]
    assert (first["state"], first["state_causes"]) == ("optimal", [])
    assert (second["state"], second["state_causes"]) == ("critical", ["down"])


def test_the_table_does_not_pay_for_the_background_samples(tmp_path: Path, clock: FakeClock,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    sim = SimulatedNvml(parse_sim_config(FLEET, "fleet.yaml"), clock=clock)
    config = ExporterConfig(pod_resources=PodResourcesConfig(socket=str(tmp_path / "absent.sock")))
    assert run_status(sim, "n1", config, as_json=False, prog="gpu-exporter") == 0
    assert "NVIDIA H100" in capsys.readouterr().out
    assert sim.calls["nvmlDeviceGetPcieThroughput"] == 0 and sim.calls["nvmlDeviceGetProcessUtilization"] == 0
