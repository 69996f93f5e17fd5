"""A GPU in MIG mode as real NVML answers for it: device utilization and per-process utilization are not
supported (NVML's docs: "On MIG-enabled GPUs, querying device utilization rates / process utilization is not
currently supported"). The simulator's `mig:` GPUs raise pynvml's NVMLError_NotSupported for both, with no
fault configured, so the demo and the tests take the code path real hardware takes: the exporter leaves those
series out and logs once."""

from __future__ import annotations

import logging

import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from exporter.collector import GpuCollector
from exporter.health.state import HealthThresholds
from exporter.health.state_families import HealthMetrics
from exporter.nvml.adapter import NodeSnapshot, real_nvml
from tests.unit.exporter.conftest import SimFactory

FLEET = """
gpus:
  - model: A100
    load: {pattern: constant, value: 0.3, noise: 0}
    processes: [{pid: 7, memory_gib: 2}]
  - model: A100
    mig: 2
    load: {pattern: constant, value: 0.3, noise: 0}
    processes: [{pid: 8, memory_gib: 2}]
"""


class Fixed:
    def __init__(self, snapshot: NodeSnapshot) -> None:
        self.value = snapshot

    def snapshot(self) -> NodeSnapshot:
        return self.value


def test_a_mig_gpu_says_not_supported_for_utilization_a_whole_gpu_does_not(make_sim: SimFactory) -> None:
    nvml = real_nvml()
    sim, _ = make_sim(FLEET)
    whole, mig = sim.nvmlDeviceGetHandleByIndex(0), sim.nvmlDeviceGetHandleByIndex(1)
    assert sim.nvmlDeviceGetUtilizationRates(whole).gpu == 30
    assert [s.pid for s in sim.nvmlDeviceGetProcessUtilization(whole, 0)] == [7]
    with pytest.raises(nvml.NVMLError_NotSupported):
        sim.nvmlDeviceGetUtilizationRates(mig)
    with pytest.raises(nvml.NVMLError_NotSupported):
        sim.nvmlDeviceGetProcessUtilization(mig, 0)
    assert sim.nvmlDeviceGetMemoryInfo(mig).used > 0 and sim.nvmlDeviceGetPowerUsage(mig) > 0


def test_a_mig_gpu_reports_everything_but_utilization_and_logs_it_once(
    make_sim: SimFactory, caplog: pytest.LogCaptureFixture
) -> None:
    _, adapter = make_sim(FLEET)
    with caplog.at_level(logging.INFO, logger="exporter.nvml.adapter"):
        for _ in range(3):
            whole, mig = adapter.read().devices
            assert adapter.process_utilization(1) is None
    assert whole.utilization == 0.3 and adapter.process_utilization(0)
    assert mig.up and mig.utilization is None and mig.memory_utilization is None
    assert mig.memory_used_bytes and mig.power_watts and mig.processes
    for call in ("nvmlDeviceGetUtilizationRates", "nvmlDeviceGetProcessUtilization"):
        lines = [r.getMessage() for r in caplog.records if call in r.getMessage()]
        assert len(lines) == 1 and lines[0].startswith("GPU 1: "), (call, lines)

    registry = CollectorRegistry()
    source = Fixed(adapter.read())
    registry.register(GpuCollector(source, "n", extensions=[HealthMetrics(HealthThresholds())]))
    gpus: dict[str, set[str]] = {}
    for family in text_string_to_metric_families(generate_latest(registry).decode()):
        for sample in family.samples:
            gpus.setdefault(sample.name, set()).add(sample.labels.get("gpu", ""))
    assert gpus["gpu_utilization_ratio"] == gpus["gpu_memory_utilization_ratio"] == {"0"}
    assert gpus["gpu_memory_used_bytes"] == gpus["gpu_power_usage_watts"] == {"0", "1"}
    assert gpus["gpu_health_state"] == {"0", "1"}  # still judged from temperature and memory
    assert gpus["gpu_availability_score"] == {"0"}  # it needs utilization: left out, never 0
