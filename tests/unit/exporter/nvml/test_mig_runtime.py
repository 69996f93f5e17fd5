"""MIG devices created and destroyed while MIG mode stays on (NVIDIA's DRA driver per claim, an operator's
`nvidia-smi mig -cgi`), through the real adapter on the simulated NVML with its permission model at the base
DaemonSet's (unprivileged): found within one background pass, the others kept, attributed to the DRA claim
that names them without a privileged call; MIG on with no instance serves the whole GPU and logs once. Also
the simulator's driver gates and NVML's enum checks."""

from __future__ import annotations

import logging

import pynvml
import pytest

from exporter.errors import ConfigError
from exporter.scrape.holders import PodRef, mig_holder
from exporter.simulator.config_file import parse_sim_config
from exporter.simulator.nvml import DRIVER_MINIMUM, SimulatedNvml
from tests.unit.exporter.conftest import FakeClock, SimFactory

LOAD = "load: {pattern: constant, value: 0.5, noise: 0}"
EMPTY = f"""
gpus:
  - {{model: H100, mig_enabled: true, {LOAD}}}
faults:
  - {{type: mig_create, gpu: 0, at: 10, mig_profile: 1g.10gb}}
"""
TWO = f"""
gpus:
  - {{model: H100, mig: 2, mig_profile: 2g.20gb, {LOAD}}}
faults:
  - {{type: mig_create, gpu: 0, at: 10, mig_profile: 1g.10gb}}
  - {{type: mig_destroy, gpu: 0, at: 20, gpu_instance: 3}}
"""


def dra_holder(name: str) -> PodRef:
    return PodRef("batch", "dra-job", "worker", "gpu.nvidia.com", name, claim="slice")


def test_an_instance_created_at_run_time_is_served_within_one_background_pass_and_attributed_unprivileged(
        make_sim: SimFactory, clock: FakeClock, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="exporter.nvml")
    sim, adapter = make_sim(EMPTY)
    device = adapter.read().devices[0]
    assert device.up and device.mig_instances == () and device.memory_used_bytes is not None
    for _ in range(3):  # MIG on, no instance: nothing relisted, one line
        adapter.read_background(0)
        clock.advance(4)
    assert adapter.read().devices[0].mig_instances == ()
    empty = [r for r in caplog.records if "no MIG device yet" in r.getMessage()]
    changed = [r for r in caplog.records if "MIG devices changed" in r.getMessage()]
    assert len(empty) == 1 and changed == []
    clock.advance(10 - sim.now())  # the DRA driver creates a 1g.10gb GPU instance for a claim
    adapter.read_background(0)
    instances = adapter.read().devices[0].mig_instances
    assert [(m.gpu_instance_id, m.profile, m.profile_id, m.placement_start) for m in instances] == [
        (7, "1g.10gb", 19, None)]  # no placement: the privileged call answered NoPermission
    assert sim.calls["nvmlDeviceGetGpuInstanceById"] >= 1 and not sim.config.privileged
    assert mig_holder([dra_holder("gpu-0-mig-1g10gb-19-0")], 0, instances[0], instances) == \
        dra_holder("gpu-0-mig-1g10gb-19-0")
    assert mig_holder([dra_holder("gpu-0-mig-2g20gb-14-0")], 0, instances[0], instances) is None
    assert adapter.mig_parent(instances[0].uuid) == adapter.uuid_of(0)
    refused = [r for r in caplog.records if "NoPermission" in r.getMessage()]
    assert len(refused) == 1


def test_creating_and_destroying_one_instance_keeps_the_others_and_their_handles(
        make_sim: SimFactory, clock: FakeClock) -> None:
    sim, adapter = make_sim(TWO)
    before = adapter.read().devices[0].mig_instances
    assert [m.gpu_instance_id for m in before] == [3, 4]
    adapter.read_background(0)  # the first GPM samples
    clock.advance(10)
    reading = adapter.read_background(0)
    assert reading is not None and [gi for gi, _ in reading.mig_gpm] == [3, 4]  # kept: their samples too
    created = adapter.read().devices[0].mig_instances
    assert [m.gpu_instance_id for m in created] == [3, 4, 11]  # 1g at the first free slice, 4
    assert [m.uuid for m in created[:2]] == [m.uuid for m in before]
    lookups = sim.calls["nvmlDeviceGetGpuInstanceId"]
    clock.advance(10)
    reading = adapter.read_background(0)
    assert reading is not None and [gi for gi, _ in reading.mig_gpm] == [4, 11]
    assert sim.gpm_samples_allocated == 3  # the whole GPU's and the two instances': GPU instance 3's freed
    after = adapter.read().devices[0].mig_instances
    assert [(m.gpu_instance_id, m.uuid) for m in after] == [(4, before[1].uuid), (11, created[2].uuid)]
    assert sim.calls["nvmlDeviceGetGpuInstanceId"] == lookups  # kept, not read again
    assert all(m.memory_total_bytes for m in after)
    two = [m for m in after if m.profile == "2g.20gb"]
    assert mig_holder([dra_holder("gpu-0-mig-2g20gb-14-2")], 0, two[0], after) is not None  # the only 2g


def test_several_instances_of_a_profile_need_the_placement_to_tell_them_apart(make_sim: SimFactory) -> None:
    fleet = f"gpus: [{{model: H100, mig: 2, mig_profile: 3g.40gb, {LOAD}}}]"
    _, unprivileged = make_sim(fleet)
    first = unprivileged.read().devices[0].mig_instances
    assert mig_holder([dra_holder("gpu-0-mig-3g40gb-9-0")], 0, first[0], first) is None  # which one: unknown
    _, privileged = make_sim(f"privileged: true\n{fleet}")
    known = privileged.read().devices[0].mig_instances
    assert [m.placement_start for m in known] == [0, 3]
    assert mig_holder([dra_holder("gpu-0-mig-3g40gb-9-3")], 0, known[1], known) is not None
    assert mig_holder([dra_holder("gpu-0-mig-3g40gb-9-3")], 0, known[0], known) is None


def test_the_simulator_gates_every_call_the_exporter_makes_by_driver_branch(make_sim: SimFactory,
                                                                            clock: FakeClock) -> None:
    whole = f"  - {{model: H100, {LOAD}, processes: [{{pid: 7, memory_gib: 1}}]}}\nfaults:"
    sim, adapter = make_sim(f"driver_version: 580.65.06\nprivileged: true\n{TWO.replace('faults:', whole)}")
    adapter.read()
    events = adapter.open_xid_events()
    for _ in range(2):
        for index in (0, 1):
            adapter.read_background(index)
            adapter.read_pcie(index)
            adapter.process_utilization(index)
        clock.advance(5)
    events.close()
    adapter.shutdown()
    assert len(sim.calls) > 40 and set(sim.calls) - set(DRIVER_MINIMUM) == set()
    old = SimulatedNvml(parse_sim_config(f"driver_version: 470.256.02\n{TWO}", "t.yaml"))
    old.nvmlInit()
    gpu = old.nvmlDeviceGetHandleByIndex(0)
    with pytest.raises(pynvml.NVMLError_FunctionNotFound):
        old.nvmlDeviceGetMemoryInfo(gpu, pynvml.nvmlMemory_v2)
    with pytest.raises(pynvml.NVMLError_FunctionNotFound):
        old.nvmlGpmSampleAlloc()
    assert old.nvmlDeviceGetMemoryInfo(gpu).total > 0


@pytest.mark.parametrize(("call", "args"), [
    ("nvmlDeviceGetClockInfo", (99,)),
    ("nvmlDeviceGetMaxClockInfo", (99,)),
    ("nvmlDeviceGetTotalEccErrors", (7, pynvml.NVML_VOLATILE_ECC)),
    ("nvmlDeviceGetTotalEccErrors", (pynvml.NVML_MEMORY_ERROR_TYPE_CORRECTED, 9)),
    ("nvmlDeviceGetPcieThroughput", (5,)),
    ("nvmlDeviceGetTemperature", (3,)),
])
def test_unknown_enum_arguments_are_invalid_as_nvml_checks_them(make_sim: SimFactory, call: str,
                                                                args: tuple[int, ...]) -> None:
    sim, _ = make_sim(f"gpus: [{{model: H100, {LOAD}}}]")
    with pytest.raises(pynvml.NVMLError_InvalidArgument):
        getattr(sim, call)(sim.nvmlDeviceGetHandleByIndex(0), *args)


@pytest.mark.parametrize(("yaml_text", "message"), [
    ("gpus: [{model: H100}]\nprivileged: yes-please", "t.yaml:2: privileged: expected true or false"),
    ("gpus: [{model: H100}]\ndriver_version: 440.33.01", "driver_version: expected R450 or newer"),
    ("gpus: [{model: L4, mig_enabled: true}]", "gpus[0].mig_enabled: expected false: L4 does not support"),
    ("gpus: [{model: H100, mig: 2, mig_enabled: false}]", "gpus[0].mig_enabled: expected true with mig: 2"),
    ("gpus: [{model: H100}]\nfaults: [{type: mig_destroy, gpu: 0}]",
     "faults[0].gpu_instance: expected a GPU instance id 0..14"),
    ("gpus: [{model: H100}]\nfaults: [{type: mig_create, mig: 0}]", "faults[0].mig: expected 1..7"),
    ("gpus: [{model: H100}]\nfaults: [{type: gpu_lost, gpu_instance: 3}]",
     "faults[0].gpu_instance: only for a mig_destroy fault"),
])
def test_bad_mig_runtime_fields_are_named(yaml_text: str, message: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_sim_config(yaml_text, "t.yaml")
    assert message in str(caught.value)
