"""What each NVML error class costs, through the real adapter on the SimulatedNvml (which raises pynvml's own
classes): a board gone marks the GPU down, NotSupported / NoPermission leave a field out for the session, any
other error leaves that call's values out of that sweep or pass, counted per (GPU, call, error) and logged at
WARNING once, while the GPU stays up with every other series."""

from __future__ import annotations

import logging

import pytest

from exporter.nvml.adapter import NvmlAdapter, real_nvml
from exporter.nvml.snapshots import BackgroundReading, NvmlErrorCount
from exporter.simulator.config import ERROR_FAULT_ERRORS
from tests.unit.exporter.conftest import FakeClock, SimFactory

# Every error an `error` fault can raise, by what it costs on a sweep call.
GONE = ("GpuIsLost", "ResetRequired", "GpuNotFound", "Uninitialized")
LEFT_OUT = ("NotSupported", "NoPermission")
# InvalidArgument / NotFound on a MIG device's handle relist its GPU's MIG devices (tests/unit/exporter/
# simulator/test_sim_mig.py); on a whole GPU's handle they are one call's error like the others.
FIELD = ("Unknown", "CorruptedInforom", "NoData", "Timeout", "InsufficientPower", "IrqIssue", "Memory",
         "NotReady", "OperatingSystem", "InvalidArgument", "NotFound")


def test_every_error_the_simulator_raises_has_an_expected_effect_here() -> None:
    assert sorted((*GONE, *LEFT_OUT, *FIELD)) == sorted(ERROR_FAULT_ERRORS)


def power_fault(error: str, gpu: int = 0) -> str:
    return f"""
gpus: [{{count: 2}}]
faults: [{{type: error, gpu: {gpu}, calls: [nvmlDeviceGetPowerUsage], error: {error}}}]
"""


def warnings_about(caplog: pytest.LogCaptureFixture, text: str) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING and text in r.getMessage()]


@pytest.mark.parametrize("error", FIELD)
def test_a_field_error_leaves_that_call_out_and_the_gpu_up(
    make_sim: SimFactory, caplog: pytest.LogCaptureFixture, error: str
) -> None:
    _, adapter = make_sim(power_fault(error))
    with caplog.at_level(logging.INFO, logger="exporter"):
        for _ in range(3):
            snapshot = adapter.read()
    d0, d1 = snapshot.devices
    assert d0.up and d0.error is None and d0.power_watts is None
    assert None not in (d0.utilization, d0.temperature_celsius, d0.memory_used_bytes, d0.energy_joules,
                        d0.power_limit_watts, d0.ecc_corrected)
    assert d0.failed_calls == ("nvmlDeviceGetPowerUsage",) and d0.missing_fields == ("power",)
    assert d1.up and d1.power_watts is not None and d1.failed_calls == ()
    assert snapshot.nvml_errors == (NvmlErrorCount(0, "nvmlDeviceGetPowerUsage", error, 3),)
    lines = warnings_about(caplog, "nvmlDeviceGetPowerUsage")
    assert len(lines) == 1 and f"NVMLError_{error}" in lines[0] and "GPU 0" in lines[0]


@pytest.mark.parametrize("error", GONE)
def test_an_error_meaning_the_board_is_gone_marks_the_gpu_down(make_sim: SimFactory, error: str) -> None:
    _, adapter = make_sim(power_fault(error, gpu=1))
    d0, d1 = adapter.read().devices
    assert d0.up and d0.power_watts is not None
    assert not d1.up and d1.error is not None and f"NVMLError_{error}" in d1.error
    assert d1.uuid and d1.temperature_celsius is None  # identity kept, values dropped
    assert adapter.error_counts() == ()  # a GPU down is gpu_up 0, not a field error


@pytest.mark.parametrize("error", LEFT_OUT)
def test_not_supported_leaves_the_field_out_uncounted(make_sim: SimFactory, error: str) -> None:
    _, adapter = make_sim(power_fault(error))
    d0, _ = adapter.read().devices
    assert d0.up and d0.power_watts is None and d0.temperature_celsius is not None
    assert d0.failed_calls == () and adapter.error_counts() == ()


def test_a_field_error_lasts_only_while_the_fault_does(make_sim: SimFactory, clock: FakeClock) -> None:
    _, adapter = make_sim("""
gpus: [{count: 1}]
faults: [{type: error, gpu: 0, calls: [nvmlDeviceGetTemperature], error: Timeout, at: 10, until: 20}]
""")
    clock.advance(10)
    failing = adapter.read().devices[0]
    assert failing.up and failing.temperature_celsius is None and failing.missing_fields == ("temperature",)
    clock.advance(10)
    back = adapter.read().devices[0]
    assert back.temperature_celsius is not None and back.failed_calls == ()
    assert adapter.error_counts() == (NvmlErrorCount(0, "nvmlDeviceGetTemperature", "Timeout", 1),)


@pytest.mark.parametrize("call, missing", [
    ("nvmlDeviceGetMemoryInfo", ("memory",)),  # the _v2 call, under the name a fault gives
    ("nvmlDeviceGetCurrentClocksEventReasons", ("clocks_event_reasons",)),  # a versioned call
    ("nvmlDeviceGetComputeRunningProcesses_v3", ("processes",)),
    ("nvmlDeviceGetRemappedRows", ("row_remap",)),
    ("nvmlDeviceGetFieldValues", ("memory_temperature",)),
    ("nvmlDeviceGetTotalEccErrors", ("ecc_errors",)),  # asked twice a sweep (corrected, uncorrected)
])
def test_every_kind_of_sweep_call_costs_only_its_own_fields(
    make_sim: SimFactory, call: str, missing: tuple[str, ...]
) -> None:
    _, adapter = make_sim(f"""
gpus: [{{count: 1}}]
faults: [{{type: error, gpu: 0, calls: [{call}], error: Unknown}}]
""")
    device = adapter.read().devices[0]
    assert device.up and device.missing_fields == missing
    assert device.utilization is not None and device.power_watts is not None
    assert [(c.call, c.error) for c in adapter.error_counts()] == [(call, "Unknown")]


def test_an_error_of_a_static_fact_is_asked_again_on_the_next_sweep(make_sim: SimFactory,
                                                                    clock: FakeClock) -> None:
    _, adapter = make_sim("""
gpus: [{count: 1}]
faults: [{type: error, gpu: 0, calls: [nvmlDeviceGetPciInfo], error: Unknown, until: 10}]
""")
    first = adapter.read().devices[0]
    assert first.up and first.pci_bus_id == "" and first.temperature_celsius is not None
    clock.advance(10)
    assert adapter.read().devices[0].pci_bus_id == "00000000:18:00.0"


def test_an_error_reading_the_uuid_marks_the_gpu_down(make_sim: SimFactory) -> None:
    _, adapter = make_sim("""
gpus: [{count: 2}]
faults: [{type: error, gpu: 0, calls: [nvmlDeviceGetUUID], error: Unknown}]
""", init=False)
    adapter.init()
    d0, d1 = adapter.read().devices
    assert not d0.up and d0.error is not None and "NVMLError_Unknown" in d0.error and d1.up


# -- the background pass: one call's error costs that call's values only ---------------------------------

def background(adapter: NvmlAdapter, clock: FakeClock, passes: int) -> BackgroundReading | None:
    """read_background of GPU 0 `passes` times, 5 s apart (GPM computes between two passes)."""
    reading = None
    for _ in range(passes):
        adapter.read()
        reading = adapter.read_background(0)
        clock.advance(5)
    return reading


@pytest.mark.parametrize("model, call, lost, kept", [
    ("H100", "nvmlDeviceGetViolationStatus", "power_violation_seconds", "nvlinks"),
    ("H100", "nvmlDeviceGetNvLinkState", "nvlinks", "power_violation_seconds"),
    ("H100", "nvmlDeviceGetFieldValues", "nvlink_tx_bytes", "nvlinks"),
    ("V100", "nvmlDeviceGetRetiredPages", "retired_pages_single_bit", "power_violation_seconds"),
    ("H100", "nvmlGpmSampleGet", "gpm", "nvlinks"),
    ("H100", "nvmlGpmMetricsGet", "gpm", "power_violation_seconds"),
    ("H100", "nvmlGpmQueryDeviceSupport", "gpm", "nvlinks"),
])
def test_a_background_call_error_costs_that_call_only(
    make_sim: SimFactory, clock: FakeClock, caplog: pytest.LogCaptureFixture, model: str, call: str,
    lost: str, kept: str
) -> None:
    _, adapter = make_sim(f"""
gpus: [{{model: {model}}}]
faults: [{{type: error, gpu: 0, calls: [{call}], error: NoData}}]
""")
    with caplog.at_level(logging.INFO, logger="exporter"):
        reading = background(adapter, clock, passes=3)
    assert reading is not None
    assert getattr(reading if lost == "gpm" else reading.reliability, lost) is None
    assert getattr(reading.reliability, kept) is not None
    counted = {(c.call, c.error) for c in adapter.error_counts()}
    assert (call, "NoData") in counted
    assert len(warnings_about(caplog, call)) == 1


def test_nvlink_links_refused_by_an_error_are_asked_again_next_pass(make_sim: SimFactory,
                                                                    clock: FakeClock) -> None:
    _, adapter = make_sim("""
gpus: [{model: H100}]
faults: [{type: error, gpu: 0, calls: [nvmlDeviceGetNvLinkState], error: Unknown, until: 5}]
""")
    first = adapter.read_background(0)
    assert first is not None and first.reliability.nvlinks is None
    clock.advance(5)
    second = adapter.read_background(0)
    assert second is not None and second.reliability.nvlinks is not None
    assert len(second.reliability.nvlinks) == 18


@pytest.mark.parametrize("call", ["nvmlDeviceGetPcieThroughput", "nvmlDeviceGetProcessUtilization"])
def test_pcie_and_process_utilization_errors_are_counted_and_cost_their_values(
    make_sim: SimFactory, call: str
) -> None:
    _, adapter = make_sim(f"""
gpus: [{{count: 1}}]
faults: [{{type: error, gpu: 0, calls: [{call}], error: Timeout}}]
""")
    adapter.read()
    assert adapter.read_pcie(0) == ((None, None) if "Pcie" in call else adapter.read_pcie(0))
    if "Process" in call:
        assert adapter.process_utilization(0) is None
    else:
        assert adapter.process_utilization(0) is not None
    assert [(c.call, c.error) for c in adapter.error_counts()] == [(call, "Timeout")]


def test_a_gpu_gone_in_the_background_raises_for_the_sweep_to_report(make_sim: SimFactory) -> None:
    _, adapter = make_sim("""
gpus: [{model: H100}]
faults: [{type: error, gpu: 0, calls: [nvmlDeviceGetViolationStatus], error: GpuIsLost}]
""")
    adapter.read()
    with pytest.raises(real_nvml().NVMLError_GpuIsLost):
        adapter.read_background(0)
    assert adapter.error_counts() == ()
