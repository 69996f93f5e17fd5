"""`gpu-exporter status`: read every GPU and the kubelet's GPU holders once, print a table, CSV or JSON
(`-o table|wide|json|csv`, plumbing/output.py).

The kubelet being unreachable is not an error here (a laptop, the simulated backend): the header line and the
JSON say `pod-resources unavailable` with the reason, and the holder columns stay empty.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from collections.abc import Mapping
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

from exporter.backend_args import add_backend_arguments, exporter_config, node_name, nvml_backend
from exporter.config import ExporterConfig
from exporter.errors import NvmlUnavailableError
from exporter.health.state import HealthThresholds
from exporter.nvml.adapter import NodeSnapshot, NvmlAdapter
from exporter.nvml.snapshots import throttle_reasons
from exporter.pods.attribution import by_uuid, is_minor_id
from exporter.pods.podresources.client import PodResourcesClient, PodResourcesUnavailableError
from exporter.pods.podresources.mapping import DeviceHolder, build_holder_map
from exporter.pods.procfs import DEFAULT_PROC_ROOT, read_driver_minors
from exporter.serving.status_api import GpuStatus, gpu_json
from exporter.serving.status_service import gpu_statuses
from exporter.source import mean_by_pid
from plumbing.display import aligned, as_csv, visible
from plumbing.output import CSV, JSON, WIDE, add_output_arguments, document

Holders = Mapping[str, tuple[DeviceHolder, ...]]

log = logging.getLogger(__name__)

NO_GPU_HINT = "no GPU or driver here? --simulate N shows N simulated GPUs (docs/exporter.md)"
HELP = "print the local GPUs once and exit"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The backend flags (kept when given before `status`) and -o."""
    add_backend_arguments(parser, suppress=True)
    add_output_arguments(parser, json_alias="deprecated",
                         what=": wide adds the whole UUID and the PCI bus id; json and csv are "
                              "docs/exporter.md's shape")


def run(args: argparse.Namespace) -> int:
    """Read the GPUs once and print them: 0, or 1 without NVML; a bad config file raises ConfigError."""
    config = exporter_config(args)
    return run_status(nvml_backend(args), node_name(args.node_name), config, args.output, "gpu-exporter",
                      args.proc_root, headers=not args.no_headers)


def run_status(nvml: Any, node: str, config: ExporterConfig, output: str, prog: str,
               proc_root: str | Path = DEFAULT_PROC_ROOT, headers: bool = True) -> int:
    """Read once and print in the `output` format (`TABLE`, `WIDE`, `JSON`, `CSV`); 1 without NVML."""
    adapter = NvmlAdapter(nvml)
    as_json = output == JSON
    try:
        adapter.init()
        snapshot = adapter.read()
        if as_json:  # the table shows neither, so only the JSON pays for the ~40 ms per GPU
            snapshot = with_background_samples(adapter, snapshot, nvml.NVMLError)
        holders, pods_error = read_holders(config, adapter, snapshot, proc_root)
    except NvmlUnavailableError as exc:
        print(f"{prog}: {exc}\n{NO_GPU_HINT}", file=sys.stderr)
        return 1
    finally:
        adapter.shutdown()
    if as_json:
        print(json.dumps(document(**status_document(snapshot, node, holders, pods_error, config.health)),
                         indent=2))
    elif output == CSV:
        print(status_csv(snapshot, holders, config.health, headers))
    else:
        print(status_table(snapshot, node, holders, pods_error, config.health, wide=output == WIDE,
                           headers=headers))
    return 0


def with_background_samples(adapter: NvmlAdapter, snapshot: NodeSnapshot,
                            nvml_error: type[Exception]) -> NodeSnapshot:
    """The sweep plus what the running exporter samples off the scrape path (PCIe throughput, per-process SM
    utilization), read once here for every GPU that is up. A GPU failing these calls keeps them None."""
    devices = []
    for device in snapshot.devices:
        if device.up:
            try:
                tx, rx = adapter.read_pcie(device.index)
                samples = adapter.process_utilization(device.index)
            except nvml_error as exc:  # lost since the sweep: the sweep's answer stands
                log.debug("GPU %d: background samples failed: %s", device.index, exc)
            else:
                device = replace(
                    device, pcie_tx_bytes_per_second=tx, pcie_rx_bytes_per_second=rx,
                    process_sm_utilization=None if samples is None else mean_by_pid(samples))
        devices.append(device)
    return replace(snapshot, devices=tuple(devices))


def read_holders(config: ExporterConfig, adapter: NvmlAdapter, snapshot: NodeSnapshot,
                 proc_root: str | Path = DEFAULT_PROC_ROOT) -> tuple[Holders, str | None]:
    """GPU uuid -> holders from one kubelet List; ({}, reason) when the kubelet cannot be read.

    Ids are mapped as the running exporter maps them, GKE's `nvidia<minor>` ones through the driver's minor
    table under `proc_root` (read only when such an id is listed)."""
    client = PodResourcesClient(config.pod_resources.client_settings())
    try:
        holders = build_holder_map(client.list_allocations(), adapter.mig_parent,
                                   config.pod_resources.resource_filter())
        minors: dict[int, str] = {}
        if any(is_minor_id(key) for key in holders):
            minors = read_driver_minors(((d.uuid, d.pci_bus_id) for d in snapshot.devices if d.uuid),
                                        proc_root)
        return dict(by_uuid(holders, adapter.uuid_of, minors.get)), None
    except PodResourcesUnavailableError as exc:
        return {}, str(exc)


def _statuses(snapshot: NodeSnapshot, holders: Holders, thresholds: HealthThresholds) -> list[GpuStatus]:
    return gpu_statuses(snapshot, lambda uuid: holders.get(uuid, ()), None, thresholds)


# Snapshot fields holding a 0..1 ratio under a name that does not say so: --json names them as /metrics does
# (gpu_utilization_ratio -> utilization_ratio); the JSON API beside it says utilization_percent (0..100).
_RATIO_FIELDS = {name: f"{name}_ratio" for name in (
    "utilization", "memory_utilization", "encoder_utilization", "decoder_utilization",
    "process_sm_utilization")}


def status_document(snapshot: NodeSnapshot, node: str, holders: Holders | None = None,
                    pods_error: str | None = None,
                    thresholds: HealthThresholds | None = None) -> dict[str, Any]:
    """Node facts plus every DeviceSnapshot field (None = not supported; ratios 0..1 named `..._ratio`) and
    the derived state, speed multiplier, availability score and holders of each GPU."""
    holders = holders or {}
    statuses = {s.index: gpu_json(s) for s in _statuses(snapshot, holders, thresholds or HealthThresholds())}
    gpus = []
    for device in snapshot.devices:
        item = {_RATIO_FIELDS.get(key, key): value for key, value in asdict(device).items()}
        reasons = device.clocks_event_reasons
        item["clocks_event_reasons"] = None if reasons is None else [r for r, active in reasons if active]
        derived = statuses[device.index]
        item.update(state=derived["state"], state_causes=derived["state_causes"],
                    missing_fields=derived["missing_fields"],
                    state_reason=derived["state_reason"], speed_multiplier=derived["speed_multiplier"],
                    availability_score=derived["availability_score"], holders=derived["holders"],
                    shared=derived["shared"])
        gpus.append(item)
    return {"node": node, "nvml_up": snapshot.nvml_up, "driver_version": snapshot.driver_version,
            "cuda_version": snapshot.cuda_version, "collected_at": snapshot.collected_at,
            "pod_resources_up": pods_error is None, "pod_resources_error": pods_error, "gpus": gpus}


def _fmt(value: float | None, pattern: str, scale: float = 1.0) -> str:
    return "-" if value is None else pattern.format(value * scale)


def _state(status: GpuStatus) -> str:
    """The state with the band that set it, `throttled (temperature band 75-85C: 78C)`: the NVML CLOCK
    THROTTLE column beside it is the clocks NVML slowed, a different thing."""
    if status.state is None:
        return "-"
    return f"{status.state.value} ({status.state_reason})" if status.state_reason else status.state.value


def _pods(status: GpuStatus) -> str:
    names = sorted({f"{h.namespace}/{h.pod}" for h in status.holders})
    return ",".join(names) or "-"


CSV_FIELDS = ("gpu", "name", "uuid", "pci_bus_id", "up", "state", "state_reason", "utilization_ratio",
              "memory_used_bytes", "memory_total_bytes", "temperature_celsius", "power_watts",
              "power_limit_watts", "sm_clock_hertz", "performance_state", "clock_throttle_reasons",
              "processes", "availability_score", "pods")
"""The columns of `status -o csv`: raw numbers in base units, as /metrics (docs/exporter.md)."""


def status_csv(snapshot: NodeSnapshot, holders: Holders | None = None,
               thresholds: HealthThresholds | None = None, headers: bool = True) -> str:
    """One line per GPU (`CSV_FIELDS`); an unsupported or unknown value is an empty cell."""
    statuses = {s.index: s for s in _statuses(snapshot, holders or {}, thresholds or HealthThresholds())}
    records = []
    for d in snapshot.devices:
        status = statuses[d.index]
        records.append({
            "gpu": d.index, "name": d.name, "uuid": d.uuid, "pci_bus_id": d.pci_bus_id, "up": d.up,
            "state": None if status.state is None else status.state.value,
            "state_reason": status.state_reason,
            "utilization_ratio": d.utilization, "memory_used_bytes": d.memory_used_bytes,
            "memory_total_bytes": d.memory_total_bytes, "temperature_celsius": d.temperature_celsius,
            "power_watts": d.power_watts, "power_limit_watts": d.power_limit_watts,
            "sm_clock_hertz": d.sm_clock_hertz, "performance_state": d.performance_state,
            "clock_throttle_reasons": None if d.clocks_event_reasons is None
            else " ".join(throttle_reasons(d.clocks_event_reasons)) or "none",
            "processes": None if d.processes is None else len({p.pid for p in d.processes}),
            "availability_score": status.availability_score,
            "pods": sorted({f"{h.namespace}/{h.pod}" for h in status.holders}),
        })
    return as_csv(records, CSV_FIELDS, headers)


def status_table(snapshot: NodeSnapshot, node: str, holders: Holders | None = None,
                 pods_error: str | None = None, thresholds: HealthThresholds | None = None,
                 wide: bool = False, headers: bool = True) -> str:
    """The title line and one row per GPU; `wide`: the whole UUID and the PCI bus id too."""
    header: tuple[str, ...] = (
        "GPU", "NAME", "UUID", *(("PCI BUS",) if wide else ()), "UP", "STATE", "UTIL", "MEM USED/TOTAL",
        "TEMP", "POWER/LIMIT", "SM CLOCK", "P", "NVML CLOCK THROTTLE", "PROCS", "SCORE", "PODS")
    statuses = {s.index: s for s in _statuses(snapshot, holders or {}, thresholds or HealthThresholds())}
    rows = []
    gib = 1024**3
    for d in snapshot.devices:
        status = statuses[d.index]
        active = throttle_reasons(d.clocks_event_reasons)
        uuid = (d.uuid or "?") if wide or len(d.uuid) <= 13 else d.uuid[:12] + "…"
        rows.append((
            str(d.index), d.name or "?", uuid, *((d.pci_bus_id or "-",) if wide else ()),
            "yes" if d.up else f"NO ({d.error})",
            _state(status),
            _fmt(d.utilization, "{:.0f}%", 100),
            f"{_fmt(d.memory_used_bytes, '{:.1f}', 1 / gib)}/"
            f"{_fmt(d.memory_total_bytes, '{:.1f}', 1 / gib)} GiB",
            _fmt(d.temperature_celsius, "{:.0f}C"),
            f"{_fmt(d.power_watts, '{:.0f}')}/{_fmt(d.power_limit_watts, '{:.0f}')} W",
            _fmt(d.sm_clock_hertz, "{:.0f} MHz", 1e-6),
            _fmt(d.performance_state, "P{:.0f}"),
            ",".join(active) or ("-" if d.clocks_event_reasons is None else "none"),
            "-" if d.processes is None else str(len({p.pid for p in d.processes})),  # a PID once per GPU
            _fmt(status.availability_score, "{:.2f}"),
            _pods(status),
        ))
    pods = "pod-resources ok" if pods_error is None else f"pod-resources unavailable ({pods_error})"
    title = visible(f"node {node}  driver {snapshot.driver_version}  CUDA {snapshot.cuda_version or '?'}  "
                    f"{len(snapshot.devices)} GPU(s)  {pods}")
    # GPU names and pod names with control characters escaped
    return (title + "\n" if headers else "") + aligned(header, rows, headers)
