"""Collector extension for memory and link health: row remapping, retired pages, memory temperature, NVLink
link state and error counters, clock violation time.

    gpu_row_remap_pending{gpu="0",…} 1
    gpu_nvlink_errors_total{gpu="0",…,type="replay"} 5

Each family is left out for a GPU that does not support it (no NVLink, no HBM sensor, row remapping or page
retirement only), never exported as 0. What a pending or failed row remap does to the health state is in
exporter/health/state.py.
"""

from __future__ import annotations

from collections.abc import Iterable

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from exporter import metric_table as m
from exporter.nvml.snapshots import NodeSnapshot, Reliability
from exporter.scrape.context import ScrapeContext, new_family

Family = GaugeMetricFamily | CounterMetricFamily


class ReliabilityMetrics:
    """`gpu_remapped_rows`, `gpu_row_remap_*`, `gpu_retired_pages`, `gpu_memory_temperature_celsius`,
    `gpu_nvlink_up`, `gpu_nvlink_errors_total`, `gpu_*_violation_seconds_total`, `gpu_pcie_replays_total`,
    `gpu_nvlink_bytes_total`, `gpu_nvlink_data_bytes_total`, `gpu_vgpu_license_status`."""

    def collect(self, snapshot: NodeSnapshot, context: ScrapeContext) -> Iterable[Metric]:
        families: dict[m.MetricSpec, Family] = {spec: new_family(spec) for spec in m.RELIABILITY_METRICS}
        for device in snapshot.devices:
            if not device.up:
                continue
            labels = context.device_labels(device)
            if device.memory_temperature_celsius is not None:
                families[m.MEMORY_TEMPERATURE].add_metric(labels, device.memory_temperature_celsius)
            remap = device.row_remap
            if remap is not None:
                families[m.REMAPPED_ROWS].add_metric([*labels, "correctable"], float(remap.correctable))
                families[m.REMAPPED_ROWS].add_metric([*labels, "uncorrectable"], float(remap.uncorrectable))
                families[m.ROW_REMAP_PENDING].add_metric(labels, 1.0 if remap.pending else 0.0)
                families[m.ROW_REMAP_FAILED].add_metric(labels, 1.0 if remap.failed else 0.0)
            if device.pcie_replays is not None:
                families[m.PCIE_REPLAYS].add_metric(labels, float(device.pcie_replays))
            if device.reliability is not None:
                self._sampled(families, device.reliability, labels)
        for family in families.values():
            if family.samples:
                yield family

    @staticmethod
    def _sampled(families: dict[m.MetricSpec, Family], sampled: Reliability, labels: list[str]) -> None:
        for cause, count in (("single_bit_ecc", sampled.retired_pages_single_bit),
                             ("double_bit_ecc", sampled.retired_pages_double_bit)):
            if count is not None:
                families[m.RETIRED_PAGES].add_metric([*labels, cause], float(count))
        totals: dict[str, float] = {}
        for link in sampled.nvlinks or ():
            families[m.NVLINK_UP].add_metric([*labels, str(link.link)], 1.0 if link.up else 0.0)
            for kind, count in link.errors:
                totals[kind] = totals.get(kind, 0.0) + count
        for kind, total in totals.items():  # per GPU, as dcgm-exporter's *_ERROR_COUNT_TOTAL fields
            families[m.NVLINK_ERRORS].add_metric([*labels, kind], total)
        for spec, direction, count in ((m.NVLINK_BYTES, "tx", sampled.nvlink_tx_bytes),
                                       (m.NVLINK_BYTES, "rx", sampled.nvlink_rx_bytes),
                                       (m.NVLINK_DATA_BYTES, "tx", sampled.nvlink_data_tx_bytes),
                                       (m.NVLINK_DATA_BYTES, "rx", sampled.nvlink_data_rx_bytes)):
            if count is not None:
                families[spec].add_metric([*labels, direction], float(count))
        if sampled.vgpu_licensed is not None:
            families[m.VGPU_LICENSED].add_metric(labels, 1.0 if sampled.vgpu_licensed else 0.0)
        for spec, seconds in ((m.POWER_VIOLATION, sampled.power_violation_seconds),
                              (m.THERMAL_VIOLATION, sampled.thermal_violation_seconds)):
            if seconds is not None:
                families[spec].add_metric(labels, seconds)
