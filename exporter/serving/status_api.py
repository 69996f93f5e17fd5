"""The JSON status API served next to /metrics, as one pure request function over plain data.

    GET /api/v1/gpus                          -> {"gpus": [<gpu>, ...]}
    GET /api/v1/gpus/<index>                  -> <gpu>                       (404 for an unknown index)
    GET /api/v1/gpus/<index>/trend?minutes=5  -> <trend>                     (400 naming a bad parameter)
    GET /api/gpu/status?gpu_id=0              -> {"success": true, "data": {...}}  (the GPU manager's shape)

`handle(path, query, snapshot_provider, history)` returns `(status, body)`; the HTTP server only encodes
the body (`encode()`) and writes it. Errors are `{"error": "<message>", "parameter": "<name>"?}`:
an index that is not a plain decimal number (`abc`, `01`, `+1`) is 400 naming `index`; a query parameter
the endpoint does not take is 400 naming it; NVML down is 503 with the reason; a method other than
`ALLOWED_METHODS` on one of these resources is 405, before any GPU is read (the server adds the `Allow`
header from the same tuple). The server's own refusals under /api/ (a request line too long, 401, 429) are
rendered by `refusal` in the same shape, so every 4xx here is JSON. Numbers are rounded for people (percent
and °C to 0.1, watts to 0.001, the score to 0.0001); /metrics keeps full precision. Units are in the names:
`utilization_percent` and `memory.percent` are 0..100 here, where /metrics and `status --json` carry 0..1 as
`..._ratio`.

The GPU manager's state names stay (`throttled` is a temperature or memory *band*); `state_reason` says
which band set it ("temperature band 75-85C: 78C"), and the clocks NVML slowed are a separate field named
as NVML names them, `nvml_clock_throttle_reasons`, whatever the state. The quickstart shape's
`throttling.is_throttled` stays the state's verdict (`throttled` or `critical`), as the GPU manager means it.
"""

from __future__ import annotations

import json
import logging
import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs

from exporter.health.history import GpuHistory, SeriesTrend, Trend, TrendThresholds, TrendWord
from exporter.health.state import HealthState, HealthThresholds, StateCause, snapshot_health
from exporter.nvml.snapshots import DeviceSnapshot, throttle_reasons
from exporter.pods.attribution import pod_ref
from exporter.pods.podresources.mapping import DeviceHolder
from exporter.scrape.holders import exclusive_holder

log = logging.getLogger(__name__)

API_PREFIX = "/api/"
"""Every path under it is answered by `handle` (404 for what it does not know)."""
QUICKSTART_PATH = "/api/gpu/status"
"""The GPU manager's status endpoint our users' tools call: `?gpu_id=N`, a success/data wrapper, MB."""
MIB = 1024 * 1024
ALLOWED_METHODS: tuple[str, ...] = ("GET", "HEAD")
DEFAULT_TREND_MINUTES = 5.0
DEFAULT_MAX_TREND_MINUTES = 60.0
_INDEX = re.compile(r"0|[1-9][0-9]{0,5}")  # fullmatch: ASCII digits, no sign, no leading zero, no line end
_NUMBER = re.compile(r"(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][-+]?[0-9]+)?")  # fullmatch: no sign, space


@dataclass(frozen=True)
class MemoryStatus:
    used_bytes: int | None
    total_bytes: int | None
    percent: float | None  # used / total, 0..100


@dataclass(frozen=True)
class ThrottlingStatus:
    reasons: tuple[str, ...]  # NVML's active clock throttle (clocks-event) reasons, as their metric labels
    speed_multiplier: float | None  # from the health state; None when the state is unknown


@dataclass(frozen=True)
class GpuStatus:
    index: int
    uuid: str
    name: str
    up: bool
    state: HealthState | None
    temperature_celsius: float | None
    utilization_percent: float | None  # 0..100
    memory: MemoryStatus
    power_watts: float | None
    throttling: ThrottlingStatus
    holders: tuple[DeviceHolder, ...]
    availability_score: float | None  # 0..1
    xid_errors: Mapping[int, int] = field(default_factory=dict)  # XID code -> count since start
    state_causes: tuple[StateCause, ...] = ()  # what set `state`; heat's `throttled` is not clock throttling
    state_reason: str = ""  # the causes with their band, "temperature band 75-85C: 78C"
    missing_fields: tuple[str, ...] = ()  # fields an NVML error left out of this sweep (the GPU is up)


def build_gpu_status(device: DeviceSnapshot, *, holders: Sequence[DeviceHolder] = (),
                     xid_errors: Mapping[int, int] | None = None,
                     thresholds: HealthThresholds | None = None) -> GpuStatus:
    """Derive state, speed multiplier, memory percent and availability score from one GPU of a sweep.

    A GPU that is down is `critical` with speed multiplier 0 and availability score 0 (as on /metrics).
    """
    health = snapshot_health(device, thresholds)
    return GpuStatus(
        index=device.index,
        uuid=device.uuid,
        name=device.name,
        up=device.up,
        state=health.state,
        temperature_celsius=device.temperature_celsius,
        utilization_percent=None if device.utilization is None else 100.0 * device.utilization,
        memory=MemoryStatus(device.memory_used_bytes, device.memory_total_bytes, health.memory_used_percent),
        power_watts=device.power_watts,
        throttling=ThrottlingStatus(tuple(throttle_reasons(device.clocks_event_reasons)),
                                    health.speed_multiplier),
        holders=tuple(holders),
        availability_score=health.availability_score,
        xid_errors=dict(xid_errors or {}),
        state_causes=health.causes,
        state_reason=health.reason,
        missing_fields=tuple(device.missing_fields),
    )


def is_api_path(path: str) -> bool:
    """True for the paths `handle` answers (the server routes everything else elsewhere)."""
    return path.split("?", 1)[0].startswith(API_PREFIX)


def handle(
    path: str,
    query: str,
    snapshot_provider: Callable[[], Sequence[GpuStatus]],
    history: GpuHistory,
    *,
    method: str = "GET",
    trend_thresholds: TrendThresholds | None = None,
    max_trend_minutes: float = DEFAULT_MAX_TREND_MINUTES,
    now: float | None = None,
) -> tuple[int, dict[str, Any]]:
    """Answer one request: `path` without the query string, `query` the raw query string ("" if none).

    `now` is the trend window's end, in the clock of the history's timestamps (None: the newest sample).
    """
    if path.rstrip("/") == QUICKSTART_PATH:
        return quickstart(query, snapshot_provider, method)
    parts = [p for p in path.split("/") if p]
    if parts[:3] != ["api", "v1", "gpus"] or len(parts) > 5 or (len(parts) == 5 and parts[4] != "trend"):
        return _error(404, f"no such resource: {path}")
    if method not in ALLOWED_METHODS:
        return _error(405, f"method {method} not allowed; use {' or '.join(ALLOWED_METHODS)}")
    try:
        gpus = list(snapshot_provider())
    except Exception as e:  # the request handler must answer, not die
        log.warning("GPU status unavailable: %s: %s", type(e).__name__, e)
        return _error(503, f"GPU status unavailable: {e}")
    params = parse_qs(query, keep_blank_values=True)
    allowed = ("minutes",) if len(parts) == 5 else ()
    unknown = sorted(set(params) - set(allowed))
    if unknown:
        takes = f"; it takes: {', '.join(allowed)}" if allowed else "; it takes none"
        name = unknown[0][:40] or "(a parameter with no name)"
        return _error(400, f"{name}: unknown query parameter{takes}", parameter=unknown[0][:40])
    if len(parts) == 3:
        return 200, {"gpus": [gpu_json(gpu) for gpu in sorted(gpus, key=lambda g: g.index)]}

    if not _INDEX.fullmatch(parts[3]):
        return _error(400, f"index: expected a GPU index such as 0 or 3 (got {parts[3]!r})",
                      parameter="index")
    gpu = next((g for g in gpus if g.index == int(parts[3])), None)
    if gpu is None:
        return _error(404, f"no GPU with index {parts[3]!r}", parameter="index")
    if len(parts) == 4:
        return 200, gpu_json(gpu)

    minutes, problem = _minutes(params.get("minutes"), max_trend_minutes)
    if problem is not None:
        return _error(400, problem, parameter="minutes")
    trend = history.trend(gpu.uuid, minutes, now=now, thresholds=trend_thresholds)
    return 200, trend_json(gpu, minutes, trend, now)


def encode(body: Mapping[str, Any]) -> bytes:
    """UTF-8 JSON; non-finite floats (never valid JSON) become null."""
    return json.dumps(_finite(body), allow_nan=False, separators=(",", ":")).encode("utf-8")


def gpu_json(gpu: GpuStatus) -> dict[str, Any]:
    return {
        "index": gpu.index,
        "uuid": gpu.uuid,
        "name": gpu.name,
        "up": gpu.up,
        "state": gpu.state.value if gpu.state else None,
        "state_causes": [cause.value for cause in gpu.state_causes],
        "state_reason": gpu.state_reason,
        "speed_multiplier": gpu.throttling.speed_multiplier,
        "missing_fields": list(gpu.missing_fields),
        "temperature_celsius": _round(gpu.temperature_celsius, 1),
        "utilization_percent": _round(gpu.utilization_percent, 1),
        "memory": {
            "used_bytes": gpu.memory.used_bytes,
            "total_bytes": gpu.memory.total_bytes,
            "percent": _round(gpu.memory.percent, 1),
        },
        "power_watts": _round(gpu.power_watts, 3),
        "nvml_clock_throttle_reasons": list(gpu.throttling.reasons),
        "holders": [
            {
                "namespace": h.namespace,
                "pod": h.pod,
                "container": h.container,
                "resource": h.resource,
                "device_id": h.device_id,
                "claim": h.claim,  # the DRA ResourceClaim (as gpu_allocation_info's); "" from a device plugin
            }
            for h in gpu.holders
        ],
        "shared": is_shared(gpu.holders),
        "availability_score": _round(gpu.availability_score, 4),
        "xid_errors": {str(code): count for code, count in sorted(gpu.xid_errors.items())},
    }


def is_throttled(gpu: GpuStatus) -> bool:
    """The state's verdict: `throttled` or `critical` (half speed or paused), as `speed_multiplier` says."""
    return gpu.state in (HealthState.THROTTLED, HealthState.CRITICAL)


def quickstart(query: str, snapshot_provider: Callable[[], Sequence[GpuStatus]],
               method: str = "GET") -> tuple[int, dict[str, Any]]:
    """`GET /api/gpu/status?gpu_id=N` (default 0): one GPU in the GPU manager's shape; failures are
    `{"success": false, "error": ...}` with the same status codes as /api/v1."""
    if method not in ALLOWED_METHODS:
        return _failed(405, f"method {method} not allowed; use {' or '.join(ALLOWED_METHODS)}")
    params = parse_qs(query, keep_blank_values=True)
    unknown = sorted(set(params) - {"gpu_id"})
    if unknown:
        return _failed(400, f"{unknown[0][:40] or '(a parameter with no name)'}: unknown query parameter; it "
                       "takes: gpu_id", parameter=unknown[0][:40])
    given = params.get("gpu_id", ["0"])
    if len(given) > 1 or not _INDEX.fullmatch(given[0]):
        return _failed(400, f"gpu_id: expected a GPU index such as 0 or 3 (got {given[-1][:40]!r})",
                       parameter="gpu_id")
    try:
        gpus = list(snapshot_provider())
    except Exception as e:  # the request handler must answer, not die
        log.warning("GPU status unavailable: %s: %s", type(e).__name__, e)
        return _failed(503, f"GPU status unavailable: {e}")
    gpu = next((g for g in gpus if g.index == int(given[0])), None)
    if gpu is None:
        return _failed(404, f"no GPU with index {given[0]!r}", parameter="gpu_id")
    return 200, {"success": True, "data": quickstart_json(gpu)}


def quickstart_json(gpu: GpuStatus) -> dict[str, Any]:
    """One GPU as the GPU manager's `get_gpu_status()` gives it: MB (MiB, as nvidia-smi's "MB"), percent."""
    used, total = gpu.memory.used_bytes, gpu.memory.total_bytes
    throttled = is_throttled(gpu)
    return {
        "available": gpu.up,
        "gpu_id": gpu.index,
        "name": gpu.name,
        "state": gpu.state.value if gpu.state else None,
        "state_reason": gpu.state_reason,
        "temperature_celsius": _round(gpu.temperature_celsius, 1),
        "load_percent": _round(gpu.utilization_percent, 1),
        "memory": {
            "used_mb": None if used is None else used // MIB,
            "total_mb": None if total is None else total // MIB,
            "percent": _round(gpu.memory.percent, 1),
        },
        "throttling": {
            "is_throttled": throttled,
            "should_throttle": throttled,
            "speed_multiplier": gpu.throttling.speed_multiplier,
        },
        "nvml_clock_throttle_reasons": list(gpu.throttling.reasons),
    }


def refusal(path: str, status: int, message: str, parameter: str | None = None) -> tuple[int, dict[str, Any]]:
    """The server's own refusal of a request to `path` (a malformed request, 401, 429) as this API's other
    errors: `{"error": ..., "parameter"?: ...}`, with `"success": false` on the GPU manager's endpoint."""
    if path.rstrip("/") == QUICKSTART_PATH:
        return _failed(status, message, parameter)
    return _error(status, message, parameter)


def _failed(status: int, message: str, parameter: str | None = None) -> tuple[int, dict[str, Any]]:
    _, body = _error(status, message, parameter)
    return status, {"success": False, **body}


def is_shared(holders: Sequence[DeviceHolder]) -> bool:
    """As gpu_allocation_info's `shared` label: held, but the device values are not one holder's alone
    (several containers, or MIG slices, even a single one)."""
    return bool(holders) and exclusive_holder([pod_ref(h) for h in holders]) is None


def trend_json(gpu: GpuStatus, minutes: float, trend: Trend | None, now: float | None) -> dict[str, Any]:
    """`trend` None (never sampled) renders as an empty window."""
    empty = SeriesTrend(0, None, None, None, None, None, TrendWord.UNKNOWN)
    return {
        "index": gpu.index,
        "uuid": gpu.uuid,
        "minutes": minutes,
        "window": {
            "start": trend.window_start if trend else None,
            "end": trend.window_end if trend else now,
        },
        "samples": trend.samples if trend else 0,
        "trend": (trend.trend if trend else TrendWord.UNKNOWN).value,
        "temperature_celsius": _series(trend.temperature_celsius if trend else empty),
        "utilization_percent": _series(trend.utilization_percent if trend else empty),
        "memory_used_percent": _series(trend.memory_used_percent if trend else empty),
    }


def _series(series: SeriesTrend) -> dict[str, Any]:
    return {
        "current": _round(series.current, 1),
        "avg": _round(series.average, 1),
        "min": _round(series.minimum, 1),
        "max": _round(series.maximum, 1),
        "slope_per_minute": _round(series.slope_per_minute, 3),
        "trend": series.trend.value,
    }


def _round(value: float | None, digits: int) -> float | None:
    """Rounded for people reading the JSON; None and non-finite values pass through (encode() nulls them)."""
    if value is None or not math.isfinite(value):
        return value
    return round(value, digits)


def _minutes(values: list[str] | None, maximum: float) -> tuple[float, str | None]:
    if values is None:
        return min(DEFAULT_TREND_MINUTES, maximum), None
    if len(values) > 1:
        return 0.0, "minutes: given more than once"
    if not _NUMBER.fullmatch(values[0]) or (minutes := float(values[0])) <= 0:
        return 0.0, f"minutes: expected a positive number of minutes (got {values[0][:40]!r})"
    if minutes > maximum:  # 400 digits overflow to inf: too many minutes too
        return 0.0, f"minutes: at most {maximum:g} (the history kept) (got {values[0][:40]!r})"
    return minutes, None


def _error(status: int, message: str, parameter: str | None = None) -> tuple[int, dict[str, Any]]:
    body: dict[str, Any] = {"error": message}
    if parameter is not None:
        body["parameter"] = parameter
    return status, body


def _finite(value: Any) -> Any:
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_finite(v) for v in value]
    return value
