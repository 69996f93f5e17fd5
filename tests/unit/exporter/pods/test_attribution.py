"""KubeletAttribution and HealthMetrics as collector extensions, from fixed snapshots (no gRPC, no HTTP):
which series carry which pod, per-holder values, and the scaling that keeps holders under the device value."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path

import pytest

from exporter.collector import GpuCollector
from exporter.health.state_families import HealthMetrics
from exporter.nvml.snapshots import DeviceSnapshot, NodeSnapshot, ProcessSnapshot
from exporter.pods.attribution import KubeletAttribution, by_uuid
from exporter.pods.podresources import (
    DeviceAllocation,
    PodResourcesCache,
    PodResourcesUnavailableError,
    build_holder_map,
)
from exporter.pods.procfs import ProcessAttributor
from exporter.scrape.holders import PodRef, exclusive_holder
from tests.scrape import Samples, collect

GPU = "nvidia.com/gpu"
GIB = 1024**3


def ref(pod: str, container: str = "c", device_id: str = "GPU-x", ns: str = "ns") -> PodRef:
    return PodRef(ns, pod, container, GPU if device_id.startswith("GPU") else "nvidia.com/mig-1g.10gb",
                  device_id)


@pytest.mark.parametrize(("held", "expected"), [
    ((), None),
    ((ref("a"),), ref("a")),
    ((ref("a"), ref("a", device_id="GPU-x")), ref("a")),  # two replicas of one container
    ((ref("a"), ref("b")), None),  # time-sliced between two pods
    ((ref("a", "c1"), ref("a", "c2")), None),  # two containers of one pod
    ((ref("a", device_id="MIG-1"),), None),  # a MIG slice is not the whole GPU
], ids=["unallocated", "one", "one-container-two-replicas", "two-pods", "two-containers", "mig"])
def test_exclusive_holder(held: Sequence[PodRef], expected: PodRef | None) -> None:
    assert exclusive_holder(held) == expected


def device(index: int, uuid: str, processes: tuple[ProcessSnapshot, ...] = (),
           process_util: tuple[tuple[int, float], ...] | None = None, **fields: object) -> DeviceSnapshot:
    values: dict[str, object] = {
        "index": index, "uuid": uuid, "name": "NVIDIA H100 80GB HBM3", "pci_bus_id": "", "up": True,
        "utilization": 0.5, "memory_used_bytes": 40 * GIB, "memory_free_bytes": 40 * GIB,
        "memory_total_bytes": 80 * GIB, "temperature_celsius": 60.0, "processes": processes,
        "process_sm_utilization": process_util}
    values.update(fields)
    return DeviceSnapshot(**values)  # type: ignore[arg-type]


class Source:
    def __init__(self, snapshot: NodeSnapshot) -> None:
        self.value = snapshot

    def snapshot(self) -> NodeSnapshot:
        return self.value


def write_proc(root: Path, pid: int, pod: str) -> None:
    (root / str(pid)).mkdir()
    uid = f"{pid:08x}-1111-2222-3333-444444444444"
    (root / str(pid) / "cgroup").write_text(f"0::/kubepods/burstable/pod{uid}/{pid:064x}\n")
    (root / str(pid) / "environ").write_bytes(b"HOSTNAME=" + pod.encode() + b"\0")


def scrape(snapshot: NodeSnapshot, allocations: Sequence[DeviceAllocation] | Exception,
           proc: Path) -> Samples:
    def lister() -> Sequence[DeviceAllocation]:
        if isinstance(allocations, Exception):
            raise allocations
        return allocations

    cache = PodResourcesCache(lister)
    cache.refresh()
    kubelet = KubeletAttribution(cache, ProcessAttributor(proc))
    snapshot = kubelet.observe(snapshot)
    return collect(GpuCollector(Source(snapshot), "n1", kubelet, [kubelet, HealthMetrics()]))


def node(*devices: DeviceSnapshot) -> NodeSnapshot:
    return NodeSnapshot(nvml_up=True, driver_version="1", cuda_version="1", devices=devices, collected_at=1.0,
                        duration_seconds=0.0, last_success=1.0)


def test_shared_gpu_holders_are_scaled_down_to_the_device_value(tmp_path: Path) -> None:
    write_proc(tmp_path, 11, "a")
    write_proc(tmp_path, 12, "b")
    allocations = [DeviceAllocation("ns", "a", "c", GPU, "GPU-1::0"),
                   DeviceAllocation("ns", "b", "c", GPU, "GPU-1::1")]
    # per-process samples say 40 % + 40 %, taken at another instant than the device's 50 %
    shared = device(0, "GPU-1", (ProcessSnapshot(11, 3 * GIB), ProcessSnapshot(12, 5 * GIB)),
                    ((11, 0.4), (12, 0.4)))
    samples = scrape(node(shared), allocations, tmp_path)
    pods = {labels["pod"]: v for labels, v in samples["gpu_pod_utilization_ratio"]}
    assert pods == pytest.approx({"a": 0.25, "b": 0.25})
    memory = {labels["pod"]: v for labels, v in samples["gpu_pod_memory_used_bytes"]}
    assert memory == {"a": 3 * GIB, "b": 5 * GIB}
    assert [labels["pod"] for labels, _ in samples["gpu_utilization_ratio"]] == [""]
    assert sorted((s["pod"], s["shared"]) for s, _ in samples["gpu_allocation_info"]) == [
        ("a", "true"), ("b", "true")]


def test_shared_gpu_without_per_process_utilization_leaves_pod_utilization_out(tmp_path: Path) -> None:
    write_proc(tmp_path, 11, "a")
    allocations = [DeviceAllocation("ns", "a", "c", GPU, "GPU-1::0"),
                   DeviceAllocation("ns", "b", "c", GPU, "GPU-1::1")]
    samples = scrape(node(device(0, "GPU-1", (ProcessSnapshot(11, GIB),), None)), allocations, tmp_path)
    assert "gpu_pod_utilization_ratio" not in samples  # unknown is left out, never 0 or the device value
    assert {labels["pod"]: v for labels, v in samples["gpu_pod_memory_used_bytes"]} == {"a": GIB, "b": 0}


def test_exclusive_gpu_gets_the_device_values_and_a_down_gpu_only_its_allocation(tmp_path: Path) -> None:
    allocations = [DeviceAllocation("ns", "a", "c", GPU, "GPU-1"),
                   DeviceAllocation("ns", "b", "c", GPU, "GPU-2")]
    down = DeviceSnapshot(index=1, uuid="GPU-2", name="x", pci_bus_id="", up=False, error="lost")
    samples = scrape(node(device(0, "GPU-1"), down), allocations, tmp_path)
    assert samples["gpu_pod_utilization_ratio"] == [(
        {"gpu": "0", "uuid": "GPU-1", "model": "NVIDIA H100 80GB HBM3", "node": "n1", "namespace": "ns",
         "pod": "a", "container": "c"}, 0.5)]
    assert samples["gpu_pod_memory_used_bytes"][0][1] == 40 * GIB
    assert {(s["gpu"], s["pod"], s["shared"]) for s, _ in samples["gpu_allocation_info"]} == {
        ("0", "a", "false"), ("1", "b", "false")}
    assert {s["gpu"]: s["pod"] for s, _ in samples["gpu_up"]} == {"0": "a", "1": "b"}
    # a down GPU is critical, speed 0, score 0: it leaves the pool instead of vanishing from it
    states = {s["state"] for s, v in samples["gpu_health_state"] if s["gpu"] == "1" and v == 1.0}
    assert states == {"critical"}
    assert {s["gpu"]: v for s, v in samples["gpu_speed_multiplier"]}["1"] == 0.0
    assert {s["gpu"]: v for s, v in samples["gpu_availability_score"]}["1"] == 0.0


def test_kubelet_down_means_no_pod_series_and_up_zero(tmp_path: Path) -> None:
    write_proc(tmp_path, 11, "a")
    samples = scrape(node(device(0, "GPU-1", (ProcessSnapshot(11, GIB),))),
                     PodResourcesUnavailableError("socket gone"), tmp_path)
    assert samples["gpu_exporter_pod_resources_up"] == [({}, 0.0)]
    assert "gpu_allocation_info" not in samples and "gpu_pod_memory_used_bytes" not in samples
    assert samples["gpu_process_memory_used_bytes"][0][0]["pod"] == ""  # no holders: nothing to match


@pytest.mark.parametrize(("temperature", "used_gib", "state", "speed"), [
    (64.9, 10, "optimal", 1.0),
    (65.0, 10, "normal", 0.8),
    (85.0, 10, "throttled", 0.5),
    (85.1, 10, "critical", 0.0),
    (40.0, 76.1, "critical", 0.0),  # 95.1 % memory: the worse of the two wins
], ids=["64.9C", "65C", "85C", "85.1C", "memory-95.1pct"])
def test_health_families_at_the_boundaries(tmp_path: Path, temperature: float, used_gib: float, state: str,
                                           speed: float) -> None:
    gpu = device(0, "GPU-1", temperature_celsius=temperature, memory_used_bytes=int(used_gib * GIB),
                 memory_free_bytes=int((80 - used_gib) * GIB), utilization=0.25)
    samples = scrape(node(gpu), [], tmp_path)
    assert {s["state"]: v for s, v in samples["gpu_health_state"]} == {
        "optimal": float(state == "optimal"), "normal": float(state == "normal"),
        "throttled": float(state == "throttled"), "critical": float(state == "critical")}
    assert samples["gpu_speed_multiplier"][0][1] == speed
    expected_score = 0.6 * (80 - used_gib) / 80 + 0.4 * 0.75
    assert samples["gpu_availability_score"][0][1] == pytest.approx(expected_score)


def test_unreadable_temperature_and_memory_give_no_state(tmp_path: Path) -> None:
    gpu = device(0, "GPU-1", temperature_celsius=None, memory_used_bytes=None, memory_free_bytes=None,
                 memory_total_bytes=None)
    samples = scrape(node(gpu), [], tmp_path)
    assert "gpu_health_state" not in samples and "gpu_availability_score" not in samples


def test_index_strategy_ids_are_filed_under_the_gpu_uuid(tmp_path: Path) -> None:
    """deviceIDStrategy=index: `1` is GPU 1, `0:1` a MIG device on GPU 0 (a slice: not exclusive)."""
    allocations = [DeviceAllocation("ns", "a", "c", GPU, "1"),
                   DeviceAllocation("ns", "m", "c", "nvidia.com/mig-1g.10gb", "0:1")]
    cache = PodResourcesCache(lambda: allocations)
    cache.refresh()
    kubelet = KubeletAttribution(cache, ProcessAttributor(tmp_path),
                                 uuid_of_index=lambda index: f"GPU-{index}" if index < 2 else None)
    holders = kubelet.holders()
    assert set(holders) == {"GPU-0", "GPU-1"}
    assert exclusive_holder(holders["GPU-1"]) == PodRef("ns", "a", "c", GPU, "1")
    assert exclusive_holder(holders["GPU-0"]) is None


def write_proc_without_environ(root: Path, pid: int) -> None:
    """A process of another uid: its cgroup is world-readable, its environ is not (no CAP_SYS_PTRACE)."""
    write_proc(root, pid, "unreadable")
    (root / str(pid) / "environ").unlink()


def test_shared_gpu_whose_processes_cannot_be_attributed_has_no_pod_series_and_logs_once(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """The audit case: 40 % and 50 % processes on a 90 % GPU shared by two pods, environ unreadable: the
    holders used to read 0.0 and 0 bytes; now their gpu_pod_* series are left out, with one WARNING."""
    write_proc_without_environ(tmp_path, 11)
    write_proc_without_environ(tmp_path, 12)
    write_proc(tmp_path, 21, "c")  # GPU 1: exclusive, still attributed
    allocations = [DeviceAllocation("ns", "a", "c", GPU, "GPU-1::0"),
                   DeviceAllocation("ns", "b", "c", GPU, "GPU-1::1"),
                   DeviceAllocation("ns", "c", "c", GPU, "GPU-2")]
    shared = device(0, "GPU-1", (ProcessSnapshot(11, 3 * GIB), ProcessSnapshot(12, 5 * GIB)),
                    ((11, 0.4), (12, 0.5)), utilization=0.9)
    snapshot = node(shared, device(1, "GPU-2", (ProcessSnapshot(21, GIB),)))
    cache = PodResourcesCache(lambda: allocations)
    cache.refresh()
    kubelet = KubeletAttribution(cache, ProcessAttributor(tmp_path))
    caplog.set_level(logging.WARNING, logger="exporter.pods.attribution")
    for _ in range(3):  # three sweeps, three scrapes
        kubelet.observe(snapshot)
        samples = collect(GpuCollector(Source(snapshot), "n1", kubelet, [kubelet]))
    for name in ("gpu_pod_utilization_ratio", "gpu_pod_memory_used_bytes"):
        assert [(labels["gpu"], labels["pod"]) for labels, _ in samples[name]] == [("1", "c")], name
    assert sorted(labels["pod"] for labels, _ in samples["gpu_allocation_info"]) == ["a", "b", "c"]
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1, warnings
    assert "GPU 0" in warnings[0] and "11" in warnings[0] and "12" in warnings[0]


@pytest.mark.parametrize(("device_id", "minor"), [
    ("nvidia1", 1), ("nvidia1/vgpu3", 1), ("nvidia0/gi2", 0), ("nvidia0/gi2/vgpu1", 0), ("nvidia12", 12)])
def test_gke_device_ids_are_filed_under_the_gpu_with_that_minor(device_id: str, minor: int) -> None:
    minors = {0: "GPU-m0", 1: "GPU-m1", 12: "GPU-m12"}
    raw = build_holder_map([DeviceAllocation("ns", "a", "c", GPU, device_id)])
    held = by_uuid(raw, None, minors.get)
    assert list(held) == [minors[minor]]
    assert held[minors[minor]][0].device_id == device_id.split("/vgpu")[0]  # time-sharing suffix dropped


def test_gke_time_sharing_replicas_of_one_container_are_one_holder() -> None:
    raw = build_holder_map([DeviceAllocation("ns", "a", "c", GPU, "nvidia0/vgpu0"),
                            DeviceAllocation("ns", "a", "c", GPU, "nvidia0/vgpu1"),
                            DeviceAllocation("ns", "b", "c", GPU, "nvidia0/vgpu2")])
    assert [(h.pod, h.device_id) for h in by_uuid(raw, None, {0: "GPU-0"}.get)["GPU-0"]] == [
        ("a", "nvidia0"), ("b", "nvidia0")]
