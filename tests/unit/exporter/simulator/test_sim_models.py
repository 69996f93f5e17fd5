"""The simulated models answer GPM, NVLink, MIG, memory and violation calls as the real boards do: pynvml's
own signatures and structures, and pynvml's NVMLError_NotSupported where the board lacks the feature (A100: no
GPM; L4: no GPM, no NVLink, no MIG; V100: page retirement instead of row remapping)."""

from __future__ import annotations

import ctypes
import inspect

import pynvml
import pytest

from exporter.errors import ConfigError
from exporter.simulator.config_file import parse_sim_config
from exporter.simulator.nvml import SimulatedNvml
from tests.unit.exporter.conftest import FakeClock

FLEET = """
privileged: true
gpus:
  - model: H100
    mig: 7
    load: {pattern: constant, value: 0.5, noise: 0}
    processes: [{pid: 11, memory_gib: 3}, {pid: 12, memory_gib: 4}]
  - {model: A100, load: {pattern: constant, value: 0.5, noise: 0}}
  - {model: L4, load: {pattern: constant, value: 0.5, noise: 0}}
  - {model: V100, load: {pattern: constant, value: 0.5, noise: 0}}
  - {model: H100, load: {pattern: constant, value: 1.0, noise: 0}}
faults:
  - {type: nvlink_down, gpu: 4, link: [2, 5], at: 10}
  - {type: row_remap_pending, gpu: 1, at: 10, until: 20}
  - {type: row_remap_failed, gpu: 4, at: 30}
"""

NEW_CALLS = (
    "nvmlGpmQueryDeviceSupport", "nvmlGpmSampleAlloc", "nvmlGpmSampleFree", "nvmlGpmSampleGet",
    "nvmlGpmMigSampleGet", "nvmlGpmMetricsGet", "nvmlDeviceGetRemappedRows", "nvmlDeviceGetRetiredPages",
    "nvmlDeviceGetFieldValues", "nvmlDeviceGetNvLinkState", "nvmlDeviceGetNvLinkErrorCounter",
    "nvmlDeviceGetViolationStatus", "nvmlDeviceGetGpuInstanceId", "nvmlDeviceGetComputeInstanceId",
    "nvmlDeviceGetGpuInstanceById", "nvmlGpuInstanceGetInfo", "nvmlDeviceGetGpuInstanceProfileInfoById",
    "nvmlDeviceGetGpuInstanceProfileInfo", "nvmlDeviceGetAttributes", "nvmlDeviceGetAttributes_v2",
)


@pytest.fixture
def sim(clock: FakeClock) -> SimulatedNvml:
    nvml = SimulatedNvml(parse_sim_config(FLEET, "fleet.yaml"), clock=clock, pcie_latency_seconds=0.0)
    nvml.nvmlInit()
    return nvml


def handle(sim: SimulatedNvml, index: int) -> object:
    return sim.nvmlDeviceGetHandleByIndex(index)


@pytest.mark.parametrize("call", NEW_CALLS)
def test_every_new_call_has_pynvmls_exact_signature(call: str) -> None:
    ours = inspect.signature(getattr(SimulatedNvml, call))
    theirs = inspect.signature(getattr(pynvml, call))
    assert list(ours.parameters)[1:] == list(theirs.parameters)


def gpm_metrics(sim: SimulatedNvml, index: int, ids: list[int], clock: FakeClock,
                instance: int | None = None) -> pynvml.c_nvmlGpmMetricsGet_t:
    first, second = sim.nvmlGpmSampleAlloc(), sim.nvmlGpmSampleAlloc()
    assert isinstance(first, pynvml.c_nvmlGpmSample_t)
    get = (lambda s: sim.nvmlGpmSampleGet(handle(sim, index), s)) if instance is None else (
        lambda s: sim.nvmlGpmMigSampleGet(handle(sim, index), instance, s))
    get(first)
    clock.advance(5)
    get(second)
    request = pynvml.c_nvmlGpmMetricsGet_t()
    request.version, request.numMetrics = pynvml.NVML_GPM_METRICS_GET_VERSION, len(ids)
    request.sample1, request.sample2 = first, second
    for i, metric in enumerate(ids):
        request.metrics[i].metricId = metric
    sim.nvmlGpmMetricsGet(request)
    sim.nvmlGpmSampleFree(first)
    sim.nvmlGpmSampleFree(second)
    return request


def test_h100_has_gpm_in_percent_and_nvlink_in_mib_per_second(sim: SimulatedNvml, clock: FakeClock) -> None:
    assert sim.nvmlGpmQueryDeviceSupport(handle(sim, 4)).isSupportedDevice == 1
    ids = [pynvml.NVML_GPM_METRIC_GRAPHICS_UTIL, pynvml.NVML_GPM_METRIC_SM_OCCUPANCY,
           pynvml.NVML_GPM_METRIC_NVLINK_TOTAL_TX_PER_SEC, pynvml.NVML_GPM_METRIC_NVDEC_7_UTIL]
    result = gpm_metrics(sim, 4, ids, clock)
    graphics, occupancy, nvlink, nvdec7 = (result.metrics[i] for i in range(4))
    assert graphics.nvmlReturn == pynvml.NVML_SUCCESS and graphics.value == pytest.approx(100.0)
    assert 0 < occupancy.value < 100
    assert nvlink.value == pytest.approx(450e9 / 2**20 * 0.3)  # 30 % of 450 GB/s, in MiB/s
    assert nvdec7.nvmlReturn == pynvml.NVML_ERROR_NOT_SUPPORTED  # H100 has 7 NVDECs: 0..6


@pytest.mark.parametrize("index", [1, 2], ids=["A100", "L4"])
def test_no_gpm_before_hopper(sim: SimulatedNvml, index: int) -> None:
    assert sim.nvmlGpmQueryDeviceSupport(handle(sim, index)).isSupportedDevice == 0
    sample = sim.nvmlGpmSampleAlloc()
    with pytest.raises(pynvml.NVMLError_NotSupported):
        sim.nvmlGpmSampleGet(handle(sim, index), sample)


def test_mig_instances_have_ids_profile_memory_and_own_gpm(sim: SimulatedNvml, clock: FakeClock) -> None:
    gpu = handle(sim, 0)
    migs = [sim.nvmlDeviceGetMigDeviceHandleByIndex(gpu, slot) for slot in range(7)]
    ids = [sim.nvmlDeviceGetGpuInstanceId(m) for m in migs]
    assert ids == list(range(7, 14)) and {sim.nvmlDeviceGetComputeInstanceId(m) for m in migs} == {0}
    info = sim.nvmlGpuInstanceGetInfo(sim.nvmlDeviceGetGpuInstanceById(gpu, 8))
    with pytest.raises(pynvml.NVMLError_FunctionNotFound):  # R580 and newer; this driver is R550
        sim.nvmlDeviceGetGpuInstanceProfileInfoById(gpu, info.profileId)
    profile = sim.nvmlDeviceGetGpuInstanceProfileInfo(gpu, pynvml.NVML_GPU_INSTANCE_PROFILE_1_SLICE)
    assert isinstance(profile, pynvml.c_nvmlGpuInstanceProfileInfo_v2_t)
    assert profile.name in ("MIG 1g.10gb", b"MIG 1g.10gb")  # pynvml decodes char arrays
    assert profile.id == info.profileId != pynvml.NVML_GPU_INSTANCE_PROFILE_1_SLICE  # an id, not the index
    first, second, third = (sim.nvmlDeviceGetMemoryInfo(m) for m in migs[:3])
    assert first.total == second.total < sim.nvmlDeviceGetMemoryInfo(gpu).total / 7
    assert first.used > third.used and second.used > third.used  # pids 11 and 12 sit on the first two
    sm = pynvml.NVML_GPM_METRIC_SM_UTIL
    busy = [gpm_metrics(sim, 0, [sm], clock, instance=i).metrics[0].value for i in (7, 13)]
    assert 0 < busy[0] < busy[1]
    with pytest.raises(pynvml.NVMLError_NotFound):
        sim.nvmlGpmMigSampleGet(gpu, 14, sim.nvmlGpmSampleAlloc())
    with pytest.raises(pynvml.NVMLError_InvalidArgument):
        sim.nvmlDeviceGetGpuInstanceId(gpu)  # a whole-GPU handle


def test_nvlink_state_errors_and_not_supported(sim: SimulatedNvml, clock: FakeClock) -> None:
    h100 = handle(sim, 4)
    assert [sim.nvmlDeviceGetNvLinkState(h100, link) for link in (2, 5)] == [1, 1]
    clock.advance(10)
    assert [sim.nvmlDeviceGetNvLinkState(h100, link) for link in (1, 2, 5)] == [1, 0, 0]
    sim.add_nvlink_errors(4, 3, pynvml.NVML_NVLINK_ERROR_DL_REPLAY, 5)
    assert sim.nvmlDeviceGetNvLinkErrorCounter(h100, 3, pynvml.NVML_NVLINK_ERROR_DL_REPLAY) == 5
    with pytest.raises(pynvml.NVMLError_InvalidArgument):
        sim.nvmlDeviceGetNvLinkState(h100, 18)  # H100 has links 0..17
    with pytest.raises(pynvml.NVMLError_NotSupported):
        sim.nvmlDeviceGetNvLinkState(handle(sim, 2), 0)  # L4


def test_row_remapping_retired_pages_and_memory_temperature(sim: SimulatedNvml, clock: FakeClock) -> None:
    a100, l4, v100 = handle(sim, 1), handle(sim, 2), handle(sim, 3)
    assert sim.nvmlDeviceGetRemappedRows(a100) == (0, 0, 0, 0)
    clock.advance(10)
    assert sim.nvmlDeviceGetRemappedRows(a100)[2:] == (1, 0)  # the pending fault
    sim.set_row_remap(2, correctable=3, failed=True)
    assert sim.nvmlDeviceGetRemappedRows(l4) == (3, 0, 0, 1)
    with pytest.raises(pynvml.NVMLError_NotSupported):
        sim.nvmlDeviceGetRemappedRows(v100)
    with pytest.raises(pynvml.NVMLError_NotSupported):
        sim.nvmlDeviceGetRetiredPages(a100, pynvml.NVML_PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR)
    sim.add_retired_pages(3, pynvml.NVML_PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR, 2)
    double_bit = pynvml.NVML_PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR
    assert len(sim.nvmlDeviceGetRetiredPages(v100, double_bit)) == 2
    hbm, gddr = (sim.nvmlDeviceGetFieldValues(h, [pynvml.NVML_FI_DEV_MEMORY_TEMP])[0] for h in (a100, l4))
    assert isinstance(hbm, pynvml.c_nvmlFieldValue_t) and hbm.nvmlReturn == pynvml.NVML_SUCCESS
    assert hbm.value.uiVal > sim.nvmlDeviceGetTemperature(a100, pynvml.NVML_TEMPERATURE_GPU)
    assert gddr.nvmlReturn == pynvml.NVML_ERROR_NOT_SUPPORTED


def test_violation_time_accumulates_in_nanoseconds(sim: SimulatedNvml, clock: FakeClock) -> None:
    full = handle(sim, 4)  # at 100 % an H100 wants more than its power limit: the power cap holds it
    before = sim.nvmlDeviceGetViolationStatus(full, pynvml.NVML_PERF_POLICY_POWER)
    assert isinstance(before, pynvml.c_nvmlViolationTime_t)
    clock.advance(3)
    after = sim.nvmlDeviceGetViolationStatus(full, pynvml.NVML_PERF_POLICY_POWER).violationTime
    assert after - before.violationTime == pytest.approx(3e9)
    assert sim.nvmlDeviceGetViolationStatus(full, pynvml.NVML_PERF_POLICY_THERMAL).violationTime == 0


@pytest.mark.parametrize("text, expected", [
    ("gpus: [{model: L4, mig: 2}]", "gpus[0].mig: expected 0: L4 does not support MIG"),
    ("gpus: [{model: H100, mig: 3, mig_profile: 3g.40gb}]", "at most 2 3g.40gb devices"),
    ("gpus: [{model: A100, mig: 1, mig_profile: 9g.99gb}]", "gpus[0].mig_profile: expected one of 1g.10gb"),
    ("gpus: [{model: H100, mig_profile: 1g.10gb}]", "gpus[0].mig_profile: only with mig"),
    ("gpus: [{}]\nfaults: [{type: nvlink_down, link: 18}]", "faults[0].link: expected a link number 0..17"),
    ("gpus: [{}]\nfaults: [{type: nvlink_down}]", "faults[0].link: expected a link number"),
    ("gpus: [{}]\nfaults: [{type: xid, code: 79, link: 1}]", "faults[0].link: only for an nvlink_down"),
])
def test_bad_model_features_name_the_field(text: str, expected: str) -> None:
    with pytest.raises(ConfigError, match=r"^fleet\.yaml:[1-9]\d*: ") as caught:
        parse_sim_config(text, "fleet.yaml")
    assert expected in str(caught.value)


def test_sample_pointers_are_pynvml_pointers_freed_once(sim: SimulatedNvml) -> None:
    sample = sim.nvmlGpmSampleAlloc()
    assert ctypes.cast(sample, ctypes.c_void_p).value
    sim.nvmlGpmSampleFree(sample)
    with pytest.raises(pynvml.NVMLError_InvalidArgument):
        sim.nvmlGpmSampleFree(sample)
