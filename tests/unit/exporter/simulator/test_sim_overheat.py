"""The simulator's overheat fault and `set_overheat` driver: a GPU heats up with the thermal lag, throttles
like a real one past the slowdown thresholds (sw_thermal, hw_thermal, lower SM clock and power), and cools
back down once the fault ends."""

from __future__ import annotations

import math

import pytest

from exporter.nvml.snapshots import DeviceSnapshot
from exporter.simulator.physics import SW_THERMAL_CELSIUS, THERMAL_TAU_SECONDS
from tests.unit.exporter.conftest import FakeClock, SimFactory

HOT = """
gpus:
  - {model: H100, count: 2, load: {pattern: constant, value: 1.0, noise: 0}}
faults:
  - {type: overheat, gpu: 0, at: 60, until: 300, celsius: 92}
"""


def reasons(device: DeviceSnapshot) -> set[str]:
    return {name for name, active in device.clocks_event_reasons or () if active}


def test_overheat_heats_with_the_lag_throttles_and_cools_after_until(make_sim: SimFactory,
                                                                     clock: FakeClock) -> None:
    sim, adapter = make_sim(HOT)
    normal = sim._gpus[0].temperature  # 74.4 °C: an H100 at its power limit
    before, cool = adapter.read().devices
    assert before.temperature_celsius == cool.temperature_celsius < SW_THERMAL_CELSIUS
    assert reasons(before) == {"sw_power_cap"} and before.sm_clock_hertz is not None

    clock.advance(90)  # 30 s (one time constant) into the fault
    rising = adapter.read().devices[0]
    assert rising.temperature_celsius is not None and before.temperature_celsius is not None
    assert before.temperature_celsius + 5 < rising.temperature_celsius < 92

    clock.advance(200)  # t = 290, still inside the window, settled
    hot, other = adapter.read().devices
    assert hot.temperature_celsius == 92
    assert reasons(hot) == {"sw_thermal", "hw_thermal"}  # heat, not the power limit, holds the clocks now
    assert hot.sm_clock_hertz is not None and hot.sm_clock_hertz <= 0.5 * 1980e6 < before.sm_clock_hertz
    assert hot.power_watts is not None and other.power_watts is not None
    assert hot.power_watts < other.power_watts  # lower clocks draw less power
    assert other.temperature_celsius == cool.temperature_celsius and reasons(other) == {"sw_power_cap"}

    clock.advance(20)  # t = 310: the fault ended, the GPU is still hot (thermal lag)
    assert (adapter.read().devices[0].temperature_celsius or 0) > before.temperature_celsius + 3
    clock.advance(600)
    after = adapter.read().devices[0]
    assert sim._gpus[0].temperature == pytest.approx(normal, abs=0.01)  # NVML rounds 74.4 either way
    assert reasons(after) == reasons(before) and after.sm_clock_hertz == before.sm_clock_hertz
    assert after.power_watts == before.power_watts


def test_a_long_step_across_the_start_heats_only_from_at(make_sim: SimFactory, clock: FakeClock) -> None:
    """Reading rarely must not heat the GPU before the fault starts: the lag counts from `at`."""
    sim, _ = make_sim(HOT)
    normal = sim._gpus[0].temperature
    clock.advance(90)
    handle = sim.nvmlDeviceGetHandleByIndex(0)
    reading = sim.nvmlDeviceGetTemperature(handle, sim.NVML_TEMPERATURE_GPU)
    expected = 92 + (normal - 92) * math.exp(-30 / THERMAL_TAU_SECONDS)
    assert abs(reading - expected) <= 0.5  # NVML reports whole degrees
    clock.advance(1_000)  # across `until` and long after: back to normal
    assert abs(sim.nvmlDeviceGetTemperature(handle, sim.NVML_TEMPERATURE_GPU) - normal) <= 0.5


def test_fault_from_the_start_reads_hot_at_once(make_sim: SimFactory) -> None:
    _, adapter = make_sim("gpus: [{count: 2}]\nfaults: [{type: overheat, gpu: 1, celsius: 88}]")
    cool, hot = adapter.read().devices
    assert hot.temperature_celsius == 88 and reasons(hot) >= {"sw_thermal"}
    assert "hw_thermal" not in reasons(hot)  # 88 °C: past the driver's slowdown, below the hardware's
    assert "sw_thermal" not in reasons(cool)


def test_overheat_below_the_normal_temperature_changes_nothing(make_sim: SimFactory) -> None:
    _, adapter = make_sim("""
gpus: [{count: 2, load: {pattern: constant, value: 1.0, noise: 0}}]
faults: [{type: overheat, gpu: 0, celsius: 40}]
""")
    a, b = adapter.read().devices
    assert a.temperature_celsius == b.temperature_celsius and a.temperature_celsius is not None
    assert a.temperature_celsius > 40


def test_driver_set_overheat_heats_and_releases(make_sim: SimFactory, clock: FakeClock) -> None:
    sim, adapter = make_sim(gpus=1)
    sim.set_utilization(0, 0.5)
    clock.advance(600)
    normal = adapter.read().devices[0].temperature_celsius
    sim.set_overheat(0, 95)
    assert adapter.read().devices[0].temperature_celsius == normal  # lags: not at once
    clock.advance(300)
    hot = adapter.read().devices[0]
    assert hot.temperature_celsius == 95 and {"sw_thermal", "hw_thermal"} <= reasons(hot)
    sim.set_overheat(0, None)
    clock.advance(600)
    cooled = adapter.read().devices[0]
    assert cooled.temperature_celsius == normal and not {"sw_thermal", "hw_thermal"} & reasons(cooled)
    with pytest.raises(ValueError, match=r"30\.\.120"):
        sim.set_overheat(0, 200)
