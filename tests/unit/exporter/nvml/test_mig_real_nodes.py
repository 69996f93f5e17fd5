"""MIG as real nodes have it, through the real adapter on the simulated NVML: drivers older than R580 (no
nvmlDeviceGetGpuInstanceProfileInfoById), several compute instances per GPU instance (GPM sampled once per
GPU instance), GPM refusals and errors that cost one series or one pass, and a MIG layout changing at run
time (stale handles re-list the GPU's MIG devices; GPM samples are freed)."""

from __future__ import annotations

import pynvml
import pytest

from exporter.errors import ConfigError
from exporter.nvml.adapter import NvmlAdapter
from exporter.nvml.snapshots import BackgroundReading
from exporter.simulator.config_file import parse_sim_config
from exporter.simulator.nvml import SimulatedNvml
from exporter.source import with_background
from tests.unit.exporter.conftest import FakeClock, SimFactory

LOAD = "load: {pattern: constant, value: 0.5, noise: 0}"
SPLIT = f"""
gpus:
  - {{model: H100, mig: 2, mig_profile: 3g.40gb, mig_compute_instances: 3, {LOAD}}}
  - {{model: H100, {LOAD}}}
"""


def passes(adapter: NvmlAdapter, clock: FakeClock, index: int, count: int) -> BackgroundReading:
    reading = None
    for _ in range(count):
        reading = adapter.read_background(index)
        clock.advance(5)
    assert reading is not None
    return reading


@pytest.mark.parametrize(("driver", "table_call"), [
    ("470.256.02", "nvmlDeviceGetGpuInstanceProfileInfo"),  # before R510: no name in the table
    ("535.183.01", "nvmlDeviceGetGpuInstanceProfileInfoV"),
    ("580.65.06", "nvmlDeviceGetGpuInstanceProfileInfoV"),
])
def test_the_profile_is_found_on_every_driver_without_privilege(make_sim: SimFactory, driver: str,
                                                                table_call: str) -> None:
    sim, adapter = make_sim(f"driver_version: {driver}\n{SPLIT}")
    instances = adapter.read().devices[0].mig_instances
    assert {(m.profile, m.profile_id, m.placement_start) for m in instances} == {("3g.40gb", 9, None)}
    assert sim.calls[table_call] > 0
    assert sim.calls["nvmlDeviceGetGpuInstanceProfileInfoById"] == 0  # the table has every id
    assert adapter.driver_version == driver


def test_compute_instances_share_their_gpu_instance_sampled_once_per_pass(make_sim: SimFactory,
                                                                         clock: FakeClock) -> None:
    sim, adapter = make_sim(SPLIT)
    snapshot = adapter.read()
    instances = snapshot.devices[0].mig_instances
    assert [(m.gpu_instance_id, m.compute_instance_id) for m in instances] == [
        (1, 0), (1, 1), (1, 2), (2, 0), (2, 1), (2, 2)]
    assert len({m.uuid for m in instances}) == 6
    before = sim.calls["nvmlGpmMigSampleGet"]
    reading = passes(adapter, clock, 0, 2)
    assert sim.calls["nvmlGpmMigSampleGet"] - before == 4  # two GPU instances, two passes
    assert sim.calls["nvmlGpmMetricsGet"] == 3  # whole GPU and each instance, from the second pass on
    assert [gi for gi, _ in reading.mig_gpm] == [1, 2] and reading.gpm is not None
    device = with_background(snapshot.devices[0], reading)
    active = [(m.gpu_instance_id, m.gpm.sm_active if m.gpm else None) for m in device.mig_instances]
    by_instance = dict(reading.mig_gpm)
    assert active == [(gi, by_instance[gi].sm_active) for gi in (1, 1, 1, 2, 2, 2)]
    assert by_instance[1].sm_active is not None and by_instance[2].sm_active is not None
    assert by_instance[1].sm_active < by_instance[2].sm_active  # each instance its own load


@pytest.mark.parametrize(("refused", "whole_gpu", "instances"), [
    ("nvmlGpmMigSampleGet", True, False),
    ("nvmlGpmSampleGet", False, True),
])
def test_one_series_refusing_gpm_leaves_the_others(make_sim: SimFactory, clock: FakeClock, refused: str,
                                                  whole_gpu: bool, instances: bool) -> None:
    _, adapter = make_sim(f"{SPLIT}faults:\n  - {{type: not_supported, gpu: 0, calls: [{refused}]}}\n")
    reading = passes(adapter, clock, 0, 3)
    assert reading.gpm_supported is True
    assert (reading.gpm is not None) is whole_gpu
    assert bool(reading.mig_gpm) is instances


@pytest.mark.parametrize("call", ["nvmlGpmMetricsGet", "nvmlGpmSampleAlloc"])
def test_a_gpm_error_costs_one_pass_of_profiling_and_nothing_else(make_sim: SimFactory, clock: FakeClock,
                                                                 call: str) -> None:
    fleet = (f"{SPLIT}faults:\n  - {{type: error, gpu: all, calls: [{call}], error: Unknown, "
             "at: 10, until: 12}\n")
    sim, adapter = make_sim(fleet)
    passes(adapter, clock, 1, 2)  # t 0 and 5
    sim.add_nvlink_errors(1, 0, pynvml.NVML_NVLINK_ERROR_DL_REPLAY, 3)
    failed = passes(adapter, clock, 1, 1)  # t 10: the error
    assert failed.gpm is None and failed.gpm_supported is True
    links = failed.reliability.nvlinks
    assert links is not None and dict(links[0].errors)["replay"] == 3  # its other readings are there
    assert failed.reliability.power_violation_seconds is not None
    again = passes(adapter, clock, 1, 1)  # t 15: back, from the sample before the error or the one during it
    assert again.gpm is not None and again.gpm.sm_active is not None


def test_a_mig_reconfiguration_relists_the_instances_and_frees_their_samples(make_sim: SimFactory,
                                                                             clock: FakeClock) -> None:
    sim, adapter = make_sim(SPLIT)
    old = {m.uuid for m in adapter.read().devices[0].mig_instances}
    passes(adapter, clock, 0, 2)
    assert sim.gpm_samples_allocated == 3  # the previous sample of the GPU and of its two instances
    sim.set_mig_layout(0, 7, "1g.10gb")
    snapshot = adapter.read()
    device = snapshot.devices[0]
    assert device.up, device.error
    assert [m.gpu_instance_id for m in device.mig_instances] == list(range(7, 14))
    assert not old & {m.uuid for m in device.mig_instances}
    assert {m.profile for m in device.mig_instances} == {"1g.10gb"}
    assert sim.gpm_samples_allocated == 1  # the old instances' samples were freed
    reading = passes(adapter, clock, 0, 2)
    assert [gi for gi, _ in reading.mig_gpm] == list(range(7, 14))
    assert sim.gpm_samples_allocated == 8
    assert adapter.mig_parent(device.mig_instances[0].uuid) == device.uuid
    adapter.shutdown()
    assert sim.gpm_samples_allocated == 0  # freed before NVML shut down


def test_a_layout_change_seen_first_by_gpm_and_mig_turned_on_later(make_sim: SimFactory,
                                                                   clock: FakeClock) -> None:
    fleet = f"""{SPLIT}faults:
  - {{type: mig_layout, gpu: 0, at: 10, mig: 1, mig_profile: 7g.80gb}}
  - {{type: mig_layout, gpu: 1, at: 10, mig: 3, mig_profile: 2g.20gb}}
"""
    _, adapter = make_sim(fleet)
    passes(adapter, clock, 0, 2)
    passes(adapter, clock, 1, 2)
    reading = passes(adapter, clock, 0, 1)  # t 10: GPU instances 1 and 2 are gone
    assert reading.mig_gpm == ()
    passes(adapter, clock, 1, 1)  # GPU 1 was not in MIG mode: the background pass sees the mode change
    devices = adapter.read().devices
    assert [(m.gpu_instance_id, m.profile) for m in devices[0].mig_instances] == [(0, "7g.80gb")]
    assert [m.gpu_instance_id for m in devices[1].mig_instances] == [3, 4, 5]
    assert all(d.up for d in devices)
    reading = passes(adapter, clock, 0, 2)
    assert [gi for gi, _ in reading.mig_gpm] == [0]


def test_the_simulator_refuses_gpm_samples_closer_than_100_ms(make_sim: SimFactory, clock: FakeClock) -> None:
    sim, _ = make_sim(SPLIT)
    handle = sim.nvmlDeviceGetHandleByIndex(1)
    first, second = sim.nvmlGpmSampleAlloc(), sim.nvmlGpmSampleAlloc()
    sim.nvmlGpmSampleGet(handle, first)
    clock.advance(0.05)
    sim.nvmlGpmSampleGet(handle, second)
    request = pynvml.c_nvmlGpmMetricsGet_t()
    request.version, request.numMetrics = pynvml.NVML_GPM_METRICS_GET_VERSION, 1
    request.sample1, request.sample2 = first, second
    request.metrics[0].metricId = pynvml.NVML_GPM_METRIC_SM_UTIL
    with pytest.raises(pynvml.NVMLError_InvalidArgument):
        sim.nvmlGpmMetricsGet(request)
    clock.advance(0.1)
    sim.nvmlGpmSampleGet(handle, second)
    assert sim.nvmlGpmMetricsGet(request).metrics[0].nvmlReturn == pynvml.NVML_SUCCESS


def test_stale_mig_handles_answer_as_nvml_does(make_sim: SimFactory) -> None:
    sim, _ = make_sim(SPLIT)
    gpu = sim.nvmlDeviceGetHandleByIndex(0)
    mig = sim.nvmlDeviceGetMigDeviceHandleByIndex(gpu, 0)
    sim.set_mig_layout(0, 0)
    with pytest.raises(pynvml.NVMLError_InvalidArgument):
        sim.nvmlDeviceGetMemoryInfo(mig)
    assert sim.nvmlDeviceGetMigMode(gpu) == [0, 0]
    with pytest.raises(ValueError, match=r"1\.\.2 3g\.40gb GPU instances"):
        sim.set_mig_layout(0, 3, "3g.40gb")


@pytest.mark.parametrize(("yaml_text", "message"), [
    (f"gpus: [{{model: H100, mig: 2, mig_profile: 3g.40gb, mig_compute_instances: 4, {LOAD}}}]",
     "test.yaml:1: gpus[0].mig_compute_instances: expected 1..3 compute instances in a 3g.40gb"),
    ("gpus: [{model: H100, mig_compute_instances: 2}]", "gpus[0].mig_compute_instances: only with mig"),
    ("gpus: [{model: H100}]\nfaults: [{type: mig_layout, gpu: 0, at: 5}]",
     "faults[0].mig: required for a mig_layout fault"),
    ("gpus: [{model: H100}]\nfaults: [{type: mig_layout, mig: 1, at: 5, until: 9}]",
     "faults[0].until: a mig_layout fault lasts"),
    ("gpus: [{model: L4}]\nfaults: [{type: mig_layout, mig: 1}]", "faults[0].mig: expected 0: L4 does not"),
    ("gpus: [{model: H100}]\nfaults: [{type: gpu_lost, mig: 1}]", "faults[0].mig: only for a mig_layout"),
    ("gpus: [{model: H100}]\ndriver_version: 'R550'",
     "test.yaml:2: driver_version: expected a driver version"),
])
def test_bad_mig_and_driver_fields_are_named(yaml_text: str, message: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_sim_config(yaml_text, "test.yaml")
    assert message in str(caught.value)


def test_a_driver_older_than_a_call_refuses_it() -> None:
    sim = SimulatedNvml(parse_sim_config("gpus: [{model: H100}]\ndriver_version: 530.30.02", "t.yaml"))
    sim.nvmlInit()
    handle = sim.nvmlDeviceGetHandleByIndex(0)
    with pytest.raises(pynvml.NVMLError_FunctionNotFound):
        sim.nvmlDeviceGetCurrentClocksEventReasons(handle)
    assert sim.nvmlDeviceGetCurrentClocksThrottleReasons(handle) >= 0
    assert sim.nvmlSystemGetDriverVersion() == "530.30.02"


def test_a_pass_that_reaches_a_gpu_too_soon_keeps_the_older_sample_and_the_last_metrics(
        make_sim: SimFactory, clock: FakeClock) -> None:
    """A pass that ran late leaves the next one less than NVML's 100 ms before it samples a GPU again: the
    refused pair costs no series (the last metrics stand) and the next pass pairs the older sample with one
    far enough away; refused twice in a row, that pass goes without, as any other GPM error."""
    sim, adapter = make_sim(SPLIT)
    first = passes(adapter, clock, 1, 2)  # t=0 and t=5: metrics over 5 s
    assert first.gpm is not None
    clock.advance(-4.95)  # the next pass reaches the GPU 50 ms after the last sample
    soon = adapter.read_background(1)
    assert soon.gpm == first.gpm
    clock.advance(0.1)  # 150 ms after the kept sample: a pair NVML takes
    later = adapter.read_background(1)
    assert later.gpm is not None and sim.gpm_samples_allocated == 1
    clock.advance(0.05)
    assert adapter.read_background(1).gpm == later.gpm  # refused once: the last metrics
    clock.advance(0.02)
    assert adapter.read_background(1).gpm is None  # refused again (70 ms): this pass goes without
    clock.advance(0.2)
    assert adapter.read_background(1).gpm is not None and sim.gpm_samples_allocated == 1
