"""Rendering GPUs for people (aligned columns) and for programs (JSON), shared by status, select and wait."""

from __future__ import annotations

from collections.abc import Sequence

from fleet.inventory import Gpu
from fleet.units import GIB

HEADER = ("NODE", "GPU", "MODEL", "UTIL", "MEMORY USED/TOTAL", "TEMP", "POWER", "HEALTH", "SCORE", "HOLDERS")


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{value * 100:.0f}%"


def _memory(gpu: Gpu) -> str:
    used, total = gpu.memory_used, gpu.memory_total
    if used is None and total is None:
        return "-"
    shown = ["-" if v is None else f"{v / GIB:.1f}" for v in (used, total)]
    return f"{shown[0]}/{shown[1]} GiB"


def row(gpu: Gpu) -> tuple[str, ...]:
    health = gpu.health or ("down" if gpu.up is False else "-")
    if gpu.up is False and gpu.health:
        health = f"{gpu.health} (down)"
    score = gpu.availability
    return (gpu.node, gpu.index, gpu.model or "-", _pct(gpu.utilization), _memory(gpu),
            "-" if gpu.temperature is None else f"{gpu.temperature:.0f}C",
            "-" if gpu.power is None else f"{gpu.power:.0f}W", health,
            "-" if score is None else f"{score:.2f}",
            ",".join(str(h) for h in gpu.holders) or "-")


def render(gpus: Sequence[Gpu]) -> str:
    """An aligned table, one line per GPU (the last column unpadded)."""
    rows = [HEADER, *(row(g) for g in gpus)]
    widths = [max(len(r[i]) for r in rows) for i in range(len(HEADER) - 1)]
    return "\n".join(("  ".join(c.ljust(w) for c, w in zip(r[:-1], widths, strict=True)) + "  " + r[-1])
                     .rstrip() for r in rows)


def as_json(gpu: Gpu) -> dict[str, object]:
    """The GPU as a JSON object: base units (bytes, ratios, celsius, watts), null where unknown."""
    return {
        "node": gpu.node, "index": gpu.index, "uuid": gpu.uuid, "model": gpu.model, "up": gpu.up,
        "utilization_ratio": gpu.utilization, "memory_used_bytes": gpu.memory_used,
        "memory_free_bytes": gpu.free_memory, "memory_total_bytes": gpu.memory_total,
        "temperature_celsius": gpu.temperature, "power_watts": gpu.power, "health": gpu.health,
        "availability_score": gpu.availability,
        "holders": [{"namespace": h.namespace, "pod": h.pod, "container": h.container,
                     "resource": h.resource} for h in gpu.holders],
    }
