"""StatusService: one history sample per sweep and GPU that answered; API answers built from the sweep."""

from __future__ import annotations

import dataclasses

import pytest

from exporter.health.history import GpuHistory, HistorySettings
from exporter.nvml.snapshots import DeviceSnapshot, NodeSnapshot
from exporter.pods.podresources import DeviceHolder
from exporter.serving.status_service import StatusService
from exporter.status_cli import status_table

GIB = 1024**3


def sweep(at: float, temperature: float) -> NodeSnapshot:
    up = DeviceSnapshot(index=0, uuid="GPU-0", name="H100", pci_bus_id="", up=True, utilization=0.5,
                        temperature_celsius=temperature, memory_used_bytes=20 * GIB,
                        memory_free_bytes=60 * GIB, memory_total_bytes=80 * GIB)
    down = DeviceSnapshot(index=1, uuid="GPU-1", name="H100", pci_bus_id="", up=False, error="lost")
    return NodeSnapshot(nvml_up=True, driver_version="1", cuda_version="1", devices=(up, down),
                        collected_at=at, duration_seconds=0.0, last_success=at)


class Source:
    def __init__(self) -> None:
        self.current = sweep(0.0, 50.0)

    def snapshot(self) -> NodeSnapshot:
        return self.current


def test_history_gets_one_sample_per_sweep_and_the_trend_reads_it() -> None:
    source = Source()
    holder = DeviceHolder("ml", "a", "c", "nvidia.com/gpu", "GPU-0")
    service = StatusService(source, GpuHistory(HistorySettings(max_samples=10, retention_seconds=600)),
                            holders_of=lambda uuid: (holder,) if uuid == "GPU-0" else (),
                            xid_counts=lambda uuid: {79: 2} if uuid == "GPU-1" else {}, clock=lambda: 240.0)
    for minute in range(5):
        source.current = service.record(sweep(60.0 * minute, 50.0 + 2 * minute))
    assert len(service.history.samples("GPU-0")) == 5 and service.history.samples("GPU-1") == ()

    status, body = service.handle("/api/v1/gpus", "")
    assert status == 200
    first, second = body["gpus"]
    assert first["holders"][0]["pod"] == "a" and first["state"] == "optimal"
    assert first["availability_score"] == round(0.6 * 0.75 + 0.4 * 0.5, 4)
    assert second["up"] is False and second["state"] == "critical" and second["xid_errors"] == {"79": 2}

    status, trend = service.handle("/api/v1/gpus/0/trend", "minutes=8")  # 4 minutes of samples: half
    assert status == 200 and trend["samples"] == 5 and trend["trend"] == "rising"
    assert trend["temperature_celsius"]["slope_per_minute"] == 2.0
    status, error = service.handle("/api/v1/gpus/0/trend", "minutes=11")  # longer than the 10 min kept
    assert status == 400 and error["parameter"] == "minutes"


def test_idle_and_operator_clock_reasons_are_not_throttling() -> None:
    reasons = (("gpu_idle", True), ("applications_clocks_setting", True), ("sw_thermal", True),
               ("display_clock_setting", True), ("hw_slowdown", False))
    calm = (("gpu_idle", True), ("applications_clocks_setting", True), ("display_clock_setting", True))
    source = Source()
    base = source.current.devices[0]
    hot = dataclasses.replace(base, clocks_event_reasons=reasons)
    idle = dataclasses.replace(base, index=1, uuid="GPU-1", clocks_event_reasons=calm)
    source.current = dataclasses.replace(source.current, devices=(hot, idle))
    _, body = StatusService(source, GpuHistory()).handle("/api/v1/gpus", "")
    assert [gpu["nvml_clock_throttle_reasons"] for gpu in body["gpus"]] == [["sw_thermal"], []]
    table = status_table(source.current, "node-a")
    assert "sw_thermal" in table and "gpu_idle" not in table and "applications_clocks" not in table


def test_the_table_shows_what_set_the_state_beside_it() -> None:
    """Heat reads `throttled (temperature band 75-85C: 78C)`, apart from the NVML CLOCK THROTTLE column (the
    clocks NVML slowed), which says `none` beside it."""
    base = sweep(0.0, 78.0)
    calm_clocks = dataclasses.replace(base.devices[0], clocks_event_reasons=(("sw_thermal", False),))
    base = dataclasses.replace(base, devices=(calm_clocks, *base.devices[1:]))
    full = dataclasses.replace(base.devices[0], index=2, uuid="GPU-2", temperature_celsius=50.0,
                               memory_used_bytes=70 * GIB, memory_free_bytes=10 * GIB)
    cool = dataclasses.replace(base.devices[0], index=3, uuid="GPU-3", temperature_celsius=40.0)
    lines = status_table(dataclasses.replace(base, devices=(*base.devices, full, cool)), "n").splitlines()
    start, end = lines[1].index("STATE"), lines[1].index("UTIL")
    assert [line[start:end].strip() for line in lines[2:]] == [
        "throttled (temperature band 75-85C: 78C)", "critical (down)", "throttled (memory band 85-95%: 88%)",
        "optimal"]
    clocks = lines[1].index("NVML CLOCK THROTTLE")
    assert lines[2][clocks:].split()[0] == "none"


def test_gpu_list_while_nvml_is_down_is_503_with_the_reason() -> None:
    source = Source()
    source.current = NodeSnapshot(nvml_up=False, driver_version="", cuda_version="", devices=(),
                                  collected_at=1.0, duration_seconds=0.0, last_success=None,
                                  nvml_error="NVML init failed: NVMLError_LibraryNotFound")
    service = StatusService(source, GpuHistory())
    for path in ("/api/v1/gpus", "/api/v1/gpus/0"):
        status, body = service.handle(path, "")
        assert status == 503 and "NVMLError_LibraryNotFound" in body["error"], (path, body)


def test_api_calls_every_second_do_not_shrink_the_hour_of_history() -> None:
    """Every API call and scrape triggers a sweep (here: one per second for 80 minutes, on an injected
    clock); the history still covers the hour the trend endpoint accepts, and a window longer than the
    history kept starts at its oldest sample, not at now - 60 min."""
    source = Source()
    now = [0.0]
    service = StatusService(source, GpuHistory(), clock=lambda: now[0])
    for second in range(600):  # ten minutes first
        now[0] = float(second)
        source.current = service.record(sweep(now[0], 50.0))
    _, short = service.handle("/api/v1/gpus/0/trend", "minutes=60")
    assert short["window"] == {"start": 0.0, "end": 599.0}  # only ten minutes exist
    for second in range(600, 4800):
        now[0] = float(second)
        source.current = service.record(sweep(now[0], 50.0 + second / 600))
        service.handle("/api/v1/gpus/0", "")
    _, trend = service.handle("/api/v1/gpus/0/trend", "minutes=60")
    assert 719 <= trend["samples"] <= 720
    assert 4799 - 3600 <= trend["window"]["start"] <= 4799 - 3590 and trend["window"]["end"] == 4799
    assert trend["temperature_celsius"]["slope_per_minute"] == pytest.approx(0.1)
    assert trend["trend"] == "stable"  # 0.1 °C/min is under the 0.5 °C/min threshold


def test_the_table_shows_a_hostile_gpu_name_and_pod_inert() -> None:
    """A name NVML (or a simulated config) reports with terminal escapes is shown as escapes, one line."""
    base = sweep(0.0, 50.0)
    named = dataclasses.replace(base.devices[0], name="H100\x1b]0;owned\x07\x1b[2J\u009b31m")
    holder = DeviceHolder("ml", "pod\x1b[8m", "c", "nvidia.com/gpu", "GPU-0")
    table = status_table(dataclasses.replace(base, devices=(named,)), "node\x1b[31m", {"GPU-0": (holder,)})
    assert "\x1b" not in table and "\u009b" not in table and len(table.splitlines()) == 3
    assert "H100\\x1b]0;owned\\x07\\x1b[2J\\u009b31m" in table and "ml/pod\\x1b[8m" in table
