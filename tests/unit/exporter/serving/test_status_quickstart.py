"""`GET /api/gpu/status?gpu_id=N`: the GPU manager's shape (success/data, MB, percent), a `state` that
`throttling` never contradicts, and NVML's clock throttle reasons apart from both, in either shape."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from exporter.health.history import GpuHistory
from exporter.nvml.snapshots import DeviceSnapshot
from exporter.serving.status_api import build_gpu_status, gpu_json, handle, is_api_path, quickstart_json
from tests.unit.exporter.serving.test_status_api import GIB, gpus


def call(query: str, method: str = "GET") -> tuple[int, dict[str, object]]:
    return handle("/api/gpu/status", query, gpus, GpuHistory(), method=method)


def test_the_quickstart_shape() -> None:
    status, body = call("gpu_id=1")
    assert status == 200 and is_api_path("/api/gpu/status")
    assert body == {"success": True, "data": {
        "available": True, "gpu_id": 1, "name": "NVIDIA H100 80GB HBM3", "state": "throttled",
        "state_reason": "temperature band 75-85C: 78C", "temperature_celsius": 78.0, "load_percent": 90.0,
        "memory": {"used_mb": 40 * 1024, "total_mb": 80 * 1024, "percent": 50.0},
        "throttling": {"is_throttled": True, "should_throttle": True, "speed_multiplier": 0.5},
        "nvml_clock_throttle_reasons": ["sw_power_cap"]}}
    assert call("")[1]["data"]["gpu_id"] == 0  # type: ignore[index]


@pytest.mark.parametrize(("query", "status", "parameter"), [
    ("gpu_id=7", 404, "gpu_id"),
    ("gpu_id=01", 400, "gpu_id"),
    ("gpu_id=x", 400, "gpu_id"),
    ("gpu_id=0&gpu_id=1", 400, "gpu_id"),
    ("duration=5", 400, "duration"),
], ids=["unknown", "leading-zero", "not-a-number", "twice", "unknown-parameter"])
def test_bad_requests_are_a_failed_answer_naming_the_parameter(query: str, status: int,
                                                               parameter: str) -> None:
    answer_status, body = call(query)
    assert answer_status == status and body["success"] is False and body["parameter"] == parameter
    assert isinstance(body["error"], str) and body["error"]


def test_nvml_down_and_other_methods() -> None:
    def down() -> list[object]:
        raise RuntimeError("NVML init failed")

    status, body = handle("/api/gpu/status", "", down, GpuHistory())  # type: ignore[arg-type]
    assert status == 503 and body == {"success": False, "error": "GPU status unavailable: NVML init failed"}
    assert call("", method="POST")[0] == 405


@settings(max_examples=60, deadline=None)
@given(temperature=st.floats(20, 100), used=st.integers(0, 80),
       reasons=st.sampled_from([(), ("hw_slowdown",)]), up=st.booleans())
def test_state_and_throttling_never_contradict(temperature: float, used: int, reasons: tuple[str, ...],
                                               up: bool) -> None:
    gpu = build_gpu_status(DeviceSnapshot(index=0, uuid="GPU-a", name="H100", up=up, pci_bus_id="",
                                          temperature_celsius=temperature, utilization=0.5,
                                          memory_used_bytes=used * GIB, memory_free_bytes=(80 - used) * GIB,
                                          memory_total_bytes=80 * GIB, power_watts=100.0,
                                          clocks_event_reasons=tuple((r, True) for r in reasons)))
    v1, data = gpu_json(gpu), quickstart_json(gpu)
    slowed = v1["state"] in ("throttled", "critical")
    manager = data["throttling"]
    assert manager["is_throttled"] is slowed and manager["should_throttle"] is slowed
    assert (v1["speed_multiplier"] <= 0.5) is slowed
    # NVML's reasons follow the clocks, never the state: the state's reason never names them
    assert v1["nvml_clock_throttle_reasons"] == data["nvml_clock_throttle_reasons"] == list(reasons)
    assert "throttl" not in v1["state_reason"] and v1["state_reason"] == data["state_reason"]
