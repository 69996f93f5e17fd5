"""The simulated boards' heat: the H100 calibrated on the measured board (41 °C idle at 74 W, 68 °C 50 s into
697 W), and each model's own answers to nvmlDeviceGetTemperatureThreshold, which its thermal slowdown
follows. Simulated time only: the clock is stepped, nothing waits."""

from __future__ import annotations

import pynvml
import pytest

from exporter.nvml.snapshots import BoardTemperatures, DeviceSnapshot
from tests.unit.exporter.conftest import FakeClock, SimFactory

IDLE_H100 = """
pcie_latency_seconds: 0
gpus:
  - {model: H100, count: 1, load: {pattern: constant, value: 0.0, noise: 0}}
"""

BOARDS = """
pcie_latency_seconds: 0
gpus:
  - {model: H100, count: 1}
  - {model: A100, count: 1}
  - {model: V100, count: 1}
"""


def reasons(device: DeviceSnapshot) -> set[str]:
    return {name for name, active in device.clocks_event_reasons or () if active}


def test_the_h100_idles_at_41c_and_74w_and_reaches_68c_50s_into_full_power(make_sim: SimFactory,
                                                                             clock: FakeClock) -> None:
    sim, adapter = make_sim(IDLE_H100)
    idle = adapter.read().devices[0]
    assert (idle.temperature_celsius, idle.power_watts) == (41, 74.0)
    sim.set_utilization(0, 1.0)  # a bf16 matmul: full load from now on
    clock.advance(50)
    busy = adapter.read().devices[0]
    assert busy.power_watts == pytest.approx(697, abs=5)  # at the 700 W cap, as the board under sw_power_cap
    assert "sw_power_cap" in reasons(busy)
    assert busy.temperature_celsius == 68
    clock.advance(25)  # still rising with the lag, but below the 87 C where the driver slows the clocks
    later = adapter.read().devices[0]
    assert later.temperature_celsius is not None and 68 < later.temperature_celsius < 87


def test_each_model_answers_its_own_thresholds(make_sim: SimFactory) -> None:
    sim, adapter = make_sim(BOARDS)
    h100, a100, v100 = (device.board_temperatures for device in adapter.read().devices)
    assert h100 == BoardTemperatures(shutdown=95.0, slowdown=89.0, gpu_max=87.0)  # as the H100 answered
    assert a100 == BoardTemperatures(shutdown=95.0, slowdown=90.0, gpu_max=87.0)
    assert v100 == BoardTemperatures(shutdown=95.0, slowdown=90.0, gpu_max=None)  # NotSupported there
    handle = sim.nvmlDeviceGetHandleByIndex(0)
    with pytest.raises(pynvml.NVMLError_NotSupported):
        sim.nvmlDeviceGetTemperatureThreshold(handle, pynvml.NVML_TEMPERATURE_THRESHOLD_MEM_MAX)
    with pytest.raises(pynvml.NVMLError_InvalidArgument):
        sim.nvmlDeviceGetTemperatureThreshold(handle, pynvml.NVML_TEMPERATURE_THRESHOLD_COUNT)


@pytest.mark.parametrize(("celsius", "expected"), [
    (86, set()), (88, {"sw_thermal"}), (89.5, {"sw_thermal", "hw_thermal"}),
], ids=["below-max-operating", "past-max-operating-87", "past-slowdown-89"])
def test_the_h100_slows_down_at_its_own_thresholds(make_sim: SimFactory, clock: FakeClock, celsius: float,
                                                   expected: set[str]) -> None:
    sim, adapter = make_sim(IDLE_H100)
    sim.set_overheat(0, celsius)
    clock.advance(600)  # twenty time constants: settled
    device = adapter.read().devices[0]
    assert reasons(device) - {"gpu_idle"} == expected


def test_a_threshold_call_that_fails_costs_the_thresholds_only(make_sim: SimFactory) -> None:
    """The thresholds only tune the health bands: any error on them leaves them out, never the GPU."""
    _, adapter = make_sim(IDLE_H100 + "faults:\n  - {type: error, gpu: 0, "
                                      "calls: [nvmlDeviceGetTemperatureThreshold], error: Unknown}\n")
    device = adapter.read().devices[0]
    assert device.up and device.temperature_celsius == 41
    assert device.board_temperatures == BoardTemperatures()
