"""Rendering GPUs for people (aligned columns) and for programs (JSON, CSV), shared by status, select and
wait: every `-o` format of fleet/output.py over one list of GPUs.

SCORE is the ranking score (`Gpu.rank`: 0 for a down, critical or stale GPU, halved for a throttled one);
wide, JSON and CSV add the exporter's `gpu_availability_score` beside it as AVAIL / `availability_score`.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence

from fleet.output import CSV, JSON, WIDE, aligned, as_csv, whole
from fleet.placing.inventory import Gpu
from fleet.units import GIB
from plumbing.numbers import ascii_int
from plumbing.output import document

HEADER = ("NODE", "GPU", "MODEL", "UTIL", "MEMORY USED/TOTAL", "TEMP", "POWER", "HEALTH", "SCORE", "HOLDERS")
WIDE_HEADER = ("NODE", "GPU", "UUID", "MODEL", "UTIL", "MEMORY USED/TOTAL", "FREE", "TEMP", "POWER", "HEALTH",
               "SCORE", "AVAIL", "LAST SEEN", "HOLDERS")
RED = "\033[1;31m"
RESET = "\033[0m"


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{value * 100:.0f}%"


def _gib(value: float | None) -> str:
    return "-" if value is None else f"{value / GIB:.1f}"


def _memory(gpu: Gpu) -> str:
    used, total = gpu.memory_used, gpu.memory_total
    if used is None and total is None:
        return "-"
    return f"{_gib(used)}/{_gib(total)} GiB"


def _ago(seconds: float) -> str:
    seconds = max(seconds, 0.0)
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds / size:.0f}{unit}"
    return f"{seconds:.0f}s"


def health_text(gpu: Gpu, now: float) -> str:
    if gpu.stale:
        why = "exporter down" if gpu.target_down else "not reported"
        seen = "" if gpu.last_seen is None else f", last seen {_ago(now - gpu.last_seen)} ago"
        return f"stale ({why}{seen})"
    health = gpu.health or ("down" if gpu.up is False else "-")
    return f"{gpu.health} (down)" if gpu.up is False and gpu.health else health


def _score(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def row(gpu: Gpu, now: float | None = None, wide: bool = False) -> tuple[str, ...]:
    now = time.time() if now is None else now
    holders = ",".join(str(h) for h in gpu.holders) or "-"
    temperature = "-" if gpu.temperature is None else f"{gpu.temperature:.0f}C"
    power = "-" if gpu.power is None else f"{gpu.power:.0f}W"
    if not wide:
        return (gpu.node, gpu.index, gpu.model or "-", _pct(gpu.utilization), _memory(gpu), temperature,
                power, health_text(gpu, now), _score(gpu.rank), holders)
    seen = "-" if gpu.last_seen is None else time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(gpu.last_seen))
    return (gpu.node, gpu.index, gpu.uuid, gpu.model or "-", _pct(gpu.utilization), _memory(gpu),
            _gib(gpu.free_memory), temperature, power, health_text(gpu, now), _score(gpu.rank),
            _score(gpu.availability), seen, holders)


def highlighted(gpu: Gpu) -> bool:
    """Rows a terminal shows in red: critical, down or stale GPUs."""
    return gpu.stale or gpu.up is False or gpu.health == "critical"


def render(gpus: Sequence[Gpu], *, wide: bool = False, headers: bool = True, color: bool = False,
           now: float | None = None) -> str:
    """An aligned table, one line per GPU; with `color`, the rows of `highlighted` GPUs in red."""
    text = aligned(WIDE_HEADER if wide else HEADER, [row(g, now, wide) for g in gpus], headers)
    if not color:
        return text
    lines = text.split("\n")
    skip = 1 if headers else 0
    return "\n".join(f"{RED}{line}{RESET}" if n >= skip and highlighted(gpus[n - skip]) else line
                     for n, line in enumerate(lines))


def as_json(gpu: Gpu) -> dict[str, object]:
    """The GPU as a JSON object: base units (integer bytes, ratios, celsius, watts), null where unknown."""
    return {
        "node": gpu.node, "index": ascii_int(gpu.index), "uuid": gpu.uuid, "model": gpu.model, "up": gpu.up,
        "stale": gpu.stale, "last_seen": gpu.last_seen, "target_down": gpu.target_down,
        "utilization_ratio": gpu.utilization, "memory_used_bytes": whole(gpu.memory_used),
        "memory_free_bytes": whole(gpu.free_memory), "memory_total_bytes": whole(gpu.memory_total),
        "temperature_celsius": gpu.temperature, "power_watts": gpu.power, "health": gpu.health,
        "score": gpu.rank, "availability_score": gpu.availability,
        "holders": [{"namespace": h.namespace, "pod": h.pod, "container": h.container,
                     "resource": h.resource} for h in gpu.holders],
    }


CSV_FIELDS = ("node", "index", "uuid", "model", "up", "stale", "last_seen", "utilization_ratio",
              "memory_used_bytes", "memory_free_bytes", "memory_total_bytes", "temperature_celsius",
              "power_watts", "health", "score", "availability_score", "holders")


def _csv_record(gpu: Gpu) -> dict[str, object]:
    record = as_json(gpu)
    record["holders"] = [str(h) for h in gpu.holders]
    return record


def formatted(gpus: Sequence[Gpu], output: str, *, headers: bool = True, color: bool = False,
              now: float | None = None) -> str:
    """The GPUs in `-o output`: table, wide, json (`{"schemaVersion": 1, "gpus": [...]}`) or csv."""
    if output == JSON:
        return json.dumps(document(gpus=[as_json(g) for g in gpus]), indent=2, allow_nan=False)
    if output == CSV:
        return as_csv([_csv_record(g) for g in gpus], CSV_FIELDS, headers)
    return render(gpus, wide=output == WIDE, headers=headers, color=color, now=now)
