"""A real `gpu-exporter` process whose GPUs each fail one NVML call with an error that is not the board's:
every GPU stays up with its other series, the failed call's series are left out, the errors are counted,
each logged at WARNING once, and the health state is not `critical`."""

from __future__ import annotations

import json
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.integration.exporter.conftest import get
from tests.processes import start_exporter, stop_all

pytestmark = pytest.mark.integration

FAULTS = """
gpus: [{model: H100, count: 3}]
faults:
  - {type: error, gpu: 0, calls: [nvmlDeviceGetPowerUsage], error: Unknown}
  - {type: error, gpu: 1, calls: [nvmlDeviceGetTotalEccErrors], error: CorruptedInforom}
  - {type: error, gpu: 2, calls: [nvmlDeviceGetTotalEnergyConsumption], error: NoData}
"""
FAILED = {("0", "nvmlDeviceGetPowerUsage", "Unknown"),
          ("1", "nvmlDeviceGetTotalEccErrors", "CorruptedInforom"),
          ("2", "nvmlDeviceGetTotalEnergyConsumption", "NoData")}
Samples = dict[str, list[tuple[dict[str, str], float]]]


@pytest.fixture
def serve() -> Iterator[list[subprocess.Popen[str]]]:
    started: list[subprocess.Popen[str]] = []
    yield started
    stop_all(started)


def scrape(base: str) -> Samples:
    status, body, _ = get(base + "/metrics")
    assert status == 200
    found: Samples = {}
    for family in text_string_to_metric_families(body.decode()):
        for sample in family.samples:
            found.setdefault(sample.name, []).append((sample.labels, sample.value))
    return found


def by_gpu(found: Samples, name: str) -> dict[str, float]:
    return {labels["gpu"]: value for labels, value in found.get(name, [])}


def test_one_failing_call_per_gpu_leaves_every_gpu_up(serve: list[subprocess.Popen[str]],
                                                      tmp_path: Path) -> None:
    config = tmp_path / "faults.yaml"
    config.write_text(FAULTS)
    base, proc = start_exporter(serve, "--simulate-config", str(config), "--min-interval", "0")
    first = scrape(base)
    found = scrape(base)  # a second sweep: the errors again, counted again, logged no more

    assert by_gpu(found, "gpu_up") == {"0": 1.0, "1": 1.0, "2": 1.0}
    for name in ("gpu_utilization_ratio", "gpu_temperature_celsius", "gpu_memory_used_bytes",
                 "gpu_memory_total_bytes"):
        assert set(by_gpu(found, name)) == {"0", "1", "2"}, name
    assert set(by_gpu(found, "gpu_power_usage_watts")) == {"1", "2"}
    assert {labels["gpu"] for labels, _ in found["gpu_ecc_errors_total"]} == {"0", "2"}
    assert set(by_gpu(found, "gpu_energy_consumption_joules_total")) == {"0", "1"}

    def errors(samples: Samples) -> dict[tuple[str, str, str], float]:
        return {(labels["gpu"], labels["call"], labels["error"]): value
                for labels, value in samples["gpu_exporter_nvml_errors_total"]}

    assert set(errors(first)) == set(errors(found)) == FAILED
    assert all(errors(found)[key] > errors(first)[key] for key in FAILED)  # counting, once per call

    states = {labels["gpu"]: labels["state"] for labels, value in found["gpu_health_state"] if value == 1.0}
    assert set(states) == {"0", "1", "2"} and "critical" not in states.values()
    assert all(score > 0 for score in by_gpu(found, "gpu_availability_score").values())
    assert set(by_gpu(found, "gpu_availability_score")) == {"0", "1", "2"}

    status, body, _ = get(base + "/api/v1/gpus")
    assert status == 200
    gpus = json.loads(body)["gpus"]
    assert [gpu["missing_fields"] for gpu in gpus] == [["power"], ["ecc_errors"], ["energy"]]

    proc.send_signal(signal.SIGTERM)
    _, stderr = proc.communicate(timeout=20)
    assert proc.returncode == 0
    warnings = [line for line in stderr.splitlines()  # not the kubelet's: this test runs without one
                if "WARNING" in line and "exporter.pods." not in line]
    assert len(warnings) == len(FAILED), stderr
    for gpu, call, error in FAILED:
        assert sum(f"GPU {gpu}: {call} failed" in line and f"NVMLError_{error}" in line
                   for line in warnings) == 1, (gpu, call, stderr)
    assert "not answering" not in stderr and "Traceback" not in stderr
