"""The NVML adapter against the simulated NVML: values and units, and every injected fault."""

from __future__ import annotations

import logging

import pytest

from exporter.errors import NvmlUnavailableError
from exporter.nvml.adapter import NvmlAdapter, real_nvml
from exporter.simulator.nvml import SimHandle
from tests.unit.exporter.conftest import FakeClock, SimFactory

GIB = 1024**3


def test_reads_every_field_in_base_units(make_sim: SimFactory) -> None:
    sim, adapter = make_sim(gpus=2)
    snapshot = adapter.read()
    assert snapshot.nvml_up and snapshot.driver_version == "550.54.15" and snapshot.cuda_version == "12.4"
    assert [d.index for d in snapshot.devices] == [0, 1]
    d = snapshot.devices[0]
    assert d.up and d.error is None
    assert d.uuid.startswith("GPU-") and len(d.uuid) == 40
    assert d.name == "NVIDIA H100 80GB HBM3" and d.pci_bus_id == "00000000:18:00.0"
    assert d.utilization is not None and 0.0 <= d.utilization <= 1.0
    assert d.memory_total_bytes == 81559 * 1024 * 1024
    assert d.memory_used_bytes is not None and d.memory_free_bytes is not None
    assert d.memory_used_bytes + d.memory_free_bytes == d.memory_total_bytes
    assert d.power_limit_watts == 700.0
    assert d.power_watts is not None and 70.0 <= d.power_watts <= 700.0
    assert d.sm_clock_max_hertz == 1980e6 and d.memory_clock_max_hertz == 2619e6
    assert d.sm_clock_hertz is not None and d.sm_clock_hertz <= d.sm_clock_max_hertz
    assert d.performance_state == 0
    assert d.clocks_event_reasons is not None and len(d.clocks_event_reasons) == 9
    assert d.ecc_corrected == 0 and d.ecc_uncorrected == 0
    assert d.encoder_utilization == 0.0 and d.decoder_utilization == 0.0
    assert d.processes is not None and [p.pid for p in d.processes] == [10_000]
    assert d.processes[0].used_memory_bytes is not None and d.processes[0].used_memory_bytes > 25 * GIB
    assert d.fan_speed_ratio is None  # H100 SXM has no fan: NVML says NotSupported
    assert d.pcie_tx_bytes_per_second is None  # never read on a sweep
    assert sim.calls["nvmlDeviceGetPcieThroughput"] == 0


def test_energy_is_a_counter_in_joules(make_sim: SimFactory, clock: FakeClock) -> None:
    _, adapter = make_sim(gpus=1)
    first = adapter.read().devices[0]
    clock.advance(10)
    second = adapter.read().devices[0]
    assert first.energy_joules is not None and second.energy_joules is not None
    gained = second.energy_joules - first.energy_joules
    assert second.power_watts is not None
    assert 70 * 10 <= gained <= 700 * 10


def test_pcie_is_read_separately_in_bytes_per_second(make_sim: SimFactory) -> None:
    sim, adapter = make_sim(gpus=1)
    sim.set_utilization(0, 0.5)
    tx, rx = adapter.read_pcie(0)
    assert tx == pytest.approx(64_000_000 * 0.35 * 0.5 * 1024, rel=0.01)
    assert rx == pytest.approx(64_000_000 * 0.15 * 0.5 * 1024, rel=0.01)
    assert sim.calls["nvmlDeviceGetPcieThroughput"] == 2


def test_not_supported_leaves_the_field_out_and_logs_once(make_sim: SimFactory,
                                                         caplog: pytest.LogCaptureFixture) -> None:
    _, adapter = make_sim("""
gpus: [{model: H100, count: 2}]
faults:
  - {type: not_supported, gpu: 0, calls: [nvmlDeviceGetPowerUsage, nvmlDeviceGetTemperature]}
""")
    with caplog.at_level(logging.INFO, logger="exporter.nvml.adapter"):
        for _ in range(3):
            snapshot = adapter.read()
    d0, d1 = snapshot.devices
    assert d0.up and d0.power_watts is None and d0.temperature_celsius is None
    assert d0.utilization is not None  # the rest of GPU 0 still reports
    assert d1.power_watts is not None and d1.temperature_celsius is not None
    power_lines = [r for r in caplog.records if "nvmlDeviceGetPowerUsage" in r.getMessage()]
    assert len(power_lines) == 1


def test_gpu_lost_at_a_time_marks_only_that_gpu_down_and_recovers(make_sim: SimFactory,
                                                                   clock: FakeClock) -> None:
    _, adapter = make_sim("""
gpus: [{model: H100, count: 3}]
faults: [{type: gpu_lost, gpu: 1, at: 30, until: 60}]
""")
    assert all(d.up for d in adapter.read().devices)
    clock.advance(30)
    devices = adapter.read().devices
    assert [d.up for d in devices] == [True, False, True]
    lost = devices[1]
    assert lost.error is not None and "NVMLError_GpuIsLost" in lost.error
    assert lost.uuid and lost.utilization is None  # identity kept, values dropped
    clock.advance(30)
    assert all(d.up for d in adapter.read().devices)


def test_gpu_lost_before_init_is_reported_down_with_its_index(make_sim: SimFactory) -> None:
    _, adapter = make_sim("""
gpus: [{model: A100, count: 2}]
faults: [{type: gpu_lost, gpu: 0}]
""")
    d0, d1 = adapter.read().devices
    assert (d0.index, d0.up, d0.uuid) == (0, False, "")
    assert d1.up and d1.name == "NVIDIA A100-SXM4-80GB"


@pytest.mark.parametrize("missing, expected_call", [
    (["nvmlDeviceGetCurrentClocksEventReasons"], "nvmlDeviceGetCurrentClocksThrottleReasons"),
    (["nvmlDeviceGetComputeRunningProcesses_v3"], "nvmlDeviceGetComputeRunningProcesses_v2"),
], ids=["clocks-event-reasons-to-throttle-reasons", "processes-v3-to-v2"])
def test_newer_calls_fall_back_to_older_ones(
    make_sim: SimFactory, missing: list[str], expected_call: str
) -> None:
    sim, adapter = make_sim(f"""
gpus: [{{model: H100, count: 1}}]
faults: [{{type: function_not_found, calls: {missing}}}]
""")
    for _ in range(3):
        d = adapter.read().devices[0]
    assert d.up and d.clocks_event_reasons is not None and d.processes is not None
    assert sim.calls[expected_call] == 3
    assert sim.calls[missing[0]] == 1  # resolved once, not retried on every sweep


def test_library_mismatch_on_the_unversioned_call_leaves_processes_out(make_sim: SimFactory) -> None:
    sim, adapter = make_sim("""
gpus: [{model: H100, count: 1}]
faults:
  - type: function_not_found
    calls: [nvmlDeviceGetComputeRunningProcesses_v3, nvmlDeviceGetComputeRunningProcesses_v2]
""")
    nvml = real_nvml()
    with pytest.raises(nvml.NVMLLibraryMismatchError):
        sim.nvmlDeviceGetComputeRunningProcesses(sim.nvmlDeviceGetHandleByIndex(0))
    d = adapter.read().devices[0]
    assert d.up and d.processes is None and d.utilization is not None


@pytest.mark.parametrize("error", ["LibraryNotFound", "DriverNotLoaded"])
def test_no_library_or_driver_raises_our_error_chained(make_sim: SimFactory, error: str) -> None:
    _, adapter = make_sim(f"""
gpus: [{{model: H100, count: 1}}]
faults: [{{type: nvml_unavailable, error: {error}}}]
""", init=False)
    with pytest.raises(NvmlUnavailableError, match=f"NVMLError_{error}") as info:
        adapter.init()
    assert isinstance(info.value.__cause__, getattr(real_nvml(), f"NVMLError_{error}"))
    assert not adapter.initialized


def test_real_pynvml_without_a_driver_is_unavailable_not_a_crash() -> None:
    adapter = NvmlAdapter(real_nvml())
    try:
        adapter.init()
    except NvmlUnavailableError as exc:
        assert "NVML init failed" in str(exc)
    else:  # a machine with a GPU: then the adapter must read it
        assert adapter.read().nvml_up
        adapter.shutdown()


def test_driver_going_away_mid_run_is_library_wide(make_sim: SimFactory, clock: FakeClock) -> None:
    _, adapter = make_sim("""
gpus: [{model: H100, count: 2}]
faults: [{type: nvml_unavailable, error: DriverNotLoaded, at: 10}]
""")
    assert adapter.read().nvml_up
    clock.advance(10)
    with pytest.raises(NvmlUnavailableError, match="stopped answering"):
        adapter.read()


def test_process_utilization_splits_the_gpu_by_share(make_sim: SimFactory) -> None:
    sim, adapter = make_sim(gpus=1)
    sim.set_utilization(0, 0.6)
    sim.set_processes(0, [(11, 4 * GIB), (12, 2 * GIB)])
    samples = adapter.process_utilization(0)
    assert samples is not None
    assert {(s.pid, s.sm_utilization) for s in samples} == {(11, 0.3), (12, 0.3)}
    assert adapter.process_utilization(0, since_us=samples[0].timestamp_us) == ()
    sim.set_processes(0, [])
    assert adapter.process_utilization(0) == ()


def test_xid_events_scheduled_and_injected(make_sim: SimFactory, clock: FakeClock) -> None:
    sim, adapter = make_sim("""
gpus: [{model: H100, count: 2}]
faults: [{type: xid, gpu: 1, at: 20, code: 79}]
""")
    events = adapter.open_xid_events()
    try:
        assert events.wait(10) is None  # nothing due yet: NVMLError_Timeout becomes None
        clock.advance(20)
        event = events.wait(1000)
        assert event is not None and (event.gpu_index, event.xid) == (1, 79)
        assert events.wait(10) is None  # delivered once
        sim.inject_xid(0, 48)
        event = events.wait(1000)
        assert event is not None and (event.gpu_index, event.xid) == (0, 48)
    finally:
        events.close()


def test_adapter_rejects_something_that_is_not_nvml() -> None:
    with pytest.raises(TypeError, match="pynvml-like module"):
        NvmlAdapter(object())


class OldPynvml:
    """An older pynvml module: the newer function names do not exist at all (AttributeError)."""

    MISSING = ("nvmlDeviceGetCurrentClocksEventReasons", "nvmlSystemGetCudaDriverVersion_v2",
               "nvmlDeviceGetTotalEnergyConsumption")

    def __init__(self, inner: object) -> None:
        self._inner = inner

    def __getattr__(self, name: str) -> object:
        if name in self.MISSING:
            raise AttributeError(name)
        return getattr(self._inner, name)


def test_an_older_pynvml_without_the_new_names_still_works(make_sim: SimFactory) -> None:
    sim, _ = make_sim(gpus=1, init=False)
    adapter = NvmlAdapter(OldPynvml(sim))
    adapter.init()
    d = adapter.read().devices[0]
    assert adapter.cuda_version == "12.4"
    assert d.up and d.clocks_event_reasons is not None and d.energy_joules is None
    assert sim.calls["nvmlDeviceGetCurrentClocksThrottleReasons"] == 1


def test_event_handles_are_mapped_back_to_indexes(make_sim: SimFactory) -> None:
    _, adapter = make_sim(gpus=2)
    assert adapter.index_of_handle(SimHandle(1)) == 1  # a different object: resolved through NVML
