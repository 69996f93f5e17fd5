"""The simulated NVML moves plausibly, follows the load driver and speaks pynvml's errors."""

from __future__ import annotations

import pytest

from exporter.nvml.adapter import real_nvml
from exporter.simulator.config import default_config
from exporter.simulator.nvml import SimulatedNvml
from tests.unit.exporter.conftest import FakeClock, SimFactory

GIB = 1024**3


def test_raises_pynvml_own_error_classes(clock: FakeClock) -> None:
    nvml = real_nvml()
    sim = SimulatedNvml(default_config(1), clock=clock)
    with pytest.raises(nvml.NVMLError_Uninitialized):
        sim.nvmlDeviceGetCount()
    sim.nvmlInit()
    with pytest.raises(nvml.NVMLError_InvalidArgument):
        sim.nvmlDeviceGetHandleByIndex(5)
    sim.set_lost(0, True)
    with pytest.raises(nvml.NVMLError_GpuIsLost) as info:
        sim.nvmlDeviceGetUtilizationRates(sim._handles[0])
    assert isinstance(info.value, nvml.NVMLError) and info.value.value == nvml.NVML_ERROR_GPU_IS_LOST
    assert sim.NVML_CLOCK_SM == nvml.NVML_CLOCK_SM


def test_power_and_temperature_follow_utilization(make_sim: SimFactory, clock: FakeClock) -> None:
    sim, adapter = make_sim(gpus=1)
    sim.set_utilization(0, 0.05)
    clock.advance(600)
    idle = adapter.read().devices[0]
    sim.set_utilization(0, 0.8)
    just_after = adapter.read().devices[0]
    clock.advance(600)
    busy = adapter.read().devices[0]
    assert idle.power_watts is not None and busy.power_watts is not None and just_after.power_watts
    assert idle.power_watts < 200 < busy.power_watts <= 700
    assert just_after.power_watts == busy.power_watts  # power answers at once...
    assert idle.temperature_celsius is not None and busy.temperature_celsius is not None
    assert just_after.temperature_celsius == idle.temperature_celsius  # ...temperature lags behind
    assert busy.temperature_celsius > idle.temperature_celsius + 15
    assert 60 <= busy.temperature_celsius <= 85


def test_full_load_hits_the_power_cap_and_idle_is_flagged(make_sim: SimFactory) -> None:
    sim, adapter = make_sim(gpus=1)
    sim.set_utilization(0, 1.0)
    d = adapter.read().devices[0]
    reasons = dict(d.clocks_event_reasons or ())
    assert reasons["sw_power_cap"] and not reasons["gpu_idle"]
    assert d.power_watts == 700.0
    assert d.sm_clock_hertz is not None and d.sm_clock_hertz < 1980e6
    sim.set_utilization(0, 0.0)
    d = adapter.read().devices[0]
    reasons = dict(d.clocks_event_reasons or ())
    assert reasons["gpu_idle"] and not reasons["sw_power_cap"]
    assert d.performance_state == 8 and d.sm_clock_hertz == 345e6


def test_processes_drive_memory(make_sim: SimFactory) -> None:
    sim, adapter = make_sim(gpus=1)
    sim.set_utilization(0, 0.0)
    sim.set_processes(0, [(101, 10 * GIB), (102, 20 * GIB)])
    d = adapter.read().devices[0]
    assert d.processes is not None and [p.pid for p in d.processes] == [101, 102]
    assert d.memory_used_bytes == pytest.approx(0.85 * 30 * GIB + 535 * 1024**2, rel=0.001)
    sim.set_processes(0, [])
    d = adapter.read().devices[0]
    assert d.processes == () and d.memory_used_bytes == 535 * 1024**2
    sim.set_processes(0, None)  # back to the configured process
    assert [p.pid for p in adapter.read().devices[0].processes or ()] == [10_000]


def test_load_pattern_moves_over_time_and_driver_overrides_it(make_sim: SimFactory, clock: FakeClock) -> None:
    sim, adapter = make_sim(gpus=1)
    values = set()
    for _ in range(10):
        clock.advance(30)
        values.add(adapter.read().devices[0].utilization)
    assert len(values) >= 5
    sim.set_utilization(0, 0.42)
    assert adapter.read().devices[0].utilization == 0.42
    sim.set_utilization(0, None)
    assert sim.utilization_of(0) != 0.42
    with pytest.raises(ValueError, match=r"0\.\.1"):
        sim.set_utilization(0, 1.5)


def test_same_seed_same_fleet(clock: FakeClock) -> None:
    a = SimulatedNvml(default_config(2), clock=clock)
    b = SimulatedNvml(default_config(2), clock=clock)
    a.nvmlInit()
    b.nvmlInit()
    uuids_a = [a.nvmlDeviceGetUUID(a.nvmlDeviceGetHandleByIndex(i)) for i in range(2)]
    uuids_b = [b.nvmlDeviceGetUUID(b.nvmlDeviceGetHandleByIndex(i)) for i in range(2)]
    assert uuids_a == uuids_b and uuids_a[0] != uuids_a[1]


def test_fan_reported_on_boards_that_have_one(make_sim: SimFactory) -> None:
    _, adapter = make_sim("gpus: [{model: RTX-A6000, count: 1}]")
    d = adapter.read().devices[0]
    assert d.fan_speed_ratio is not None and 0.3 <= d.fan_speed_ratio <= 0.9


def test_event_wait_times_out_with_pynvml_timeout(clock: FakeClock) -> None:
    nvml = real_nvml()
    sim = SimulatedNvml(default_config(1), clock=clock)
    sim.nvmlInit()
    event_set = sim.nvmlEventSetCreate()
    handle = sim.nvmlDeviceGetHandleByIndex(0)
    sim.nvmlDeviceRegisterEvents(handle, nvml.nvmlEventTypeXidCriticalError, event_set)
    with pytest.raises(nvml.NVMLError_Timeout):
        sim.nvmlEventSetWait_v2(event_set, 20)
    sim.nvmlEventSetFree(event_set)
    with pytest.raises(nvml.NVMLError_InvalidArgument):
        sim.nvmlEventSetWait_v2(event_set, 20)
