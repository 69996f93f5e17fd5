"""The custom collector: turns one NodeSnapshot into Prometheus metric families at scrape time.

No NVML and no HTTP here. Pod labels come from an injected `Attribution` provider
(exporter/pods/attribution.py: the kubelet pod-resources cache plus /proc; `NoAttribution` leaves them
empty), and
further families built from the same snapshot come from injected `CollectorExtension`s (pods, health, XID).
Output looks like:

    gpu_utilization_ratio{gpu="0",uuid="GPU-9bcb...",model="NVIDIA H100 80GB HBM3",node="n1",...} 0.58
    gpu_exporter_nvml_up 1.0
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from exporter import metrics as m
from exporter.nvml.snapshots import DeviceSnapshot, NodeSnapshot
from exporter.pods.dra import dra_mig

WHOLE_GPU_RESOURCE = "nvidia.com/gpu"
# MIG device ids under any resource name: the device plugin's `mig-strategy=single` advertises MIG devices as
# nvidia.com/gpu (`MIG-<uuid>`, or `<gpu>:<mig>` with deviceIDStrategy=index), and so does GKE
# (`nvidia<minor>/gi<id>`, `/vgpu<n>` when time-shared too).
_MIG_DEVICE_ID = re.compile(r"MIG-.*|[0-9]+:[0-9]+|nvidia[0-9]+/gi[0-9]+(?:/vgpu[0-9]+)?")


@dataclass(frozen=True)
class PodRef:
    """A container holding a GPU (or running a GPU process): the resource and device id it was granted."""

    namespace: str
    pod: str
    container: str
    resource: str = WHOLE_GPU_RESOURCE
    device_id: str = ""  # as the plugin named it: `GPU-<uuid>`, `MIG-<uuid>`, `0`, `0:1`, `nvidia0/gi1`, ...
    claim: str = ""  # the DRA ResourceClaim it holds the device through; "" for a device plugin's device

    @property
    def is_mig(self) -> bool:
        """A MIG slice: a MIG resource (`nvidia.com/mig-*`), or a MIG device id under any resource name
        (`MIG-<uuid>`, the index strategy's `0:1`, GKE's `nvidia0/gi1`, DRA's `gpu-0-mig-...`)."""
        return (self.resource.startswith("nvidia.com/mig-") or dra_mig(self.device_id) is not None
                or _MIG_DEVICE_ID.fullmatch(self.device_id) is not None)


def exclusive_holder(held: Sequence[PodRef]) -> PodRef | None:
    """The container whose labels go on the device series: exactly one container holds the whole GPU.

    None when unallocated, time-sliced between containers, or partitioned into MIG devices (a MIG holder
    uses a slice, so the device values are not its own).
    """
    if not held or any(ref.is_mig for ref in held):
        return None
    first = held[0]
    if all((ref.namespace, ref.pod, ref.container) == (first.namespace, first.pod, first.container)
           for ref in held):
        return first
    return None


class Attribution(Protocol):
    """Who holds which GPU. Called once per scrape: implementations answer from a cache, never block."""

    def holders(self) -> Mapping[str, Sequence[PodRef]]:
        """GPU UUID -> the containers holding it (several when time-sliced); missing UUID = unallocated."""
        ...

    def pod_of_pid(self, pid: int) -> PodRef | None:
        """The container a GPU process belongs to, or None when unknown."""
        ...


class NoAttribution:
    """No kubelet: every GPU unallocated, every process unattributed."""

    def holders(self) -> Mapping[str, Sequence[PodRef]]:
        return {}

    def pod_of_pid(self, pid: int) -> PodRef | None:
        return None


class SnapshotSource(Protocol):
    def snapshot(self) -> NodeSnapshot: ...


@dataclass(frozen=True)
class ScrapeContext:
    """What one scrape knows besides the snapshot: node name and GPU holders, to build label values."""

    node: str
    holders: Mapping[str, Sequence[PodRef]]

    def device_labels(self, device: DeviceSnapshot) -> list[str]:
        """Values for metrics.GPU_LABELS; pod labels only when exactly one container holds the whole GPU."""
        pod = exclusive_holder(self.holders.get(device.uuid, ()))
        return [str(device.index), device.uuid, device.name, self.node,
                pod.namespace if pod else "", pod.pod if pod else "", pod.container if pod else ""]


class CollectorExtension(Protocol):
    """Adds families computed from the same snapshot (health state, XID counts, ...)."""

    def collect(self, snapshot: NodeSnapshot, context: ScrapeContext) -> Iterable[Metric]: ...


# (metric, DeviceSnapshot attribute) for the one-value-per-GPU families.
_SIMPLE: tuple[tuple[m.MetricSpec, str], ...] = (
    (m.UTILIZATION, "utilization"),
    (m.MEMORY_UTILIZATION, "memory_utilization"),
    (m.MEMORY_USED, "memory_used_bytes"),
    (m.MEMORY_FREE, "memory_free_bytes"),
    (m.MEMORY_TOTAL, "memory_total_bytes"),
    (m.MEMORY_RESERVED, "memory_reserved_bytes"),
    (m.TEMPERATURE, "temperature_celsius"),
    (m.POWER_USAGE, "power_watts"),
    (m.POWER_LIMIT, "power_limit_watts"),
    (m.ENERGY, "energy_joules"),
    (m.SM_CLOCK, "sm_clock_hertz"),
    (m.MEMORY_CLOCK, "memory_clock_hertz"),
    (m.SM_CLOCK_MAX, "sm_clock_max_hertz"),
    (m.MEMORY_CLOCK_MAX, "memory_clock_max_hertz"),
    (m.FAN_SPEED, "fan_speed_ratio"),
    (m.PERFORMANCE_STATE, "performance_state"),
    (m.PCIE_TX, "pcie_tx_bytes_per_second"),
    (m.PCIE_RX, "pcie_rx_bytes_per_second"),
    (m.ENCODER_UTILIZATION, "encoder_utilization"),
    (m.DECODER_UTILIZATION, "decoder_utilization"),
)


def process_memory_by_pid(device: DeviceSnapshot) -> dict[int, int]:
    """Used memory per PID, in NVML's order. NVML lists a process once per MIG instance it runs on, and the
    series has no instance label: the entries are summed so a PID is one series per GPU. A PID whose memory
    NVML cannot tell (None on every entry) is left out."""
    found: dict[int, int] = {}
    for process in device.processes or ():
        if process.used_memory_bytes is not None:
            found[process.pid] = found.get(process.pid, 0) + process.used_memory_bytes
    return found


def new_family(spec: m.MetricSpec) -> GaugeMetricFamily | CounterMetricFamily:
    """An empty family for `spec` with its label names declared once."""
    if spec.kind == "counter":
        return CounterMetricFamily(spec.name, spec.help, labels=spec.labels)
    return GaugeMetricFamily(spec.name, spec.help, labels=spec.labels)


class GpuCollector:
    """Collects at scrape time from `source` (an NvmlSource); register it in the exporter's own registry."""

    def __init__(self, source: SnapshotSource, node_name: str, attribution: Attribution | None = None,
                 extensions: Sequence[CollectorExtension] = ()) -> None:
        if not node_name:
            raise ValueError("GpuCollector: node_name must be non-empty (from --node-name, NODE_NAME or the "
                             "host name)")
        self._source = source
        self._node = node_name
        self._attribution: Attribution = attribution or NoAttribution()
        self._extensions = tuple(extensions)

    def describe(self) -> Iterator[Metric]:
        """Names only, so registering never triggers an NVML sweep."""
        for spec in m.ALL_METRICS:
            yield new_family(spec)

    def collect(self) -> Iterator[Metric]:
        snapshot = self._source.snapshot()
        context = ScrapeContext(self._node, self._attribution.holders())
        yield from self._device_families(snapshot, context)
        yield from self._exporter_families(snapshot)
        for extension in self._extensions:
            yield from extension.collect(snapshot, context)

    def _device_families(self, snapshot: NodeSnapshot, context: ScrapeContext) -> Iterator[Metric]:
        families: dict[m.MetricSpec, GaugeMetricFamily | CounterMetricFamily] = {
            spec: new_family(spec) for spec in m.DEVICE_METRICS}
        info, up = families[m.GPU_INFO], families[m.GPU_UP]
        for device in snapshot.devices:
            labels = context.device_labels(device)
            info.add_metric([*labels, snapshot.driver_version, snapshot.cuda_version, device.pci_bus_id], 1.0)
            up.add_metric(labels, 1.0 if device.up else 0.0)
            if not device.up:
                continue
            for spec, attribute in _SIMPLE:
                value = getattr(device, attribute)
                if value is not None:
                    families[spec].add_metric(labels, float(value))
            if device.clocks_event_reasons is not None:
                reasons = families[m.CLOCKS_EVENT_REASON]
                for reason, active in device.clocks_event_reasons:
                    reasons.add_metric([*labels, reason], 1.0 if active else 0.0)
            ecc = families[m.ECC_ERRORS]
            if device.ecc_corrected is not None:
                ecc.add_metric([*labels, "corrected"], float(device.ecc_corrected))
            if device.ecc_uncorrected is not None:
                ecc.add_metric([*labels, "uncorrected"], float(device.ecc_uncorrected))
            self._processes(device, labels, families[m.PROCESS_MEMORY])
        for family in families.values():
            if family.samples:
                yield family

    def _processes(self, device: DeviceSnapshot, labels: list[str],
                   family: GaugeMetricFamily | CounterMetricFamily) -> None:
        for pid, used in process_memory_by_pid(device).items():
            pod = self._attribution.pod_of_pid(pid)
            values = labels[:4] + ([pod.namespace, pod.pod, pod.container] if pod else ["", "", ""])
            family.add_metric([*values, str(pid)], float(used))

    @staticmethod
    def _exporter_families(snapshot: NodeSnapshot) -> Iterator[Metric]:
        nvml_up = new_family(m.NVML_UP)
        nvml_up.add_metric([], 1.0 if snapshot.nvml_up else 0.0)
        yield nvml_up
        if snapshot.nvml_up:
            gpus = new_family(m.GPUS)
            gpus.add_metric([], float(len(snapshot.devices)))
            yield gpus
        duration = new_family(m.SCRAPE_DURATION)
        duration.add_metric([], snapshot.duration_seconds)
        yield duration
        if snapshot.last_success is not None:
            last = new_family(m.LAST_COLLECT)
            last.add_metric([], snapshot.last_success)
            yield last
        if snapshot.nvml_errors:
            errors = new_family(m.NVML_ERRORS)
            for count in snapshot.nvml_errors:
                errors.add_metric([str(count.gpu), count.call, count.error], float(count.count))
            yield errors
