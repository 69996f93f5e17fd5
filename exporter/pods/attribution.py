"""Pod attribution wired into the collector: the kubelet's GPU holders plus /proc for GPU processes.

`KubeletAttribution` is the collector's `Attribution` (holders per GPU uuid from the PodResourcesCache, the
pod of a GPU process from ProcessAttributor) and a `CollectorExtension` producing the pod families:

    gpu_allocation_info{gpu="1",…,pod="a",container="c",resource="nvidia.com/gpu",shared="true"} 1
    gpu_pod_utilization_ratio{gpu="1",uuid="GPU-…",…,namespace="ml",pod="a",container="c"} 0.3
    gpu_pod_sm_utilization_ratio{gpu="1",uuid="GPU-…",…,namespace="ml",pod="a",container="c"} 0.3
    gpu_exporter_pod_resources_up 1

Processes are attributed in a sweep hook (`observe`), never per scrape, and remembered while they stay on the
GPU with the same holders; the kubelet is only read by the cache's own thread. For a shared GPU (time-sliced,
or MIG slices) the per-holder values are the sums of the holder's processes; if those sums exceed the device
value (the per-process samples are taken at another instant than the device's) they are scaled down to it,
so holders never add up to more than the device. When a process on a shared GPU may be a holder's but not
known whose (its environ unreadable, see exporter/pods/procfs.py), that GPU's gpu_pod_* series are left out (a
WARNING once per GPU): a holder reading 0 while its processes run would be a fabrication. So are they when
NVML cannot list the GPU's processes, and gpu_pod_utilization_ratio when it has no per-process utilization
(a GPU in MIG mode never has: NVML does not support it there). gpu_pod_sm_utilization_ratio and
gpu_pod_memory_bandwidth_utilization_ratio are those per-process sums as NVML samples them, unscaled, on
exclusive and shared GPUs alike (on a time-sliced GPU they add up to the device's within the window).

Device ids are mapped to GPU uuids here (`by_uuid`): the `index` strategy's `0` / `0:1` by NVML index, GKE's
`nvidia0` / `nvidia0/gi1` and NVIDIA's DRA driver's `gpu-0` / `gpu-0-mig-...` by device minor (from the
driver's /proc/driver/nvidia, or an injected lookup; see exporter/scrape/dra.py).
An id that matches no GPU of the node is logged once (WARNING) and its holders get no GPU series.
"""

from __future__ import annotations

import dataclasses
import logging
import re
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence

from prometheus_client.core import Metric

from exporter import metric_table as m
from exporter.nvml.snapshots import DeviceSnapshot, NodeSnapshot
from exporter.pods.podresources.cache import PodResourcesCache
from exporter.pods.podresources.mapping import DeviceHolder
from exporter.pods.procfs import (
    Located,
    PodProcessUtilization,
    PodUsage,
    ProcessAttribution,
    ProcessAttributor,
    Unattributed,
    pod_process_utilization,
    pod_usage,
    read_driver_minors,
    unattributed_pids,
)
from exporter.scrape.context import ScrapeContext, new_family
from exporter.scrape.dra import dra_minor
from exporter.scrape.holders import PodRef, exclusive_holder

log = logging.getLogger(__name__)

_INDEX_ID = re.compile(r"([0-9]+)(?::[0-9]+)?")  # device-plugin deviceIDStrategy=index: `0`, or `0:1` for MIG
# GKE's device plugin: `nvidia<minor>`, a MIG GPU instance `nvidia<minor>/gi<id>`, replicas `/vgpu<n>`
_MINOR_ID = re.compile(r"nvidia([0-9]+)(?:/gi[0-9]+)?(?:/vgpu[0-9]+)?")

Holders = Mapping[str, tuple[DeviceHolder, ...]]
UuidLookup = Callable[[int], "str | None"]


def pod_ref(holder: DeviceHolder) -> PodRef:
    return PodRef(holder.namespace, holder.pod, holder.container, holder.resource, holder.device_id,
                  holder.claim)


def by_uuid(raw: Holders, uuid_of_index: UuidLookup | None,
            uuid_of_minor: UuidLookup | None = None) -> Holders:
    """Holders keyed by GPU uuid: ids of the `index` strategy (`0`, `0:1`) are filed under GPU 0's uuid,
    GKE ids (`nvidia0`, `nvidia0/gi1`) and DRA device names (`gpu-0`, `gpu-0-mig-...`) under the uuid of
    the GPU with device minor 0; others stay as given."""
    if not any(_gpu_number(key, uuid_of_index, uuid_of_minor) for key in raw):
        return raw
    merged: dict[str, set[DeviceHolder]] = {}
    for key, held in raw.items():
        merged.setdefault(_gpu_number(key, uuid_of_index, uuid_of_minor) or key, set()).update(held)
    return {key: tuple(sorted(held)) for key, held in merged.items()}


def minor_of(device_id: str) -> int | None:
    """The device minor a GKE id (`nvidia<minor>` with an optional `/gi<id>` or `/vgpu<n>`) or a DRA device
    name (`gpu-<minor>`, `gpu-<minor>-mig-...`) names its GPU by; None for any other id."""
    match = _MINOR_ID.fullmatch(device_id)
    return int(match.group(1)) if match is not None else dra_minor(device_id)


def is_minor_id(device_id: str) -> bool:
    """An id naming a GPU by its device minor, which only the driver maps to a uuid (`read_driver_minors`)."""
    return minor_of(device_id) is not None


def _gpu_number(key: str, uuid_of_index: UuidLookup | None, uuid_of_minor: UuidLookup | None) -> str | None:
    """The GPU uuid an index or minor id names; None for any other id or a number no GPU has."""
    index, minor = _INDEX_ID.fullmatch(key), minor_of(key)
    if index is not None and uuid_of_index is not None:
        return uuid_of_index(int(index.group(1)))
    if minor is not None and uuid_of_minor is not None:
        return uuid_of_minor(minor)
    return None


class KubeletAttribution:
    """Attribution + CollectorExtension over a started PodResourcesCache; `observe` is a sweep hook.

    `uuid_of_minor` maps a device minor to a GPU uuid (GKE ids); without one the driver's
    `<proc root>/driver/nvidia/gpus/*/information` is read, in the sweep hook, when a GKE id needs it.
    """

    def __init__(self, cache: PodResourcesCache, attributor: ProcessAttributor | None = None,
                 uuid_of_index: UuidLookup | None = None, uuid_of_minor: UuidLookup | None = None) -> None:
        self.cache = cache
        self._attributor = attributor or ProcessAttributor()
        self._uuid_of_index = uuid_of_index
        self._uuid_of_minor = uuid_of_minor
        self._minors: Mapping[int, str] = {}  # read from the driver when no uuid_of_minor is given
        self._minors_tried: object = None  # (unknown minors, GPU uuids) of the last read: not again
        self._lock = threading.Lock()
        # (raw holders, minor table) -> their mapping by uuid and as PodRefs, recomputed when either changes
        self._converted: tuple[object, object, Holders, Mapping[str, tuple[PodRef, ...]]] = (
            None, None, {}, {})
        self._attributions: Mapping[int, Located] = {}
        self._pids: Mapping[int, PodRef] = {}
        # (pid, its GPU's holders) -> where it is, kept while the process stays in NVML's list: /proc is
        # read once per process, not once per sweep (UNKNOWN and GONE are looked at again each sweep)
        self._known: dict[tuple[int, tuple[DeviceHolder, ...]], Located] = {}
        self._logged_ids: set[str] = set()
        self._logged_gpus: set[str] = set()

    # --- Attribution (scrape path: no I/O) ---
    def holders(self) -> Mapping[str, Sequence[PodRef]]:
        return self._current()[1]

    def device_holders(self) -> Holders:
        """GPU uuid -> the kubelet's holders (index and minor ids mapped to uuids); empty when it is down."""
        return self._current()[0]

    def _current(self) -> tuple[Holders, Mapping[str, tuple[PodRef, ...]]]:
        raw = self.cache.snapshot().holders
        with self._lock:
            source, minors, mapped, converted = self._converted
            if source is not raw or minors is not self._minors:
                minors = self._minors
                mapped = by_uuid(raw, self._uuid_of_index, self._uuid_of_minor or minors.get)
                converted = {uuid: tuple(pod_ref(h) for h in held) for uuid, held in mapped.items()}
                self._converted = (raw, minors, mapped, converted)
        return mapped, converted

    def pod_of_pid(self, pid: int) -> PodRef | None:
        return self._pids.get(pid)

    def attribution_of(self, pid: int) -> ProcessAttribution | None:
        found = self._attributions.get(pid)
        return found if isinstance(found, ProcessAttribution) else None

    # --- sweep hook: /proc is read once per NVML sweep ---
    def observe(self, snapshot: NodeSnapshot) -> NodeSnapshot:
        self._read_minors(snapshot)
        holders, converted = self._current()
        self._log_unmatched_ids(snapshot, holders)
        attributions: dict[int, Located] = {}
        known: dict[tuple[int, tuple[DeviceHolder, ...]], Located] = {}
        for device in snapshot.devices:
            held = holders.get(device.uuid, ())
            for process in device.processes or ():
                key = (process.pid, held)
                found = self._known.get(key) or self._attributor.locate(process.pid, held)
                if found not in (Unattributed.UNKNOWN, Unattributed.GONE):
                    known[key] = found
                attributions[process.pid] = found
        self._known = known  # only processes still running: a vanished pid is forgotten
        self._attributions = attributions
        self._pids = {pid: PodRef(a.namespace, a.pod, a.container) for pid, a in attributions.items()
                      if isinstance(a, ProcessAttribution)}
        self._log_unattributed(snapshot, holders, converted)
        return snapshot

    def _read_minors(self, snapshot: NodeSnapshot) -> None:
        """Read the driver's minor table when a GKE id names a minor not in it (once per change)."""
        if self._uuid_of_minor is not None:
            return
        raw = self.cache.snapshot().holders
        wanted = {minor for key in raw if (minor := minor_of(key)) is not None}
        missing = frozenset(wanted - set(self._minors))
        devices = tuple((d.uuid, d.pci_bus_id) for d in snapshot.devices if d.uuid)
        if not missing or (missing, devices) == self._minors_tried:
            return
        self._minors_tried = (missing, devices)
        minors = read_driver_minors(devices, self._attributor.proc_root)
        if minors != self._minors:
            self._minors = minors  # a new object: _current() maps the holders again

    def _log_unmatched_ids(self, snapshot: NodeSnapshot, holders: Holders) -> None:
        uuids = {d.uuid for d in snapshot.devices if d.uuid}
        if not snapshot.nvml_up or not uuids:
            return
        for key in sorted(set(holders) - uuids - self._logged_ids):
            self._logged_ids.add(key)
            pods = ", ".join(sorted({f"{h.namespace}/{h.pod}" for h in holders[key]}))
            log.warning("kubelet device id %r (held by %s) matches no GPU on this node (known forms: "
                        "GPU-<uuid>, MIG-<uuid>, an index such as 0 or 0:1, GKE's nvidia<minor>, DRA's "
                        "gpu-<minor>); those pods get no GPU series", key, pods)

    def _log_unattributed(self, snapshot: NodeSnapshot, holders: Holders,
                          converted: Mapping[str, tuple[PodRef, ...]]) -> None:
        """Once per GPU: a shared GPU whose per-holder series are left out because of unknown processes."""
        for device in snapshot.devices:
            held = holders.get(device.uuid, ())
            if device.uuid in self._logged_gpus or not held or exclusive_holder(converted[device.uuid]):
                continue  # an exclusive GPU's holder gets the device values, whoever runs on it
            pids = unattributed_pids(held, device.processes or (), self._attributions)
            if pids:
                self._logged_gpus.add(device.uuid)
                log.warning("GPU %d (%s): process(es) %s cannot be attributed to one of its %d holders (is "
                            "<proc root>/<pid>/environ readable? see README, Process -> pod); its "
                            "gpu_pod_* series are left out while this lasts", device.index, device.uuid,
                            ", ".join(map(str, pids)), len({(h.namespace, h.pod, h.container) for h in held}))

    # --- CollectorExtension ---
    def collect(self, snapshot: NodeSnapshot, context: ScrapeContext) -> Iterable[Metric]:
        up = new_family(m.POD_RESOURCES_UP)
        up.add_metric([], 1.0 if self.cache.up else 0.0)
        attempts = new_family(m.POD_RESOURCES_ATTEMPTS)
        attempts.add_metric([], float(self.cache.attempts))
        info, utilization, sm, bandwidth, memory = (new_family(spec) for spec in (
            m.ALLOCATION_INFO, m.POD_UTILIZATION, m.POD_SM_UTILIZATION, m.POD_MEMORY_BANDWIDTH,
            m.POD_MEMORY_USED))
        raw = self.device_holders()
        for device in snapshot.devices:
            held = context.holders.get(device.uuid, ())
            if not held:
                continue
            base = context.device_labels(device)[:4]
            shared = "false" if exclusive_holder(held) is not None else "true"
            for ref in held:
                labels = [*base, ref.namespace, ref.pod, ref.container, ref.resource, shared, ref.claim]
                info.add_metric(labels, 1.0)
            if not device.up:
                continue
            for usage in self.usage(device, raw.get(device.uuid, ()), shared == "true"):
                labels = [*base, usage.namespace, usage.pod, usage.container]
                if usage.utilization_ratio is not None:
                    utilization.add_metric(labels, usage.utilization_ratio)
                if usage.memory_used_bytes is not None:
                    memory.add_metric(labels, float(usage.memory_used_bytes))
            for share in self.process_utilization(device, raw.get(device.uuid, ())):
                labels = [*base, share.namespace, share.pod, share.container]
                sm.add_metric(labels, share.sm_ratio)
                if share.memory_bandwidth_ratio is not None:
                    bandwidth.add_metric(labels, share.memory_bandwidth_ratio)
        yield up
        yield attempts
        for family in (info, utilization, sm, bandwidth, memory):
            if family.samples:
                yield family

    def process_utilization(self, device: DeviceSnapshot,
                            held: Sequence[DeviceHolder]) -> tuple[PodProcessUtilization, ...]:
        """Per-container sums of NVML's per-process SM and memory-bandwidth utilization (unscaled: on a
        time-sliced GPU they add up to the device's within the sampling window)."""
        memory = device.process_memory_utilization
        return pod_process_utilization(
            held, device.processes, self._attributions,
            None if device.process_sm_utilization is None else dict(device.process_sm_utilization),
            None if memory is None else dict(memory))

    def usage(self, device: DeviceSnapshot, held: Sequence[DeviceHolder],
              shared: bool) -> tuple[PodUsage, ...]:
        """Per-container utilization and memory of one GPU (see the module doc for shared GPUs)."""
        percent = None if device.process_sm_utilization is None else {
            pid: 100.0 * ratio for pid, ratio in device.process_sm_utilization}
        found = pod_usage(held, device.processes, self._attributions, percent, device.utilization,
                          device.memory_used_bytes, partitioned=shared)
        if not shared or device.utilization is None:
            return found
        total = sum(u.utilization_ratio or 0.0 for u in found)
        if total <= device.utilization or total <= 0:
            return found
        scale = device.utilization / total
        return tuple(dataclasses.replace(u, utilization_ratio=None if u.utilization_ratio is None
                                         else u.utilization_ratio * scale) for u in found)
