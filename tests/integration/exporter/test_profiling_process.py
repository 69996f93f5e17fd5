"""A real `gpu-exporter` process over an H100 fleet config: GPM profiling, MIG instances and memory / link
health on /metrics, with the A100 and L4 of the same node serving everything else and no GPM series."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from demo.processes import promtool
from tests.integration.exporter.conftest import get
from tests.processes import start_exporter, stop_all
from tests.support import wait_for

pytestmark = pytest.mark.integration

FLEET = """
gpus:
  - {model: H100, count: 2, processes: [{pid: 5001, memory_gib: 20}]}
  - model: H100
    mig: 7
    processes: [{pid: 5002, memory_gib: 3}, {pid: 5003, memory_gib: 2}]
  - {model: A100}
  - {model: L4}
faults:
  - {type: row_remap_pending, gpu: 1}
  - {type: nvlink_down, gpu: 0, link: 5}
"""


@pytest.fixture
def serve() -> Iterator[list[subprocess.Popen[str]]]:
    started: list[subprocess.Popen[str]] = []
    yield started
    stop_all(started)


def samples(base: str) -> dict[str, list[tuple[dict[str, str], float]]]:
    status, body, _ = get(base + "/metrics")
    assert status == 200
    found: dict[str, list[tuple[dict[str, str], float]]] = {}
    for family in text_string_to_metric_families(body.decode()):
        for sample in family.samples:
            found.setdefault(sample.name, []).append((sample.labels, sample.value))
    return found


def test_h100_fleet_serves_gpm_mig_and_health(serve: list[subprocess.Popen[str]], tmp_path: Path) -> None:
    config = tmp_path / "fleet.yaml"
    config.write_text(FLEET)
    base, _ = start_exporter(serve, "--simulate-config", str(config), "--min-interval", "0")
    # GPM metrics need two samples one background pass (5 s) apart
    wait_for(lambda: "gpu_mig_sm_active_ratio" in samples(base), timeout=40)
    found = samples(base)

    def gpus(name: str) -> set[str]:
        return {labels["gpu"] for labels, _ in found.get(name, [])}

    supported = {labels["gpu"]: value for labels, value in found["gpu_exporter_gpm_supported"]}
    assert supported == {"0": 1.0, "1": 1.0, "2": 1.0, "3": 0.0, "4": 0.0}
    assert gpus("gpu_sm_active_ratio") == gpus("gpu_tensor_active_ratio") == {"0", "1", "2"}
    assert gpus("gpu_utilization_ratio") == {"0", "1", "3", "4"}  # MIG mode: NVML has no utilization
    assert all(0.0 <= value <= 1.0 for _, value in found["gpu_sm_occupancy_ratio"])
    instances = {(labels["gpu_instance_id"], labels["mig_profile"]) for labels, _ in
                 found["gpu_mig_memory_total_bytes"]}
    assert instances == {(str(i), "1g.10gb") for i in range(7, 14)}
    assert len(found["gpu_mig_sm_active_ratio"]) == 7
    assert gpus("gpu_nvlink_up") == {"0", "1", "2", "3"}  # the L4 has no NVLink
    down = {(labels["gpu"], labels["link"]) for labels, value in found["gpu_nvlink_up"] if value == 0.0}
    assert down == {("0", "5")}
    pending = {labels["gpu"]: value for labels, value in found["gpu_row_remap_pending"]}
    assert pending["1"] == 1.0 and pending["0"] == 0.0
    state = {labels["gpu"]: labels["state"] for labels, value in found["gpu_health_state"] if value == 1.0}
    assert state["1"] == "throttled"
    assert gpus("gpu_memory_temperature_celsius") == {"0", "1", "2", "3"}
    _, body, _ = get(base + "/metrics")
    result = promtool("check", "metrics", stdin=body.decode())
    assert (result.returncode, result.stdout, result.stderr) == (0, "", "")
