"""What one scrape knows besides the snapshot, and the two seams the collector is extended through.

`ScrapeContext` gives every family the same label values for a GPU; `new_family` an empty family for a
metric of exporter/metric_table.py with its label names declared once. `Attribution` (who holds which GPU) and
`CollectorExtension` (more families from the same snapshot) are what exporter/pods/, exporter/health/ and
exporter/profiling/ implement and exporter/collector.py calls.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from exporter import metric_table as m
from exporter.nvml.snapshots import DeviceSnapshot, NodeSnapshot
from exporter.scrape.holders import PodRef, exclusive_holder


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


def new_family(spec: m.MetricSpec) -> GaugeMetricFamily | CounterMetricFamily:
    """An empty family for `spec` with its label names declared once."""
    if spec.kind == "counter":
        return CounterMetricFamily(spec.name, spec.help, labels=spec.labels)
    return GaugeMetricFamily(spec.name, spec.help, labels=spec.labels)
