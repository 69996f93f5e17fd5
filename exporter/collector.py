"""The custom collector: turns one NodeSnapshot into Prometheus metric families at scrape time.

No NVML and no HTTP here. Pod labels come from an injected `Attribution` provider
(exporter/pods/attribution.py: the kubelet pod-resources cache plus /proc; `NoAttribution` leaves them
empty), and
further families built from the same snapshot come from injected `CollectorExtension`s (pods, health, XID,
profiling). Both protocols, the label values and `new_family` live below every one of them, in
exporter/scrape/.
Output looks like:

    gpu_utilization_ratio{gpu="0",uuid="GPU-9bcb...",model="NVIDIA H100 80GB HBM3",node="n1",...} 0.58
    gpu_exporter_nvml_up 1.0
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Protocol

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from exporter import metric_table as m
from exporter.nvml.snapshots import DeviceSnapshot, NodeSnapshot
from exporter.scrape.context import Attribution, CollectorExtension, NoAttribution, ScrapeContext, new_family


class SnapshotSource(Protocol):
    def snapshot(self) -> NodeSnapshot: ...


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
