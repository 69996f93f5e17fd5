"""MIG holders, whatever the device plugin calls their slice: a `nvidia.com/mig-*` resource, or a MIG device
id under `nvidia.com/gpu` (mig-strategy=single: `MIG-<uuid>` or the index strategy's `0:1`; GKE:
`nvidia0/gi1`). A single MIG holder never owns the whole GPU: no pod labels on the device series,
`shared="true"`, and its gpu_pod_* values are its own processes' (NVML has no utilization on a MIG-enabled
GPU: left out, never 0)."""

from __future__ import annotations

from pathlib import Path

import pytest

from exporter.collector import GpuCollector
from exporter.health.state_families import HealthMetrics
from exporter.nvml.snapshots import NodeSnapshot, ProcessSnapshot
from exporter.pods.attribution import KubeletAttribution
from exporter.pods.podresources import DeviceAllocation, PodResourcesCache
from exporter.pods.procfs import ProcessAttributor
from exporter.scrape.holders import PodRef, exclusive_holder
from tests.scrape import Samples, collect
from tests.unit.exporter.pods.test_attribution import GIB, GPU, Source, device, node, write_proc

MIG_1G = "nvidia.com/mig-1g.10gb"


@pytest.mark.parametrize(("resource", "device_id", "mig"), [
    (GPU, "GPU-9bcb", False),
    (GPU, "GPU-9bcb::2", False),  # a time-slicing replica is still the whole GPU
    (GPU, "MIG-4f2a", True),
    (MIG_1G, "MIG-4f2a", True),
    (MIG_1G, "0:1", True),
    (GPU, "0:1", True),  # mig-strategy=single with deviceIDStrategy=index
    (GPU, "0", False),
    (GPU, "12:3", True),
    (GPU, "nvidia0", False),  # GKE: a whole GPU
    (GPU, "nvidia0/vgpu3", False),  # GKE time-sharing replica of a whole GPU
    (GPU, "nvidia0/gi1", True),  # GKE: a MIG GPU instance
    (GPU, "nvidia10/gi13", True),
    (GPU, "nvidia0/gi1/vgpu2", True),  # GKE: time-shared MIG instance
    (GPU, "nvidia0/gix", False),
    (GPU, "", False),
], ids=lambda v: str(v))
def test_is_mig(resource: str, device_id: str, mig: bool) -> None:
    assert PodRef("ns", "a", "c", resource, device_id).is_mig is mig


def test_a_single_gke_mig_holder_is_not_an_exclusive_holder() -> None:
    assert exclusive_holder([PodRef("ns", "a", "c", GPU, "nvidia0/gi1")]) is None
    whole = PodRef("ns", "a", "c", GPU, "nvidia0")
    assert exclusive_holder([whole]) == whole


def scrape(snapshot: NodeSnapshot, allocations: list[DeviceAllocation], proc: Path) -> Samples:
    """One sweep and one scrape with GKE minors 0 -> GPU-0 and 1 -> GPU-1, index ids by NVML index."""
    cache = PodResourcesCache(lambda: allocations)
    cache.refresh()
    uuids = {0: "GPU-0", 1: "GPU-1"}
    kubelet = KubeletAttribution(cache, ProcessAttributor(proc), uuid_of_index=uuids.get,
                                 uuid_of_minor=uuids.get)
    kubelet.observe(snapshot)
    return collect(GpuCollector(Source(snapshot), "n1", kubelet, [kubelet, HealthMetrics()]))


def mig_gpu(processes: tuple[ProcessSnapshot, ...] | None) -> NodeSnapshot:
    """GPU 0 in MIG mode, as real NVML answers it: no device or per-process utilization."""
    return node(device(0, "GPU-0", processes, None, utilization=None, memory_utilization=None,
                       memory_used_bytes=12 * GIB, memory_free_bytes=68 * GIB),
                device(1, "GPU-1", (ProcessSnapshot(21, GIB),), ((21, 0.5),)))


@pytest.mark.parametrize("device_id", ["nvidia0/gi1", "nvidia0/gi1/vgpu0", "0:1"])
def test_one_mig_holder_under_nvidia_com_gpu_gets_its_processes_not_the_device(
        tmp_path: Path, device_id: str) -> None:
    write_proc(tmp_path, 11, "mig-job")
    write_proc(tmp_path, 21, "trainer")
    allocations = [DeviceAllocation("batch", "mig-job", "worker", GPU, device_id),
                   DeviceAllocation("ml", "trainer", "main", GPU, "nvidia1")]
    samples = scrape(mig_gpu((ProcessSnapshot(11, 3 * GIB),)), allocations, tmp_path)
    pods = {labels["gpu"]: labels["pod"] for labels, _ in samples["gpu_up"]}
    assert pods == {"0": "", "1": "trainer"}  # the slice is not the device; GKE's whole GPU still is
    allocation = sorted((s["gpu"], s["pod"], s["resource"], s["shared"])
                        for s, _ in samples["gpu_allocation_info"])
    assert allocation == [("0", "mig-job", GPU, "true"), ("1", "trainer", GPU, "false")]
    memory = {labels["pod"]: v for labels, v in samples["gpu_pod_memory_used_bytes"]}
    assert memory == {"mig-job": 3 * GIB, "trainer": 40 * GIB}  # its process, not the device's 12 GiB
    utilization = {labels["pod"]: v for labels, v in samples["gpu_pod_utilization_ratio"]}
    assert utilization == {"trainer": 0.5}  # unknown on the MIG GPU: left out, not 0, not a device copy
    assert [labels["gpu"] for labels, _ in samples["gpu_availability_score"]] == ["1"]
    assert {labels["gpu"] for labels, _ in samples["gpu_health_state"]} == {"0", "1"}


def test_holders_of_a_gpu_whose_processes_nvml_cannot_list_get_no_pod_series(tmp_path: Path) -> None:
    """The process list not supported or not permitted: a MIG or time-sliced holder's share is unknown."""
    allocations = [DeviceAllocation("batch", "mig-job", "worker", MIG_1G, "0:1"),
                   DeviceAllocation("ml", "trainer", "main", GPU, "GPU-1::0"),
                   DeviceAllocation("ml", "other", "main", GPU, "GPU-1::1")]
    snapshot = node(device(0, "GPU-0", None, None, utilization=None),
                    device(1, "GPU-1", None, ((21, 0.5),)))
    samples = scrape(snapshot, allocations, tmp_path)
    assert "gpu_pod_memory_used_bytes" not in samples and "gpu_pod_utilization_ratio" not in samples
    assert len(samples["gpu_allocation_info"]) == 3
