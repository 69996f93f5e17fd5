"""`gpu-exporter status -o json` on the simulated backend: every field the GPU supports is filled, including
the ones the running exporter samples in the background (PCIe, per-process SM utilization)."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest

from exporter.config import ExporterConfig, PodResourcesConfig
from exporter.simulator.config_file import parse_sim_config
from exporter.simulator.nvml import SimulatedNvml
from exporter.status_cli import run_status
from tests.measure import run_in_process
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
    assert run_status(sim, "n1", config, output="json", prog="gpu-exporter") == 0
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
    assert run_status(sim, "n1", config, output="json", prog="gpu-exporter") == 0
    first, second = json.loads(capsys.readouterr().out)["gpus"]
    assert (first["state"], first["state_causes"]) == ("optimal", [])
    assert (second["state"], second["state_causes"]) == ("critical", ["down"])


def test_the_table_does_not_pay_for_the_background_samples(tmp_path: Path, clock: FakeClock,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    sim = SimulatedNvml(parse_sim_config(FLEET, "fleet.yaml"), clock=clock)
    config = ExporterConfig(pod_resources=PodResourcesConfig(socket=str(tmp_path / "absent.sock")))
    assert run_status(sim, "n1", config, output="table", prog="gpu-exporter") == 0
    assert "NVIDIA H100" in capsys.readouterr().out
    assert sim.calls["nvmlDeviceGetPcieThroughput"] == 0 and sim.calls["nvmlDeviceGetProcessUtilization"] == 0


def test_every_output_format_of_the_command(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`gpu-exporter status -o table|wide|json|csv` through its entry point: the same GPUs in each, `--json`
    still works and says it is deprecated."""
    base = ["gpu-exporter", "status", "--simulate", "2", "--pod-resources-socket", str(tmp_path / "absent")]
    document = json.loads(run_in_process([*base, "-o", "json"], capsys).stdout)
    uuids = [gpu["uuid"] for gpu in document["gpus"]]
    assert document["schemaVersion"] == 1 and len(uuids) == 2
    table = run_in_process(base, capsys)
    assert table.returncode == 0 and [line.split()[0] for line in table.stdout.splitlines()[1:]] == [
        "GPU", "0", "1"]
    wide = run_in_process([*base, "-o", "wide"], capsys).stdout.splitlines()
    assert "PCI BUS" in wide[1] and all(uuid in "\n".join(wide) for uuid in uuids)
    rows = list(csv.DictReader(io.StringIO(run_in_process([*base, "-o", "csv"], capsys).stdout)))
    assert [row["uuid"] for row in rows] == uuids
    assert all(0 <= float(row["utilization_ratio"]) <= 1 for row in rows)  # base units, as /metrics
    bare = run_in_process([*base, "-o", "csv", "--no-headers"], capsys).stdout.splitlines()
    assert len(bare) == 2 and bare[0].startswith("0,")
    old = run_in_process([*base, "--json"], capsys)
    assert old.returncode == 0 and json.loads(old.stdout)["schemaVersion"] == 1
    assert old.stderr == "gpu-exporter status: --json is deprecated: use -o json\n"
