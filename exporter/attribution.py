"""Pod attribution wired into the collector: the kubelet's GPU holders plus /proc for GPU processes.

`KubeletAttribution` is the collector's `Attribution` (holders per GPU uuid from the PodResourcesCache, the
pod of a GPU process from ProcessAttributor) and a `CollectorExtension` producing the pod families:

    gpu_allocation_info{gpu="1",…,pod="a",container="c",resource="nvidia.com/gpu",shared="true"} 1
    gpu_pod_utilization_ratio{gpu="1",uuid="GPU-…",…,namespace="ml",pod="a",container="c"} 0.3
    gpu_exporter_pod_resources_up 1

Processes are attributed in a sweep hook (`observe`), never per scrape, and remembered while they stay on the
GPU with the same holders; the kubelet is only read by the cache's own thread. For a shared GPU (time-sliced,
or MIG slices) the per-holder values are the sums of the holder's processes; if those sums exceed the device
value (the per-process samples are taken at another instant than the device's) they are scaled down to it,
so holders never add up to more than the device.
"""

from __future__ import annotations

import dataclasses
import re
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence

from prometheus_client.core import Metric

from exporter import metrics as m
from exporter.collector import PodRef, ScrapeContext, exclusive_holder, new_family
from exporter.nvml import DeviceSnapshot, NodeSnapshot
from exporter.podresources.cache import PodResourcesCache
from exporter.podresources.mapping import DeviceHolder
from exporter.procfs import PodUsage, ProcessAttribution, ProcessAttributor, pod_usage

_INDEX_ID = re.compile(r"^(\d+)(?::\d+)?$")  # device-plugin deviceIDStrategy=index: `0`, or `0:1` for MIG

Holders = Mapping[str, tuple[DeviceHolder, ...]]


def pod_ref(holder: DeviceHolder) -> PodRef:
    return PodRef(holder.namespace, holder.pod, holder.container, holder.resource, holder.device_id)


def by_uuid(raw: Holders, uuid_of_index: Callable[[int], str | None] | None) -> Holders:
    """Holders keyed by GPU uuid: ids of the `index` strategy (`0`, `0:1`) are filed under GPU 0's uuid."""
    if uuid_of_index is None or not any(_INDEX_ID.match(key) for key in raw):
        return raw
    merged: dict[str, set[DeviceHolder]] = {}
    for key, held in raw.items():
        match = _INDEX_ID.match(key)
        uuid = uuid_of_index(int(match.group(1))) if match else None
        merged.setdefault(uuid or key, set()).update(held)
    return {key: tuple(sorted(held)) for key, held in merged.items()}


class KubeletAttribution:
    """Attribution + CollectorExtension over a started PodResourcesCache; `observe` is a sweep hook."""

    def __init__(self, cache: PodResourcesCache, attributor: ProcessAttributor | None = None,
                 uuid_of_index: Callable[[int], str | None] | None = None) -> None:
        self.cache = cache
        self._attributor = attributor or ProcessAttributor()
        self._uuid_of_index = uuid_of_index
        self._lock = threading.Lock()
        self._converted: tuple[object, Holders, Mapping[str, tuple[PodRef, ...]]] = (None, {}, {})
        self._attributions: Mapping[int, ProcessAttribution | None] = {}
        self._pids: Mapping[int, PodRef] = {}
        # (pid, its GPU's holders) -> attribution, kept while the process stays in NVML's list: /proc is
        # read once per process, not once per sweep (unattributed processes are looked at again each sweep)
        self._known: dict[tuple[int, tuple[DeviceHolder, ...]], ProcessAttribution] = {}

    # --- Attribution (scrape path: no I/O) ---
    def holders(self) -> Mapping[str, Sequence[PodRef]]:
        return self._current()[1]

    def device_holders(self) -> Holders:
        """GPU uuid -> the kubelet's holders (index-strategy ids mapped to uuids); empty when it is down."""
        return self._current()[0]

    def _current(self) -> tuple[Holders, Mapping[str, tuple[PodRef, ...]]]:
        raw = self.cache.snapshot().holders
        with self._lock:
            source, mapped, converted = self._converted
            if source is not raw:
                mapped = by_uuid(raw, self._uuid_of_index)
                converted = {uuid: tuple(pod_ref(h) for h in held) for uuid, held in mapped.items()}
                self._converted = (raw, mapped, converted)
        return mapped, converted

    def pod_of_pid(self, pid: int) -> PodRef | None:
        return self._pids.get(pid)

    def attribution_of(self, pid: int) -> ProcessAttribution | None:
        return self._attributions.get(pid)

    # --- sweep hook: /proc is read once per NVML sweep ---
    def observe(self, snapshot: NodeSnapshot) -> NodeSnapshot:
        holders = self.device_holders()
        attributions: dict[int, ProcessAttribution | None] = {}
        known: dict[tuple[int, tuple[DeviceHolder, ...]], ProcessAttribution] = {}
        for device in snapshot.devices:
            held = holders.get(device.uuid, ())
            for process in device.processes or ():
                key = (process.pid, held)
                found = self._known.get(key) or self._attributor.attribute(process.pid, held)
                if found is not None:
                    known[key] = found
                attributions[process.pid] = found
        self._known = known  # only processes still running: a vanished pid is forgotten
        self._attributions = attributions
        self._pids = {pid: PodRef(a.namespace, a.pod, a.container) for pid, a in attributions.items()
                      if a is not None}
        return snapshot

    # --- CollectorExtension ---
    def collect(self, snapshot: NodeSnapshot, context: ScrapeContext) -> Iterable[Metric]:
        up = new_family(m.POD_RESOURCES_UP)
        up.add_metric([], 1.0 if self.cache.up else 0.0)
        attempts = new_family(m.POD_RESOURCES_ATTEMPTS)
        attempts.add_metric([], float(self.cache.attempts))
        info, utilization, memory = (new_family(spec) for spec in
                                     (m.ALLOCATION_INFO, m.POD_UTILIZATION, m.POD_MEMORY_USED))
        raw = self.device_holders()
        for device in snapshot.devices:
            held = context.holders.get(device.uuid, ())
            if not held:
                continue
            base = context.device_labels(device)[:4]
            shared = "false" if exclusive_holder(held) is not None else "true"
            for ref in held:
                info.add_metric([*base, ref.namespace, ref.pod, ref.container, ref.resource, shared], 1.0)
            if not device.up:
                continue
            for usage in self.usage(device, raw.get(device.uuid, ()), shared == "true"):
                labels = [*base, usage.namespace, usage.pod, usage.container]
                if usage.utilization_ratio is not None:
                    utilization.add_metric(labels, usage.utilization_ratio)
                if usage.memory_used_bytes is not None:
                    memory.add_metric(labels, float(usage.memory_used_bytes))
        yield up
        yield attempts
        for family in (info, utilization, memory):
            if family.samples:
                yield family

    def usage(self, device: DeviceSnapshot, held: Sequence[DeviceHolder],
              shared: bool) -> tuple[PodUsage, ...]:
        """Per-container utilization and memory of one GPU (see the module doc for shared GPUs)."""
        percent = None if device.process_sm_utilization is None else {
            pid: 100.0 * ratio for pid, ratio in device.process_sm_utilization}
        found = pod_usage(held, device.processes or (), self._attributions, percent, device.utilization,
                          device.memory_used_bytes, partitioned=shared)
        if not shared or device.utilization is None:
            return found
        total = sum(u.utilization_ratio or 0.0 for u in found)
        if total <= device.utilization or total <= 0:
            return found
        scale = device.utilization / total
        return tuple(dataclasses.replace(u, utilization_ratio=None if u.utilization_ratio is None
                                         else u.utilization_ratio * scale) for u in found)
