"""The status API request function over plain data."""

from __future__ import annotations

import json
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from exporter.health.history import GpuHistory, Sample
from exporter.health.state import HealthState
from exporter.nvml.snapshots import DeviceSnapshot
from exporter.pods.podresources import DeviceHolder
from exporter.serving.status_api import (
    ALLOWED_METHODS,
    GpuStatus,
    build_gpu_status,
    encode,
    gpu_json,
    handle,
    is_api_path,
)

GIB = 1024**3
GPU_RESOURCE = "nvidia.com/gpu"
T0 = 1_700_000_000.0


def gpus() -> list[GpuStatus]:
    return [
        build_gpu_status(
            DeviceSnapshot(index=1, uuid="GPU-b", name="NVIDIA H100 80GB HBM3", pci_bus_id="", up=True,
                           temperature_celsius=78.0, utilization=0.9, memory_used_bytes=40 * GIB,
                           memory_free_bytes=40 * GIB, memory_total_bytes=80 * GIB, power_watts=610.5,
                           clocks_event_reasons=(("sw_power_cap", True),)),
            holders=(
                DeviceHolder("a", "p1", "c", "nvidia.com/gpu", "GPU-b"),
                DeviceHolder("b", "p2", "c", "nvidia.com/gpu", "GPU-b"),
            ),
            xid_errors={79: 1, 13: 2},
        ),
        build_gpu_status(
            DeviceSnapshot(index=0, uuid="GPU-a", name="NVIDIA H100 80GB HBM3", pci_bus_id="", up=True,
                           temperature_celsius=50.0, utilization=0.0, memory_used_bytes=0,
                           memory_free_bytes=80 * GIB, memory_total_bytes=80 * GIB, power_watts=70.0),
        ),
    ]


@pytest.fixture
def history() -> GpuHistory:
    history = GpuHistory()
    for minute in range(11):
        history.record("GPU-a", Sample(T0 + 60 * minute, 50 + minute, 20.0, 10.0))
    return history


def call(path: str, query: str = "", history: GpuHistory | None = None, **kwargs: object):
    return handle(path, query, gpus, history or GpuHistory(), **kwargs)  # type: ignore[arg-type]


def test_build_gpu_status_derives_state_and_score() -> None:
    busy, idle = gpus()
    assert busy.state is HealthState.THROTTLED and busy.throttling.speed_multiplier == 0.5
    assert busy.memory.percent == 50.0
    assert busy.availability_score == pytest.approx(0.6 * 0.5 + 0.4 * 0.1)
    assert idle.state is HealthState.OPTIMAL and idle.availability_score == 1.0


def test_lost_gpu_is_critical_with_zero_speed_and_score() -> None:
    lost = build_gpu_status(DeviceSnapshot(index=3, uuid="GPU-x", name="", up=False, pci_bus_id="",
                                           temperature_celsius=None, utilization=None, memory_used_bytes=None,
                                           memory_free_bytes=None, memory_total_bytes=None, power_watts=None))
    body = gpu_json(lost)
    derived = (body["up"], body["state"], body["availability_score"], body["speed_multiplier"])
    assert derived == (False, "critical", 0.0, 0.0)
    assert (body["state_causes"], body["state_reason"]) == (["down"], "down")


def test_an_optimal_gpu_has_no_cause() -> None:
    busy, idle = gpus()
    assert (gpu_json(idle)["state_causes"], gpu_json(busy)["state_causes"]) == ([], ["temperature_band"])
    reasons = (gpu_json(idle)["state_reason"], gpu_json(busy)["state_reason"])
    assert reasons == ("", "temperature band 75-85C: 78C")


def test_list_sorted_by_index_with_every_field() -> None:
    status, body = call("/api/v1/gpus")
    assert status == 200
    assert [g["index"] for g in body["gpus"]] == [0, 1]
    busy = body["gpus"][1]
    assert busy == {
        "index": 1,
        "uuid": "GPU-b",
        "name": "NVIDIA H100 80GB HBM3",
        "up": True,
        "state": "throttled",
        "state_causes": ["temperature_band"],  # 78 C; memory at 50 % is optimal
        "state_reason": "temperature band 75-85C: 78C",
        "speed_multiplier": 0.5,
        "missing_fields": [],  # every field answered
        "temperature_celsius": 78.0,
        "utilization_percent": 90.0,
        "memory": {"used_bytes": 40 * GIB, "total_bytes": 80 * GIB, "percent": 50.0},
        "power_watts": 610.5,
        "nvml_clock_throttle_reasons": ["sw_power_cap"],
        "holders": [
            {"namespace": ns, "pod": pod, "container": "c", "resource": GPU_RESOURCE, "device_id": "GPU-b",
             "claim": ""}  # a device plugin's GPU: no claim, the key still there
            for ns, pod in (("a", "p1"), ("b", "p2"))
        ],
        "shared": True,
        "availability_score": pytest.approx(0.34),
        "xid_errors": {"13": 2, "79": 1},
    }
    assert call("/api/v1/gpus/")[1] == body


def test_a_dra_holder_carries_its_claim() -> None:
    """A GPU allocated through DRA: the holder names the ResourceClaim, as gpu_allocation_info's label."""
    held = build_gpu_status(
        DeviceSnapshot(index=2, uuid="GPU-c", name="", pci_bus_id="", up=True, temperature_celsius=40.0,
                       utilization=0.1, memory_used_bytes=0, memory_free_bytes=GIB, memory_total_bytes=GIB,
                       power_watts=50.0),
        holders=(DeviceHolder("serve", "llm-a", "server", "gpu.nvidia.com", "gpu-1", claim="llm-gpu"),
                 DeviceHolder("serve", "llm-b", "server", "gpu.nvidia.com", "gpu-1", claim="other/shared")))
    holders = gpu_json(held)["holders"]
    assert [(h["pod"], h["resource"], h["device_id"], h["claim"]) for h in holders] == [
        ("llm-a", "gpu.nvidia.com", "gpu-1", "llm-gpu"), ("llm-b", "gpu.nvidia.com", "gpu-1", "other/shared")]


def test_one_gpu_and_unknown_index() -> None:
    status, body = call("/api/v1/gpus/0")
    assert status == 200 and body["uuid"] == "GPU-a" and body["holders"] == [] and not body["shared"]
    status, body = call("/api/v1/gpus/7")
    assert status == 404 and body["parameter"] == "index" and "7" in body["error"]
    for bad in ("-1", "abc", "1.0", "01", "+1", "\u0661", "1e0"):  # "01" must not read as GPU 1
        status, body = call(f"/api/v1/gpus/{bad}")
        assert status == 400 and body["parameter"] == "index" and bad in body["error"], bad


@pytest.mark.parametrize(("path", "query", "parameter"), [
    ("/api/v1/gpus", "verbose=1", "verbose"),
    ("/api/v1/gpus/0", "minutes=5", "minutes"),
    ("/api/v1/gpus/0/trend", "minutes=5&window=2", "window"),
])
def test_unknown_query_parameters_are_400_naming_them(path: str, query: str, parameter: str) -> None:
    status, body = call(path, query)
    assert status == 400 and body["parameter"] == parameter and body["error"].startswith(f"{parameter}: ")


def test_numbers_are_rounded_for_people() -> None:
    odd = build_gpu_status(DeviceSnapshot(index=0, uuid="GPU-r", name="", up=True, pci_bus_id="",
                                          temperature_celsius=61.00000000001, utilization=0.58,
                                          memory_used_bytes=1, memory_free_bytes=2, memory_total_bytes=3,
                                          power_watts=123.456789))
    body = gpu_json(odd)
    assert body["utilization_percent"] == 58.0 and str(body["utilization_percent"]) == "58.0"
    derived = (body["memory"]["percent"], body["temperature_celsius"], body["power_watts"])
    assert derived == (33.3, 61.0, 123.457)
    assert body["availability_score"] == 0.568  # 0.6 * 2/3 + 0.4 * 0.42, float noise rounded off


def test_trend_default_window(history: GpuHistory) -> None:
    status, body = call("/api/v1/gpus/0/trend", "", history)
    assert status == 200
    assert body["minutes"] == 5.0 and body["samples"] == 6 and body["trend"] == "rising"
    assert body["temperature_celsius"] == {
        "current": 60.0, "avg": 57.5, "min": 55.0, "max": 60.0, "slope_per_minute": pytest.approx(1.0),
        "trend": "rising",
    }
    assert body["utilization_percent"]["trend"] == "stable"
    assert body["window"] == {"start": T0 + 300, "end": T0 + 600}


def test_trend_minutes_and_now(history: GpuHistory) -> None:
    status, body = call("/api/v1/gpus/0/trend", "minutes=2.5", history, now=T0 + 300)
    assert status == 200 and body["samples"] == 3  # t = 150..300 s: samples at 180, 240, 300
    assert body["temperature_celsius"]["current"] == 55.0


def test_trend_of_a_gpu_never_sampled() -> None:
    status, body = call("/api/v1/gpus/1/trend", "minutes=1")
    assert status == 200 and body["samples"] == 0 and body["trend"] == "unknown"
    assert body["temperature_celsius"]["current"] is None


@pytest.mark.parametrize(
    ("query", "needle"),
    [
        ("minutes=0", "positive"),
        ("minutes=-3", "positive"),
        ("minutes=abc", "positive"),
        ("minutes=", "positive"),
        ("minutes=nan", "positive"),
        ("minutes=inf", "positive"),
        ("minutes=61", "at most 60"),
        ("minutes=1&minutes=2", "more than once"),
    ],
)
def test_bad_minutes_is_400_naming_the_parameter(query: str, needle: str) -> None:
    status, body = call("/api/v1/gpus/0/trend", query)
    assert status == 400 and body["parameter"] == "minutes"
    assert body["error"].startswith("minutes: ") and needle in body["error"]


def test_max_trend_minutes_is_configurable() -> None:
    assert call("/api/v1/gpus/0/trend", "minutes=100", max_trend_minutes=120)[0] == 200
    assert call("/api/v1/gpus/0/trend", "minutes=100")[0] == 400


@pytest.mark.parametrize(
    "path", ["/api/v1/other", "/api/v1/gpus/0/history", "/api/v1/gpus/0/trend/x", "/api"]
)
def test_unknown_paths_are_404(path: str) -> None:
    status, body = call(path)
    assert status == 404 and "error" in body


def test_method_not_allowed() -> None:
    assert call("/api/v1/gpus", method="POST")[0] == 405


def test_a_method_not_allowed_is_refused_before_the_gpus_are_read() -> None:
    def provider() -> list[GpuStatus]:
        raise RuntimeError("NVML was read")  # would be a 503

    status, body = handle("/api/v1/gpus/0", "", provider, GpuHistory(), method="DELETE")
    assert status == 405 and body == {"error": "method DELETE not allowed; use GET or HEAD"}


def test_provider_failure_is_503_not_an_exception() -> None:
    def broken() -> list[GpuStatus]:
        raise RuntimeError("NVML gone")

    status, body = handle("/api/v1/gpus", "", broken, GpuHistory())
    assert status == 503 and "NVML gone" in body["error"]


def test_encode_turns_non_finite_into_null() -> None:
    assert json.loads(encode({"a": math.nan, "b": [1.5, math.inf], "c": {"d": -math.inf}})) == {
        "a": None, "b": [1.5, None], "c": {"d": None}
    }


def test_is_api_path() -> None:
    assert is_api_path("/api/v1/gpus?x=1") and not is_api_path("/metrics")


@pytest.mark.parametrize(("holders", "shared"), [
    ((), False),
    ((DeviceHolder("a", "p1", "c", GPU_RESOURCE, "GPU-a"),), False),
    ((DeviceHolder("a", "p1", "c", GPU_RESOURCE, "GPU-a"),) * 2, False),  # two replicas of one container
    ((DeviceHolder("a", "p1", "c", "nvidia.com/mig-1g.10gb", "MIG-1"),), True),  # a slice is not the GPU
    ((DeviceHolder("a", "p1", "c", GPU_RESOURCE, "0"),), False),  # deviceIDStrategy=index: GPU 0
    ((DeviceHolder("a", "p1", "c", "nvidia.com/mig-1g.10gb", "0:1"),), True),
    # mig-strategy=single advertises MIG devices as nvidia.com/gpu: `0:1` (index) is MIG device 1 of GPU 0
    ((DeviceHolder("a", "p1", "c", GPU_RESOURCE, "0:1"),), True),
    ((DeviceHolder("a", "p1", "c", GPU_RESOURCE, "nvidia0/gi1"),), True),  # GKE's MIG GPU instance
    ((DeviceHolder("a", "p1", "c", GPU_RESOURCE, "nvidia0"),), False),  # GKE's whole GPU
], ids=["free", "one", "one-container-two-replicas", "one-mig-holder", "index-id", "index-mig",
        "index-mig-single-strategy", "gke-mig", "gke-whole"])
def test_shared_means_what_gpu_allocation_info_means(holders: tuple[DeviceHolder, ...], shared: bool) -> None:
    """`shared` is true when the device values are not one holder's alone, as gpu_allocation_info's label:
    a single MIG holder is shared (its slice is not the device)."""
    gpu = build_gpu_status(DeviceSnapshot(index=0, uuid="GPU-a", name="x", up=True, pci_bus_id="",
                                          temperature_celsius=50.0, utilization=0.1, memory_used_bytes=GIB,
                                          memory_free_bytes=GIB, memory_total_bytes=2 * GIB,
                                          power_watts=None), holders=holders)
    assert gpu_json(gpu)["shared"] is shared


def test_method_not_allowed_names_the_allowed_methods() -> None:
    status, body = call("/api/v1/gpus/0", method="POST")
    assert status == 405 and "GET" in body["error"] and "HEAD" in body["error"]
    assert ALLOWED_METHODS == ("GET", "HEAD")


@settings(max_examples=300, deadline=None)
@given(query=st.text(max_size=300), index=st.text(max_size=12))
def test_any_trend_request_is_answered_and_every_400_is_json_naming_a_parameter(query: str,
                                                                                 index: str) -> None:
    """Whatever the query string and index (percent-escapes, other scripts' digits, huge numbers, empty
    names), the answer is a status and a JSON object; a 400 names the parameter, briefly."""
    status, body = call(f"/api/v1/gpus/{index or '0'}/trend", query)
    assert status in (200, 400, 404), (status, body)
    json.loads(encode(body))
    if status == 400:
        assert isinstance(body["parameter"], str) and len(body["parameter"]) <= 40, body
        assert body["error"] and len(body["error"]) < 300, body
