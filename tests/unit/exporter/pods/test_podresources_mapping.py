"""Device id normalization and the holder map, without gRPC."""

from __future__ import annotations

import logging

import pytest

from exporter.pods.podresources import (
    DeviceAllocation,
    DeviceHolder,
    PodResourcesCache,
    PodResourcesClientSettings,
    PodResourcesUnavailableError,
    build_holder_map,
    is_gpu_resource,
    normalize_device_id,
    resource_filter,
    single_holder,
)

GPU = "nvidia.com/gpu"
A = "GPU-11111111-2222-3333-4444-555555555555"
MIG = "MIG-0f0f0f0f-0000-1111-2222-333333333333"


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        (A, A),
        (f"{A}::0", A),
        (f"{A}::17", A),
        (f"{MIG}::2", MIG),
        ("0", "0"),
        ("0:1", "0:1"),  # index strategy MIG id: kept
        (f" {A} ", f" {A} "),  # not the GPU's id: left as given, so it names no GPU
        ("gpu-0\n", "gpu-0\n"),
        (f"{A}::1\n", f"{A}::1\n"),
        (f"{A}::x", f"{A}::x"),  # not a replica suffix
    ],
)
def test_normalize_device_id(raw: str, expected: str) -> None:
    assert normalize_device_id(raw) == expected


@pytest.mark.parametrize(
    ("resource", "expected"),
    [
        ("nvidia.com/gpu", True),
        ("nvidia.com/mig-1g.10gb", True),
        ("nvidia.com/gpu.shared", True),  # the device plugin's renameByDefault name for shared GPUs
        ("amd.com/gpu", False),
        ("example.com/nic", False),
    ],
)
def test_is_gpu_resource(resource: str, expected: bool) -> None:
    assert is_gpu_resource(resource) is expected


def test_holders_are_unique_sorted_and_filtered() -> None:
    allocations = [
        DeviceAllocation("b", "p2", "c", GPU, f"{A}::1"),
        DeviceAllocation("a", "p1", "c", GPU, f"{A}::0"),
        DeviceAllocation("a", "p1", "c", GPU, f"{A}::3"),
        DeviceAllocation("a", "p1", "c", "example.com/nic", "nic0"),
        DeviceAllocation("a", "p1", "c", GPU, ""),
    ]
    mapping = build_holder_map(allocations)
    assert mapping == {A: (DeviceHolder("a", "p1", "c", GPU, A), DeviceHolder("b", "p2", "c", GPU, A))}
    assert single_holder(mapping, A) is None
    assert single_holder(mapping, "GPU-unknown") is None


def test_one_container_with_two_mig_slices_of_a_parent_is_a_single_holder() -> None:
    other = "MIG-22222222-0000-1111-2222-333333333333"
    allocations = [
        DeviceAllocation("a", "p1", "c", "nvidia.com/mig-1g.10gb", MIG),
        DeviceAllocation("a", "p1", "c", "nvidia.com/mig-1g.10gb", other),
    ]
    mapping = build_holder_map(allocations, mig_parent={MIG: A, other: A}.get)
    assert len(mapping[A]) == 2
    assert single_holder(mapping, A) == mapping[A][0]


def test_mig_lookup_miss_keeps_own_id() -> None:
    mapping = build_holder_map([DeviceAllocation("a", "p", "c", "nvidia.com/mig-2g.20gb", MIG)], {}.get)
    assert list(mapping) == [MIG]


def test_cache_failure_modes_log_once_and_empty_the_map(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="exporter.pods.podresources.cache")
    replies: list[object] = [
        [DeviceAllocation("a", "p", "c", GPU, A)],
        PodResourcesUnavailableError("socket gone"),
        RuntimeError("boom"),
        [DeviceAllocation("a", "q", "c", GPU, A)],
    ]

    def lister() -> list[DeviceAllocation]:
        reply = replies.pop(0)
        if isinstance(reply, Exception):
            raise reply
        return reply  # type: ignore[return-value]

    clock_values = iter([100.0, 110.0, 120.0, 130.0])
    cache = PodResourcesCache(lister, clock=lambda: next(clock_values), stale_grace_intervals=0)
    assert not cache.up and cache.snapshot().refreshed_at is None
    assert cache.refresh().up
    down = cache.refresh()
    assert (down.up, down.error, down.refreshed_at, dict(down.holders)) == (False, "socket gone", 110.0, {})
    assert cache.refresh().error == "RuntimeError: boom"
    assert cache.refresh().holders[A][0].pod == "q"
    assert [r.levelname for r in caplog.records] == ["INFO", "WARNING", "INFO"]


@pytest.mark.parametrize(
    "kwargs",
    [{"socket_path": ""}, {"timeout_seconds": 0}, {"max_receive_message_bytes": 1024}],
)
def test_client_settings_reject_nonsense(kwargs: dict[str, object]) -> None:
    with pytest.raises(ValueError, match=next(iter(kwargs))):
        PodResourcesClientSettings(**kwargs)  # type: ignore[arg-type]


def test_cache_rejects_non_positive_interval() -> None:
    with pytest.raises(ValueError, match="refresh_interval_seconds"):
        PodResourcesCache(list, refresh_interval_seconds=0)


def test_a_failed_list_keeps_the_last_mapping_for_the_grace_then_empties(
        caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="exporter.pods.podresources.cache")
    good = [DeviceAllocation("a", "p", "c", GPU, A)]
    replies: list[object] = [good, *[PodResourcesUnavailableError("socket gone")] * 5, good]

    def lister() -> list[DeviceAllocation]:
        reply = replies.pop(0)
        if isinstance(reply, Exception):
            raise reply
        return reply  # type: ignore[return-value]

    now = [0.0]
    cache = PodResourcesCache(lister, refresh_interval_seconds=10, clock=lambda: now[0])  # grace 3 x 10 s
    assert cache.attempts == 0 and cache.refresh().up and cache.attempts == 1
    seen = []
    for at in (10.0, 20.0, 30.0, 40.0, 50.0):
        now[0] = at
        snapshot = cache.refresh()
        seen.append((snapshot.up, snapshot.stale, cache.single_holder(A) is not None))
    # up goes to 0 at once; the labels stay for 30 s after the last good List, then go
    assert seen == [(False, True, True), (False, True, True), (False, True, True),
                    (False, False, False), (False, False, False)]
    now[0] = 60.0
    assert cache.refresh().up and cache.single_holder(A) is not None and cache.attempts == 7
    assert [(r.levelname, r.getMessage().split(",")[0]) for r in caplog.records] == [
        ("INFO", "kubelet pod-resources readable: 1 GPU devices allocated"),
        ("WARNING", "kubelet pod-resources unavailable"),
        ("INFO", "kubelet pod-resources still unavailable after 30s; pod labels are empty until it answers"),
        ("INFO", "kubelet pod-resources readable: 1 GPU devices allocated")]


def test_accepted_resource_names_are_configurable_and_mig_is_always_in() -> None:
    allocations = [
        DeviceAllocation("a", "p1", "c", "nvidia.com/gpu.shared", f"{A}::1"),
        DeviceAllocation("b", "p2", "c", "example.com/vgpu", "GPU-b"),
        DeviceAllocation("c", "p3", "c", "nvidia.com/mig-1g.10gb.shared", MIG),
    ]
    default = build_holder_map(allocations)
    assert set(default) == {A, MIG} and default[A][0].resource == "nvidia.com/gpu.shared"
    custom = build_holder_map(allocations, resource_filter=resource_filter(["example.com/vgpu"]))
    assert set(custom) == {"GPU-b", MIG}
