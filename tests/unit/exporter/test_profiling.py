"""GPM profiling, MIG instances and memory/link health through the real adapter and collector, on the
simulated H100 (GPM, NVLink, MIG), A100 (no GPM) and L4 (no GPM, no NVLink, no MIG)."""

from __future__ import annotations

import pynvml
import pytest

from exporter.collector import GpuCollector
from exporter.health.memory_link_families import ReliabilityMetrics
from exporter.health.state import HealthState, StateCause, device_health
from exporter.health.state_families import HealthMetrics
from exporter.nvml.snapshots import NodeSnapshot
from exporter.profiling.families import ProfilingMetrics
from exporter.scrape.holders import PodRef
from exporter.source import with_background
from tests.scrape import Samples, collect
from tests.unit.exporter.conftest import FakeClock, SimFactory

FLEET = """
gpus:
  - {model: H100, load: {pattern: constant, value: 0.5, noise: 0}}
  - {model: A100, load: {pattern: constant, value: 0.5, noise: 0}}
  - {model: L4, load: {pattern: constant, value: 0.5, noise: 0}}
  - model: H100
    mig: 3
    load: {pattern: constant, value: 0.5, noise: 0}
    processes: [{pid: 40, memory_gib: 2}]
"""



class Holders:
    def __init__(self, held: dict[str, list[PodRef]]) -> None:
        self.held = held

    def holders(self) -> dict[str, list[PodRef]]:
        return self.held

    def pod_of_pid(self, pid: int) -> PodRef | None:
        return None


class Fixed:
    def __init__(self, snapshot: NodeSnapshot) -> None:
        self.value = snapshot

    def snapshot(self) -> NodeSnapshot:
        return self.value


def sweep_with_background(make_sim: SimFactory, clock: FakeClock, yaml_text: str = FLEET,
                          passes: int = 2) -> tuple[object, NodeSnapshot]:
    sim, adapter = make_sim(yaml_text)
    readings = {}
    for _ in range(passes):
        readings = {i: adapter.read_background(i) for i in range(adapter.device_count)}
        clock.advance(5)
    snapshot = adapter.read()
    devices = tuple(with_background(d, readings[d.index]) for d in snapshot.devices)
    return sim, NodeSnapshot(**{**snapshot.__dict__, "devices": devices})


def scrape(snapshot: NodeSnapshot, held: dict[str, list[PodRef]] | None = None) -> Samples:
    return collect(GpuCollector(Fixed(snapshot), "n1", Holders(held or {}),
                                [HealthMetrics(), ProfilingMetrics(), ReliabilityMetrics()]))


def by_gpu(samples: Samples, name: str) -> dict[str, float]:
    return {labels["gpu"]: value for labels, value in samples.get(name, [])}


def test_gpm_needs_two_samples_and_converts_units(make_sim: SimFactory, clock: FakeClock) -> None:
    _, adapter = make_sim(FLEET)
    first = adapter.read_background(0)
    assert first is not None and first.gpm_supported and first.gpm is None  # one sample: nothing yet
    clock.advance(5)
    second = adapter.read_background(0)
    assert second is not None and second.gpm is not None
    gpm = second.gpm
    assert gpm.graphics_engine_active == pytest.approx(0.5)  # NVML's 50 % as a ratio
    assert all(0 <= r <= 1 for r in (gpm.sm_active, gpm.sm_occupancy, gpm.tensor_active, gpm.dram_active))
    assert [pipe for pipe, _ in gpm.pipes] == ["hmma", "imma", "dmma", "dfma", "fp16", "fp32", "fp64", "int"]
    assert gpm.nvlink_tx_bytes_per_second == pytest.approx(450e9 * 0.3 * 0.5)  # MiB/s -> bytes/s
    assert gpm.nvdec_utilization == 0.0


def test_gpm_series_only_where_supported(make_sim: SimFactory, clock: FakeClock) -> None:
    _, snapshot = sweep_with_background(make_sim, clock)
    samples = scrape(snapshot)
    assert by_gpu(samples, "gpu_exporter_gpm_supported") == {"0": 1.0, "1": 0.0, "2": 0.0, "3": 1.0}
    for name in ("gpu_sm_active_ratio", "gpu_sm_occupancy_ratio", "gpu_tensor_active_ratio",
                 "gpu_dram_active_ratio", "gpu_graphics_engine_active_ratio",
                 "gpu_nvlink_tx_bytes_per_second", "gpu_nvlink_rx_bytes_per_second",
                 "gpu_nvdec_utilization_ratio", "gpu_nvjpg_utilization_ratio"):
        assert set(by_gpu(samples, name)) == {"0", "3"}, name
    pipes = {labels["pipe"] for labels, _ in samples["gpu_pipe_active_ratio"] if labels["gpu"] == "0"}
    assert pipes == {"hmma", "imma", "dmma", "dfma", "fp16", "fp32", "fp64", "int"}
    assert set(by_gpu(samples, "gpu_utilization_ratio")) == {"0", "1", "2"}  # everything else unchanged


def test_a_driver_refusing_gpm_serves_no_gpm_series(make_sim: SimFactory, clock: FakeClock) -> None:
    fleet = FLEET + "faults:\n  - {type: not_supported, gpu: 0, calls: [nvmlGpmSampleGet]}\n"
    _, snapshot = sweep_with_background(make_sim, clock, fleet)
    samples = scrape(snapshot)
    assert by_gpu(samples, "gpu_exporter_gpm_supported")["0"] == 0.0
    assert "0" not in by_gpu(samples, "gpu_sm_active_ratio") and "3" in by_gpu(samples, "gpu_sm_active_ratio")
    assert by_gpu(samples, "gpu_up")["0"] == 1.0


def test_mig_instances_have_their_own_series_and_holder(make_sim: SimFactory, clock: FakeClock) -> None:
    _, snapshot = sweep_with_background(make_sim, clock)
    mig = snapshot.devices[3]
    assert [(i.gpu_instance_id, i.compute_instance_id, i.profile) for i in mig.mig_instances] == [
        (7, 0, "1g.10gb"), (8, 0, "1g.10gb"), (9, 0, "1g.10gb")]
    held = {mig.uuid: [PodRef("ml", "llm-0", "main", "nvidia.com/mig-1g.10gb", mig.mig_instances[0].uuid),
                       PodRef("ml", "llm-1", "main", "nvidia.com/gpu", "3:1")]}
    samples = scrape(snapshot, held)
    used = {(lab["gpu_instance_id"], lab["compute_instance_id"], lab["mig_profile"], lab["pod"]): v
            for lab, v in samples["gpu_mig_memory_used_bytes"]}
    assert set(used) == {("7", "0", "1g.10gb", "llm-0"), ("8", "0", "1g.10gb", "llm-1"),
                         ("9", "0", "1g.10gb", "")}
    assert used[("7", "0", "1g.10gb", "llm-0")] > used[("9", "0", "1g.10gb", "")]  # pid 40 runs on the first
    active = {lab["gpu_instance_id"]: v for lab, v in samples["gpu_mig_sm_active_ratio"]}
    assert set(active) == {"7", "8", "9"} and active["7"] < active["9"]
    assert "gpu_mig_nvlink_tx_bytes_per_second" not in samples
    assert {lab["gpu"] for lab, _ in samples["gpu_sm_active_ratio"]} == {"0", "3"}  # not the instances


def test_memory_and_link_health_series(make_sim: SimFactory, clock: FakeClock) -> None:
    sim, adapter = make_sim(FLEET)
    sim.set_nvlink_down(0, 4, True)
    sim.add_nvlink_errors(0, 4, pynvml.NVML_NVLINK_ERROR_DL_CRC_FLIT, 3)
    sim.add_nvlink_errors(0, 7, pynvml.NVML_NVLINK_ERROR_DL_CRC_FLIT, 2)
    sim.set_row_remap(1, correctable=2, uncorrectable=1, pending=True)
    snapshot = adapter.read()
    devices = tuple(with_background(d, adapter.read_background(d.index)) for d in snapshot.devices)
    samples = scrape(NodeSnapshot(**{**snapshot.__dict__, "devices": devices}))
    up = {(lab["gpu"], lab["link"]): v for lab, v in samples["gpu_nvlink_up"]}
    assert len([k for k in up if k[0] == "0"]) == 18 and len([k for k in up if k[0] == "1"]) == 12
    assert up[("0", "4")] == 0.0 and up[("0", "3")] == 1.0 and not any(k[0] == "2" for k in up)
    # per GPU, summed over its links (as dcgm-exporter's *_ERROR_COUNT_TOTAL); gpu_nvlink_up locates a link
    errors = {(lab["gpu"], lab["type"]): v for lab, v in samples["gpu_nvlink_errors_total"]}
    assert errors[("0", "crc_flit")] == 5.0 and errors[("0", "replay")] == 0.0
    assert len([k for k in errors if k[0] == "0"]) == 4 and not any(k[0] == "2" for k in errors)
    rows = {(lab["gpu"], lab["cause"]): v for lab, v in samples["gpu_remapped_rows"]}
    assert rows[("1", "correctable")] == 2.0 and rows[("1", "uncorrectable")] == 1.0
    assert by_gpu(samples, "gpu_row_remap_pending")["1"] == 1.0
    assert by_gpu(samples, "gpu_row_remap_failed")["1"] == 0.0
    assert set(by_gpu(samples, "gpu_memory_temperature_celsius")) == {"0", "1", "3"}  # L4 has no HBM sensor
    assert set(by_gpu(samples, "gpu_power_violation_seconds_total")) == {"0", "1", "2", "3"}
    assert "gpu_retired_pages" not in samples  # none of these boards retires pages
    states = {lab["gpu"]: lab["state"] for lab, v in samples["gpu_health_state"] if v == 1.0}
    assert states["1"] == "throttled"


@pytest.mark.parametrize("pending, failed, celsius, expected, causes", [
    (False, False, 50.0, HealthState.OPTIMAL, ()),
    (True, False, 50.0, HealthState.THROTTLED, (StateCause.ROW_REMAP,)),
    (True, False, 80.0, HealthState.THROTTLED, (StateCause.TEMPERATURE, StateCause.ROW_REMAP)),
    (True, False, 90.0, HealthState.CRITICAL, (StateCause.TEMPERATURE,)),
    (False, True, 50.0, HealthState.CRITICAL, (StateCause.ROW_REMAP,)),
    (False, True, None, HealthState.CRITICAL, (StateCause.ROW_REMAP,)),
], ids=["none", "pending", "pending-and-hot", "hotter-than-pending", "failed", "failed-no-readings"])
def test_row_remap_sets_a_floor_under_the_health_state(pending: bool, failed: bool, celsius: float | None,
                                                       expected: HealthState,
                                                       causes: tuple[StateCause, ...]) -> None:
    health = device_health(up=True, temperature_celsius=celsius, utilization_ratio=0.1,
                           memory_used_bytes=None if celsius is None else 1, memory_free_bytes=None,
                           memory_total_bytes=None if celsius is None else 100, row_remap_pending=pending,
                           row_remap_failed=failed)
    assert (health.state, health.causes) == (expected, causes)
