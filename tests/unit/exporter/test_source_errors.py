"""The background pass of NvmlSource under NVML errors: one call's error costs that call's values only (logged
at WARNING once by the adapter), and a GPU gone is left to the sweep's own WARNING, not logged again here."""

from __future__ import annotations

import logging

import pytest

from exporter.nvml.adapter import NvmlAdapter
from exporter.simulator.config_file import parse_sim_config
from exporter.simulator.nvml import SimulatedNvml
from exporter.source import NvmlSource, SourceSettings
from tests.support import wait_for
from tests.unit.exporter.conftest import FakeClock


def test_a_background_call_error_costs_that_call_and_a_lost_gpu_is_not_warned_twice(
    clock: FakeClock, sources: list[NvmlSource], caplog: pytest.LogCaptureFixture
) -> None:
    sim = SimulatedNvml(parse_sim_config("""
gpus: [{model: H100, count: 2}]
faults:
  - {type: error, gpu: 0, calls: [nvmlDeviceGetViolationStatus], error: NoData}
  - {type: error, gpu: 1, calls: [nvmlDeviceGetViolationStatus], error: GpuIsLost}
""", "t.yaml"), clock=clock, pcie_latency_seconds=0)
    source = NvmlSource(NvmlAdapter(sim, clock=clock), SourceSettings(
        min_interval=0, pcie_interval=3600, init_retry_interval=3600, profiling_interval=3600),
        clock=clock, monotonic=clock)
    sources.append(source)
    with caplog.at_level(logging.DEBUG, logger="exporter"):
        source.start()  # one background pass now, the next an hour later

        def pass_done() -> bool:
            return any("GPU 1: profiling sample failed" in r.getMessage() for r in caplog.records)

        wait_for(pass_done, what="the background pass over both GPUs")
        device = source.snapshot().devices[0]
    assert device.reliability is not None and device.reliability.power_violation_seconds is None
    assert device.reliability.nvlinks is not None and device.gpm_supported  # the rest of the pass stands
    warned = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(warned) == 1 and "GPU 0: nvmlDeviceGetViolationStatus failed" in warned[0]
    assert "NVMLError_NoData" in warned[0]
    lost = [r for r in caplog.records if "GPU 1: profiling sample failed" in r.getMessage()]
    assert [r.levelno for r in lost] == [logging.DEBUG]
