"""PodResourcesClient and PodResourcesCache against a real gRPC server on a temp unix socket."""

from __future__ import annotations

import logging
import os
import socket
import threading

import pytest

from exporter.pods.podresources import (
    DeviceHolder,
    PodResourcesCache,
    PodResourcesClient,
    PodResourcesClientSettings,
    PodResourcesUnavailableError,
)
from tests.kubelet import KubeletServer
from tests.support import wait_for

pytestmark = pytest.mark.integration

GPU = "nvidia.com/gpu"
UUID_A = "GPU-11111111-2222-3333-4444-555555555555"
UUID_B = "GPU-aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee"
MIG_1 = "MIG-0f0f0f0f-0000-1111-2222-333333333333"
MIG_2 = "MIG-0e0e0e0e-0000-1111-2222-333333333333"


def client_for(server: KubeletServer, **kwargs: float | int) -> PodResourcesClient:
    return PodResourcesClient(PodResourcesClientSettings(socket_path=server.socket_path, **kwargs))  # type: ignore[arg-type]


def cache_for(server: KubeletServer, **kwargs: object) -> PodResourcesCache:
    kwargs.setdefault("stale_grace_intervals", 0)  # these tests check the empty mapping of a failed List
    return PodResourcesCache(client_for(server).list_allocations, **kwargs)  # type: ignore[arg-type]


def test_plain_gpus_map_to_their_containers(kubelet: KubeletServer) -> None:
    kubelet.set_pods(
        [
            ("ml", "trainer-0", [("main", [(GPU, [UUID_A]), ("example.com/nic", ["nic0"])])]),
            ("serve", "llm-7f9", [("server", [(GPU, [UUID_B])]), ("sidecar", [])]),
        ]
    )
    cache = cache_for(kubelet)
    snapshot = cache.refresh()
    assert snapshot.up and cache.up
    assert cache.holders(UUID_A) == (DeviceHolder("ml", "trainer-0", "main", GPU, UUID_A),)
    assert cache.single_holder(UUID_B) == DeviceHolder("serve", "llm-7f9", "server", GPU, UUID_B)
    assert set(snapshot.holders) == {UUID_A, UUID_B}  # the NIC is not a GPU
    assert kubelet.lister.calls == 1


def test_time_slicing_ids_make_one_gpu_with_two_holders(kubelet: KubeletServer) -> None:
    kubelet.set_pods(
        [
            ("a", "p1", [("c", [(GPU, [f"{UUID_A}::0", f"{UUID_A}::3"])])]),  # 2 replicas, one holder
            ("b", "p2", [("c", [(GPU, [f"{UUID_A}::1"])])]),
        ]
    )
    cache = cache_for(kubelet)
    cache.refresh()
    assert cache.holders(UUID_A) == (
        DeviceHolder("a", "p1", "c", GPU, UUID_A),
        DeviceHolder("b", "p2", "c", GPU, UUID_A),
    )
    assert cache.single_holder(UUID_A) is None  # shared: device series carry no pod labels
    assert cache.holders(f"{UUID_A}::1") == ()


def test_mig_ids_with_and_without_parent_lookup(kubelet: KubeletServer) -> None:
    kubelet.set_pods(
        [
            ("a", "p1", [("c", [("nvidia.com/mig-1g.10gb", [MIG_1])])]),
            ("b", "p2", [("c", [("nvidia.com/mig-3g.40gb", [f"{MIG_2}::2"])])]),
        ]
    )
    own = cache_for(kubelet)
    own.refresh()
    assert own.holders(MIG_1) == (DeviceHolder("a", "p1", "c", "nvidia.com/mig-1g.10gb", MIG_1),)
    assert own.holders(MIG_2)[0].pod == "p2"

    parents = {MIG_1: UUID_B, MIG_2: UUID_B}
    by_parent = cache_for(kubelet, mig_parent=parents.get)
    by_parent.refresh()
    assert [(h.pod, h.device_id) for h in by_parent.holders(UUID_B)] == [("p1", MIG_1), ("p2", MIG_2)]
    assert by_parent.holders(MIG_1) == ()


def _many_pods(count: int) -> list:
    # ~350 bytes per pod: names padded like long generated names, one GPU id each.
    return [
        (
            f"namespace-{i % 50:02d}",
            f"pod-{i:06d}-" + "x" * 200,
            [("container-" + "y" * 60, [(GPU, [f"GPU-{i:032x}"])])],
        )
        for i in range(count)
    ]


def test_reply_above_4_mib_needs_and_gets_the_larger_limit(kubelet: KubeletServer) -> None:
    kubelet.set_pods(_many_pods(20_000))
    assert kubelet.lister.response.ByteSize() > 5 * 1024 * 1024
    allocations = client_for(kubelet).list_allocations()
    assert len(allocations) == 20_000
    assert allocations[-1].device_id == f"GPU-{19_999:032x}"
    with pytest.raises(PodResourcesUnavailableError, match="RESOURCE_EXHAUSTED"):
        client_for(kubelet, max_receive_message_bytes=4 * 1024 * 1024).list_allocations()


def test_socket_vanishing_and_coming_back(kubelet: KubeletServer, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="exporter.pods.podresources.cache")
    kubelet.set_pods([("a", "p1", [("c", [(GPU, [UUID_A])])])])
    cache = cache_for(kubelet)
    assert cache.refresh().up

    kubelet.stop()
    assert not os.path.exists(kubelet.socket_path)
    for _ in range(3):
        snapshot = cache.refresh()
        assert not snapshot.up and not cache.up
        assert cache.holders(UUID_A) == ()
        assert "does not exist" in (snapshot.error or "")

    kubelet.set_pods([("a", "p2", [("c", [(GPU, [UUID_A])])])])
    kubelet.start()
    for _ in range(2):
        assert cache.refresh().up
    assert cache.single_holder(UUID_A) == DeviceHolder("a", "p2", "c", GPU, UUID_A)

    records = [(r.levelname, r.getMessage()) for r in caplog.records]
    assert [level for level, _ in records] == ["INFO", "WARNING", "INFO"], records
    assert "unavailable" in records[1][1]


def test_kubelet_down_with_socket_file_left_behind(socket_dir: str, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="exporter.pods.podresources.cache")
    path = os.path.join(socket_dir, "kubelet.sock")
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.bind(path)  # a socket file nobody listens on, as a crashed kubelet leaves behind
    assert os.path.exists(path)
    cache = PodResourcesCache(
        PodResourcesClient(PodResourcesClientSettings(socket_path=path, timeout_seconds=2)).list_allocations
    )
    for _ in range(2):
        snapshot = cache.refresh()
        assert not snapshot.up
        assert "UNAVAILABLE" in (snapshot.error or "")
    assert [r.levelname for r in caplog.records] == ["WARNING"]


def test_background_refresh_follows_the_kubelet(kubelet: KubeletServer) -> None:
    kubelet.set_pods([("a", "p1", [("c", [(GPU, [UUID_A])])])])
    cache = cache_for(kubelet, refresh_interval_seconds=0.05)
    cache.start()
    try:
        wait_for(lambda: cache.single_holder(UUID_A) is not None)
        kubelet.set_pods([("a", "p9", [("c", [(GPU, [UUID_A])])])])
        wait_for(lambda: (cache.single_holder(UUID_A) or DeviceHolder("", "", "", "", "")).pod == "p9")
        kubelet.stop()
        wait_for(lambda: not cache.up)
        assert cache.holders(UUID_A) == ()
    finally:
        assert cache.stop(timeout=10)


def test_scrape_reads_do_not_wait_for_a_slow_kubelet(kubelet: KubeletServer) -> None:
    """A List in flight holds only the refresher: readers get the previous snapshot at once."""
    release = threading.Event()
    entered = threading.Event()
    inner = client_for(kubelet).list_allocations

    def slow_lister():
        entered.set()
        release.wait(10)
        return inner()

    kubelet.set_pods([("a", "p1", [("c", [(GPU, [UUID_A])])])])
    cache = PodResourcesCache(slow_lister)
    refresher = threading.Thread(target=cache.refresh)
    refresher.start()
    try:
        assert entered.wait(10)
        assert cache.holders(UUID_A) == () and not cache.up  # answered while List is still pending
    finally:
        release.set()
        refresher.join(10)
    assert cache.up


