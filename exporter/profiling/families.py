"""Collector extension for GPM profiling, per GPU and per MIG instance, and the MIG instances' memory:

    gpu_sm_active_ratio{gpu="0",uuid="GPU-…",…} 0.54
    gpu_pipe_active_ratio{gpu="0",…,pipe="hmma"} 0.24
    gpu_mig_memory_used_bytes{gpu="1",…,pod="llm-0",gpu_instance_id="7",…,mig_profile="1g.10gb"} 3.1e9

A GPU without GPM (pre-Hopper, or a driver that refuses) has `gpu_exporter_gpm_supported 0` and no profiling
series; the others are unchanged. MIG instances get their own `gpu_mig_*` names, not the GPU's names with
more labels, so `sum by (gpu)` over a GPU family never adds instances to their GPU. Their pod labels name the
container holding that MIG device (by the device plugin's id: `MIG-<uuid>`, `<gpu>:<slot>`, GKE's `/gi<id>`;
by the DRA driver's device name `gpu-<minor>-mig-...-<profile id>-<placement start>`: profile and placement
where NVML tells the placement, which takes a privilege; profile alone where the GPU has one GPU instance of
that profile: exporter/scrape/holders.py's `mig_holder`).
"""

from __future__ import annotations

from collections.abc import Iterable

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from exporter import metric_table as m
from exporter.nvml.snapshots import DeviceSnapshot, GpmMetrics, NodeSnapshot
from exporter.scrape.context import ScrapeContext, new_family
from exporter.scrape.holders import mig_holder

Family = GaugeMetricFamily | CounterMetricFamily

# (GpmMetrics attribute, GPU family, MIG family) of the one-value metrics; NVLink is the whole GPU's only.
_GPM: tuple[tuple[str, m.MetricSpec, m.MetricSpec | None], ...] = (
    ("sm_active", m.SM_ACTIVE, m.MIG_SM_ACTIVE),
    ("sm_occupancy", m.SM_OCCUPANCY, m.MIG_SM_OCCUPANCY),
    ("tensor_active", m.TENSOR_ACTIVE, m.MIG_TENSOR_ACTIVE),
    ("dram_active", m.DRAM_ACTIVE, m.MIG_DRAM_ACTIVE),
    ("graphics_engine_active", m.GRAPHICS_ENGINE_ACTIVE, m.MIG_GRAPHICS_ENGINE_ACTIVE),
    ("nvlink_tx_bytes_per_second", m.NVLINK_TX, None),
    ("nvlink_rx_bytes_per_second", m.NVLINK_RX, None),
    ("nvdec_utilization", m.NVDEC_UTILIZATION, m.MIG_NVDEC_UTILIZATION),
    ("nvjpg_utilization", m.NVJPG_UTILIZATION, m.MIG_NVJPG_UTILIZATION),
)


def _add_gpm(families: dict[m.MetricSpec, Family], gpm: GpmMetrics, labels: list[str], mig: bool) -> None:
    for attribute, gpu_spec, mig_spec in _GPM:
        spec = mig_spec if mig else gpu_spec
        value = getattr(gpm, attribute)
        if spec is not None and value is not None:
            families[spec].add_metric(labels, float(value))
    pipes = families[m.MIG_PIPE_ACTIVE if mig else m.PIPE_ACTIVE]
    for pipe, ratio in gpm.pipes:
        pipes.add_metric([*labels, pipe], ratio)


class ProfilingMetrics:
    """GPM families per GPU and per MIG instance, and `gpu_mig_memory_*`."""

    def collect(self, snapshot: NodeSnapshot, context: ScrapeContext) -> Iterable[Metric]:
        families: dict[m.MetricSpec, Family] = {
            spec: new_family(spec) for spec in m.PROFILING_METRICS + m.MIG_METRICS}
        for device in snapshot.devices:
            if not device.up:
                continue
            labels = context.device_labels(device)
            if device.gpm_supported is not None:
                families[m.GPM_SUPPORTED].add_metric(labels, 1.0 if device.gpm_supported else 0.0)
            if device.gpm is not None:
                _add_gpm(families, device.gpm, labels, mig=False)
            self._mig(families, device, labels, context)
        for family in families.values():
            if family.samples:
                yield family

    @staticmethod
    def _mig(families: dict[m.MetricSpec, Family], device: DeviceSnapshot, labels: list[str],
             context: ScrapeContext) -> None:
        held = context.holders.get(device.uuid, ())
        for mig in device.mig_instances:
            pod = mig_holder(held, device.index, mig, device.mig_instances)
            ids = ["" if mig.gpu_instance_id is None else str(mig.gpu_instance_id),
                   "" if mig.compute_instance_id is None else str(mig.compute_instance_id), mig.profile]
            values = [*labels[:4], *((pod.namespace, pod.pod, pod.container) if pod else ("", "", "")), *ids]
            if mig.memory_used_bytes is not None:
                families[m.MIG_MEMORY_USED].add_metric(values, float(mig.memory_used_bytes))
            if mig.memory_free_bytes is not None:
                families[m.MIG_MEMORY_FREE].add_metric(values, float(mig.memory_free_bytes))
            if mig.memory_total_bytes is not None:
                families[m.MIG_MEMORY_TOTAL].add_metric(values, float(mig.memory_total_bytes))
            if mig.gpm is not None:
                _add_gpm(families, mig.gpm, values, mig=True)
