"""nvmlDeviceGetProcessUtilization of the simulated NVML: the processes time-slicing a GPU split its SM and
memory utilization by their `sm_share` / `memory_share` weights, in whole percents that add up to what
nvmlDeviceGetUtilizationRates answers at the same instant; NotFound when no process ran since the
timestamp."""

from __future__ import annotations

import pytest

from exporter.nvml.adapter import real_nvml
from exporter.simulator.physics import apportion
from tests.unit.exporter.conftest import FakeClock, SimFactory

NVML = real_nvml()


@pytest.mark.parametrize(("total", "weights", "parts"), [
    (60, [1, 2], [20, 40]),
    (50, [1, 1, 1], [17, 17, 16]),  # rounding each third would give 51
    (33, [3, 1], [25, 8]),
    (1, [1, 1], [1, 0]),
    (0, [1, 2], [0, 0]),
    (40, [0, 0], [0, 0]),  # no weight: nobody ran
    (40, [0, 1], [0, 40]),
    (100, [1], [100]),
], ids=lambda v: None)
def test_apportion_splits_whole_percents_that_add_up(total: int, weights: list[float],
                                                     parts: list[int]) -> None:
    assert apportion(total, weights) == parts


def fleet(*gpus: tuple[float, str]) -> str:
    """One H100 per (constant load, processes list)."""
    return "gpus:\n" + "".join(f"  - {{model: H100, load: {{pattern: constant, value: {load}, noise: 0}}, "
                               f"processes: {processes}}}\n" for load, processes in gpus)


@pytest.mark.parametrize(("load", "processes", "sm", "memory"), [
    (0.6, "[{pid: 1, sm_share: 1}, {pid: 2, sm_share: 2}]", {1: 20, 2: 40}, {1: 11, 2: 22}),
    (0.6, "[{pid: 1, sm_share: 1, memory_share: 3}, {pid: 2, sm_share: 2, memory_share: 0}]",
     {1: 20, 2: 40}, {1: 33, 2: 0}),
    (0.5, "[{pid: 1}, {pid: 2}, {pid: 3}]", {1: 17, 2: 17, 3: 16}, {1: 10, 2: 9, 3: 9}),
    (0.37, "[{pid: 1, sm_share: 0}, {pid: 2, sm_share: 5}]", {1: 0, 2: 37}, {1: 0, 2: 20}),
], ids=["1:2", "memory weights apart", "three equal", "one idle"])
def test_processes_add_up_to_the_device_utilization(make_sim: SimFactory, load: float, processes: str,
                                                     sm: dict[int, int], memory: dict[int, int]) -> None:
    sim, _ = make_sim(fleet((load, processes)))
    handle = sim.nvmlDeviceGetHandleByIndex(0)
    rates = sim.nvmlDeviceGetUtilizationRates(handle)
    samples = sim.nvmlDeviceGetProcessUtilization(handle, 0)
    assert {s.pid: s.smUtil for s in samples} == sm
    assert {s.pid: s.memUtil for s in samples} == memory
    assert sum(sm.values()) == rates.gpu and sum(memory.values()) == rates.memory


def test_not_found_when_no_process_ran_since_the_timestamp(make_sim: SimFactory, clock: FakeClock) -> None:
    sim, _ = make_sim(fleet((0.5, "[{pid: 1}]"), (0.5, "[]")))
    busy, idle = (sim.nvmlDeviceGetHandleByIndex(i) for i in (0, 1))
    with pytest.raises(NVML.NVMLError_NotFound):
        sim.nvmlDeviceGetProcessUtilization(idle, 0)
    (sample,) = sim.nvmlDeviceGetProcessUtilization(busy, 0)
    with pytest.raises(NVML.NVMLError_NotFound):
        sim.nvmlDeviceGetProcessUtilization(busy, sample.timeStamp)
    clock.advance(1.0)
    (later,) = sim.nvmlDeviceGetProcessUtilization(busy, sample.timeStamp)
    assert later.timeStamp > sample.timeStamp
