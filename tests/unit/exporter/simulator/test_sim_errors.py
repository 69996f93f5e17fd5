"""The `error` fault: one NVML call failing with one of pynvml's errors, and what the exporter makes of it.

NotSupported / NoPermission leave one field out (logged once); an error meaning the board is gone
(GpuIsLost, ...) marks that GPU down for the sweep (one WARNING, one INFO when it answers again); any other
error (Unknown, ...) leaves that call's series out, counted, the GPU up; the other GPUs keep reporting either
way. What each class does through the adapter: tests/unit/exporter/nvml/test_field_errors.py.
"""

from __future__ import annotations

import logging
import re

import pytest

from exporter.collector import GpuCollector
from exporter.errors import ConfigError
from exporter.nvml.adapter import NvmlAdapter, real_nvml
from exporter.simulator.config import ERROR_FAULT_ERRORS
from exporter.simulator.config_file import parse_sim_config
from exporter.simulator.nvml import SimulatedNvml
from exporter.source import NvmlSource, SourceSettings
from tests.scrape import collect
from tests.unit.exporter.conftest import FakeClock, SimFactory

Samples = dict[str, dict[str, float]]


def scrape(collector: GpuCollector) -> Samples:
    """metric name -> {gpu label: value} (first series per GPU)."""
    by_gpu: Samples = {}
    for name, series in collect(collector).items():
        for labels, value in series:
            by_gpu.setdefault(name, {}).setdefault(labels.get("gpu", ""), value)
    return by_gpu


def test_every_allowed_error_is_a_pynvml_error_class() -> None:
    nvml = real_nvml()
    for name in ERROR_FAULT_ERRORS:
        assert issubclass(getattr(nvml, f"NVMLError_{name}"), nvml.NVMLError), name


def test_parses_with_unknown_as_the_default_error() -> None:
    config = parse_sim_config("""
gpus: [{count: 2}]
faults:
  - {type: error, gpu: 1, calls: [nvmlDeviceGetPowerUsage], at: 5, until: 10}
  - {type: error, calls: [nvmlDeviceGetTemperature], error: NoPermission}
""", "f.yaml")
    unknown, denied = config.faults
    assert (unknown.type, unknown.gpus, unknown.calls, unknown.error) == (
        "error", (1,), ("nvmlDeviceGetPowerUsage",), "Unknown")
    assert denied.error == "NoPermission" and denied.gpus is None


@pytest.mark.parametrize("text, field, expected", [
    ("faults: [{type: error}]", "faults[0].calls", "NVML call names"),
    ("faults: [{type: error, calls: [nvmlDeviceGetName], error: Oops}]", "faults[0].error",
     "expected one of Unknown, NoPermission"),
    ("faults: [{type: error, calls: [nvmlDeviceGetName], error: DriverNotLoaded}]", "faults[0].error",
     "nvml_unavailable"),
    ("faults: [{type: gpu_lost, error: Unknown}]", "faults[0].error",
     "only for an error or nvml_unavailable"),
], ids=["no-calls", "unknown-error", "library-wide-error", "error-on-another-fault"])
def test_bad_error_faults(text: str, field: str, expected: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse_sim_config("gpus: [{count: 2}]\n" + text, "f.yaml")
    assert re.match(rf"f\.yaml:[1-9]\d*: {re.escape(field)}: ", str(info.value)), str(info.value)
    assert expected in str(info.value)


@pytest.mark.parametrize("error", ERROR_FAULT_ERRORS)
def test_the_simulator_raises_pynvml_own_class(clock: FakeClock, error: str) -> None:
    nvml = real_nvml()
    sim = SimulatedNvml(parse_sim_config(f"""
gpus: [{{count: 2}}]
faults: [{{type: error, gpu: 1, calls: [nvmlDeviceGetPowerUsage], error: {error}}}]
""", "f.yaml"), clock=clock)
    sim.nvmlInit()
    with pytest.raises(getattr(nvml, f"NVMLError_{error}")) as info:
        sim.nvmlDeviceGetPowerUsage(sim.nvmlDeviceGetHandleByIndex(1))
    assert isinstance(info.value, nvml.NVMLError)
    assert sim.nvmlDeviceGetPowerUsage(sim.nvmlDeviceGetHandleByIndex(0)) > 0  # GPU 0 is not affected
    assert sim.nvmlDeviceGetTemperature(sim.nvmlDeviceGetHandleByIndex(1), 0) > 0  # other calls answer


def test_an_error_on_a_call_not_about_one_gpu(make_sim: SimFactory) -> None:
    _, adapter = make_sim("""
gpus: [{count: 1}]
faults: [{type: error, calls: [nvmlSystemGetDriverVersion], error: Unknown}]
""", init=False)
    with pytest.raises(Exception, match="NVMLError_Unknown"):
        adapter.init()


def test_no_permission_leaves_one_field_out_and_logs_once(make_sim: SimFactory,
                                                         caplog: pytest.LogCaptureFixture) -> None:
    _, adapter = make_sim("""
gpus: [{count: 2}]
faults: [{type: error, gpu: 0, calls: [nvmlDeviceGetTotalEnergyConsumption], error: NoPermission}]
""")
    with caplog.at_level(logging.INFO, logger="exporter.nvml.adapter"):
        for _ in range(3):
            d0, d1 = adapter.read().devices
    assert d0.up and d0.energy_joules is None and d0.power_watts is not None
    assert d1.energy_joules is not None
    lines = [r for r in caplog.records if "nvmlDeviceGetTotalEnergyConsumption" in r.getMessage()]
    assert len(lines) == 1 and "NVMLError_NoPermission" in lines[0].getMessage()


def power_fault_from_10_to_40_s(error: str, clock: FakeClock, sources: list[NvmlSource]) -> GpuCollector:
    """A started source over 3 GPUs whose GPU 1 answers nvmlDeviceGetPowerUsage with `error` from 10 s to
    40 s, and a collector over it."""
    sim = SimulatedNvml(parse_sim_config(f"""
gpus: [{{count: 3}}]
faults: [{{type: error, gpu: 1, calls: [nvmlDeviceGetPowerUsage], error: {error}, at: 10, until: 40}}]
""", "f.yaml"), clock=clock, pcie_latency_seconds=0)
    source = NvmlSource(NvmlAdapter(sim, clock=clock), SourceSettings(
        min_interval=0, pcie_interval=3600, init_retry_interval=3600), clock=clock, monotonic=clock)
    sources.append(source)
    source.start()
    return GpuCollector(source, "n")


def three_scrapes_in_the_fault(collector: GpuCollector, clock: FakeClock) -> Samples:
    """Scrape at 10, 15 and 20 s (the fault is on); the last scrape's samples."""
    clock.advance(10)
    for _ in range(3):
        samples = scrape(collector)
        clock.advance(5)
    return samples


def test_unknown_error_on_one_call_leaves_that_series_out_and_the_gpu_up(
    clock: FakeClock, sources: list[NvmlSource], caplog: pytest.LogCaptureFixture
) -> None:
    collector = power_fault_from_10_to_40_s("Unknown", clock, sources)
    assert "gpu_exporter_nvml_errors_total" not in scrape(collector)
    with caplog.at_level(logging.INFO, logger="exporter"):
        samples = three_scrapes_in_the_fault(collector, clock)
        assert samples["gpu_up"] == {"0": 1.0, "1": 1.0, "2": 1.0}
        assert set(samples["gpu_power_usage_watts"]) == {"0", "2"}
        assert set(samples["gpu_temperature_celsius"]) == {"0", "1", "2"}  # its other series stay
        assert samples["gpu_exporter_nvml_errors_total"] == {"1": 3.0}
        clock.advance(30)
        samples = scrape(collector)
        assert set(samples["gpu_power_usage_watts"]) == {"0", "1", "2"}
        assert samples["gpu_exporter_nvml_errors_total"] == {"1": 3.0}  # a counter: it stays
    warned = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(warned) == 1 and "GPU 1" in warned[0].getMessage()
    message = warned[0].getMessage()
    assert "NVMLError_Unknown" in message and "nvmlDeviceGetPowerUsage" in message


def test_gpu_is_lost_on_one_gpu_marks_it_down_and_the_others_keep_reporting(
    clock: FakeClock, sources: list[NvmlSource], caplog: pytest.LogCaptureFixture
) -> None:
    collector = power_fault_from_10_to_40_s("GpuIsLost", clock, sources)
    assert scrape(collector)["gpu_up"] == {"0": 1.0, "1": 1.0, "2": 1.0}
    with caplog.at_level(logging.INFO, logger="exporter"):
        samples = three_scrapes_in_the_fault(collector, clock)
        assert samples["gpu_up"] == {"0": 1.0, "1": 0.0, "2": 1.0}
        assert set(samples["gpu_power_usage_watts"]) == {"0", "2"}
        assert set(samples["gpu_info"]) == {"0", "1", "2"}  # its identity stays
        assert samples["gpu_exporter_nvml_up"] == {"": 1.0}
        assert "gpu_exporter_nvml_errors_total" not in samples  # gpu_up 0 says it
        clock.advance(30)
        assert scrape(collector)["gpu_up"] == {"0": 1.0, "1": 1.0, "2": 1.0}
    down = [r for r in caplog.records if "GPU 1" in r.getMessage() and r.levelno == logging.WARNING]
    back = [r for r in caplog.records if "GPU 1" in r.getMessage() and "answers again" in r.getMessage()]
    assert len(down) == 1 and "NVMLError_GpuIsLost" in down[0].getMessage() and len(back) == 1
