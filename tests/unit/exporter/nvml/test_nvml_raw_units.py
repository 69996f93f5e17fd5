"""The adapter against a tiny stub answering raw pynvml-shaped values (mW, mJ, KB/s, MHz, percent), so a unit
mistake shared by the adapter and the simulator (which could agree with each other) is caught here."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pynvml
import pytest
from prometheus_client import CollectorRegistry, generate_latest

from exporter.collector import GpuCollector
from exporter.nvml.adapter import NodeSnapshot, NvmlAdapter


class RawNvml:
    """pynvml's errors and constants, and the calls the adapter needs answering like a real one GPU node."""

    def __init__(self, reasons: int = 0x4 | 0x1, pstate: int = 2) -> None:
        for name in dir(pynvml):
            if name.startswith(("NVMLError", "NVML_", "nvmlClocks", "NVMLLibrary")):
                setattr(self, name, getattr(pynvml, name))
        self.reasons = reasons
        self.pstate = pstate
        self.inits = 0
        self.event_reason_calls = 0

    def nvmlInit(self) -> None:
        self.inits += 1

    def nvmlShutdown(self) -> None:
        pass

    def nvmlSystemGetDriverVersion(self) -> str:
        return "550.54.15"

    def nvmlSystemGetCudaDriverVersion_v2(self) -> int:
        return 12040

    def nvmlDeviceGetCount(self) -> int:
        return 1

    def nvmlDeviceGetHandleByIndex(self, index: int) -> object:
        return "handle-0"

    def nvmlDeviceGetUUID(self, handle: object) -> bytes:
        return b"GPU-raw"

    def nvmlDeviceGetName(self, handle: object) -> bytes:
        return b"NVIDIA H100"

    def nvmlDeviceGetUtilizationRates(self, handle: object) -> Any:
        return SimpleNamespace(gpu=57, memory=23)  # percent

    def nvmlDeviceGetMemoryInfo(self, handle: object) -> Any:
        return SimpleNamespace(total=80 * 1024**3, used=20 * 1024**3, free=60 * 1024**3)  # bytes

    def nvmlDeviceGetTemperature(self, handle: object, sensor: int) -> int:
        return 61  # °C

    def nvmlDeviceGetPowerUsage(self, handle: object) -> int:
        return 123456  # mW

    def nvmlDeviceGetEnforcedPowerLimit(self, handle: object) -> int:
        return 700000  # mW

    def nvmlDeviceGetTotalEnergyConsumption(self, handle: object) -> int:
        return 987654321  # mJ

    def nvmlDeviceGetClockInfo(self, handle: object, clock: int) -> int:
        return {pynvml.NVML_CLOCK_SM: 1755, pynvml.NVML_CLOCK_MEM: 2619}[clock]  # MHz

    def nvmlDeviceGetMaxClockInfo(self, handle: object, clock: int) -> int:
        return {pynvml.NVML_CLOCK_SM: 1980, pynvml.NVML_CLOCK_MEM: 2619}[clock]  # MHz

    def nvmlDeviceGetFanSpeed(self, handle: object) -> int:
        return 105  # percent of max; NVML may go above 100

    def nvmlDeviceGetPcieThroughput(self, handle: object, counter: int) -> int:
        return {pynvml.NVML_PCIE_UTIL_TX_BYTES: 2000, pynvml.NVML_PCIE_UTIL_RX_BYTES: 500}[counter]  # KB/s

    def nvmlDeviceGetEncoderUtilization(self, handle: object) -> list[int]:
        return [12, 167000]  # percent, sampling period in us

    def nvmlDeviceGetDecoderUtilization(self, handle: object) -> list[int]:
        return [3, 167000]

    def nvmlDeviceGetPerformanceState(self, handle: object) -> int:
        return self.pstate  # 0..15, or NVML_PSTATE_UNKNOWN (32)

    def nvmlDeviceGetCurrentClocksEventReasons(self, handle: object) -> int:
        self.event_reason_calls += 1
        return self.reasons


def test_raw_nvml_units_become_si_units() -> None:
    adapter = NvmlAdapter(RawNvml())
    adapter.init()
    device = adapter.read().devices[0]
    assert device.up and (device.uuid, device.name) == ("GPU-raw", "NVIDIA H100")
    assert (device.utilization, device.memory_utilization) == (0.57, 0.23)
    assert device.power_watts == pytest.approx(123.456) and device.power_limit_watts == 700.0
    assert device.energy_joules == pytest.approx(987654.321)
    assert (device.sm_clock_hertz, device.memory_clock_hertz) == (1755e6, 2619e6)
    assert device.sm_clock_max_hertz == 1980e6
    assert device.fan_speed_ratio == pytest.approx(1.05)
    assert (device.encoder_utilization, device.decoder_utilization) == (0.12, 0.03)
    assert device.temperature_celsius == 61 and device.memory_total_bytes == 80 * 1024**3
    assert adapter.read_pcie(0) == (2000 * 1024, 500 * 1024)  # KB/s -> bytes/s
    assert adapter.cuda_version == "12.4" and adapter.driver_version == "550.54.15"
    active = [label for label, on in device.clocks_event_reasons or () if on]
    assert active == ["gpu_idle", "sw_power_cap"]


def test_unknown_performance_state_is_left_out_not_exported_as_32() -> None:
    known = NvmlAdapter(RawNvml(pstate=2))
    known.init()
    assert known.read().devices[0].performance_state == 2
    unknown = NvmlAdapter(RawNvml(pstate=pynvml.NVML_PSTATE_UNKNOWN))
    unknown.init()
    snapshot = unknown.read()
    assert snapshot.devices[0].up and snapshot.devices[0].performance_state is None
    registry = CollectorRegistry()
    registry.register(GpuCollector(FixedSnapshot(snapshot), "n"))
    text = generate_latest(registry).decode()
    assert "gpu_up{" in text and "gpu_performance_state" not in text


class FixedSnapshot:
    def __init__(self, snapshot: NodeSnapshot) -> None:
        self.value = snapshot

    def snapshot(self) -> NodeSnapshot:
        return self.value


def test_reason_bits_come_from_the_nvml_module_constants() -> None:
    nvml = RawNvml(reasons=0x4)
    nvml.nvmlClocksEventReasonSwPowerCap = 0x400  # type: ignore[attr-defined]  # a module with other bits
    nvml.nvmlClocksEventReasonGpuIdle = 0x4  # type: ignore[attr-defined]
    adapter = NvmlAdapter(nvml)
    adapter.init()
    active = [label for label, on in adapter.read().devices[0].clocks_event_reasons or () if on]
    assert active == ["gpu_idle"]


def test_reinit_forgets_which_call_name_worked() -> None:
    nvml = RawNvml()
    adapter = NvmlAdapter(nvml)
    adapter.init()
    adapter.read()
    assert adapter._calls.resolved["clocks_event_reasons"] == "nvmlDeviceGetCurrentClocksEventReasons"
    adapter.shutdown()
    # a driver downgrade while NVML was down: only the old call name exists after the re-init
    del RawNvml.nvmlDeviceGetCurrentClocksEventReasons
    try:
        nvml.nvmlDeviceGetCurrentClocksThrottleReasons = lambda handle: 0x40  # type: ignore[attr-defined]
        adapter.init()
        active = [label for label, on in adapter.read().devices[0].clocks_event_reasons or () if on]
        assert active == ["hw_thermal"] and nvml.inits == 2
    finally:
        RawNvml.nvmlDeviceGetCurrentClocksEventReasons = _event_reasons  # type: ignore[method-assign]


_event_reasons = RawNvml.nvmlDeviceGetCurrentClocksEventReasons
