"""The simulated GPU Deployment: GPUs held, start-up delay, load sharing, deletion order, pool limits."""

from __future__ import annotations

import math

import pytest

from demo.cluster import ClusterSettings, SimulatedDeployment
from tests.clock import ManualClock


def make(replicas: int = 2, delay: float = 60.0, nodes: int = 1, per_node: int = 4,
         loading: float = 0.0) -> tuple[SimulatedDeployment, ManualClock]:
    clock = ManualClock(1_000.0)
    settings = ClusterSettings(nodes=nodes, gpus_per_node=per_node, startup_delay_seconds=delay,
                               loading_utilization=loading)
    return SimulatedDeployment("ns", "svc", replicas, clock, settings), clock


def test_initial_replicas_are_ready_and_share_the_load() -> None:
    deployment, _ = make(replicas=4)
    snap = deployment.snapshot(2.0)
    assert (snap.spec_replicas, snap.ready, snap.loading, snap.pending) == (4, 4, 0, 0)
    assert [g.utilization for g in snap.gpus] == [0.5] * 4
    assert snap.demand_per_ready == 0.5
    assert snap.mean_utilization() == 0.5


def test_utilization_saturates_at_one_and_demand_shows_the_overload() -> None:
    deployment, _ = make(replicas=2)
    snap = deployment.snapshot(3.0)
    assert [g.utilization for g in snap.gpus if g.replica] == [1.0, 1.0]
    assert snap.demand_per_ready == 1.5
    assert snap.overloaded(0.95)
    assert not deployment.snapshot(1.8).overloaded(0.95)


def test_new_replicas_hold_a_gpu_at_once_and_serve_after_the_startup_delay() -> None:
    deployment, clock = make(replicas=2, delay=60.0, loading=0.05)
    deployment.scale_to(4)
    snap = deployment.snapshot(2.0)
    assert (snap.spec_replicas, snap.ready, snap.loading, snap.gpus_held) == (4, 2, 2, 4)
    assert snap.demand_per_ready == 1.0  # the two loading replicas serve nothing yet
    assert sorted(g.utilization for g in snap.gpus) == [0.05, 0.05, 1.0, 1.0]
    assert snap.mean_utilization(include_loading=True) == pytest.approx(0.525)
    assert snap.mean_utilization(include_loading=False) == 1.0
    clock.now += 59.9
    assert deployment.snapshot(2.0).ready == 2
    clock.now += 0.1
    snap = deployment.snapshot(2.0)
    assert (snap.ready, snap.loading) == (4, 0)
    assert snap.demand_per_ready == 0.5


def test_scale_down_removes_loading_replicas_first_then_the_newest_ready() -> None:
    deployment, clock = make(replicas=2, delay=60.0)
    clock.now += 10
    deployment.scale_to(3)  # svc-0003 ready at +70
    clock.now += 100
    deployment.scale_to(4)  # svc-0004 loading
    deployment.scale_to(2)
    assert [r.name for r in deployment.replicas()] == ["svc-0001", "svc-0002"]
    deployment.scale_to(3)
    clock.now += 100
    deployment.scale_to(1)
    assert [r.name for r in deployment.replicas()] == ["svc-0001"]


def test_scale_down_frees_gpus_at_once() -> None:
    deployment, _ = make(replicas=4)
    deployment.scale_to(1)
    snap = deployment.snapshot(0.5)
    assert snap.gpus_held == 1
    assert sum(1 for g in snap.gpus if g.replica is None and g.utilization == 0.0) == 3


def test_without_a_free_gpu_a_replica_stays_pending_until_one_frees() -> None:
    deployment, clock = make(replicas=2, per_node=2, delay=30.0)
    deployment.scale_to(3)
    snap = deployment.snapshot(1.0)
    assert (snap.spec_replicas, snap.gpus_held, snap.pending) == (3, 2, 1)
    clock.now += 100
    assert deployment.snapshot(1.0).pending == 1  # still no GPU: waiting does not make it ready
    deployment.scale_to(2)  # the Pending one goes first
    assert deployment.snapshot(1.0).pending == 0
    assert [r.name for r in deployment.replicas()] == ["svc-0001", "svc-0002"]


def test_with_no_ready_replica_any_load_is_overload() -> None:
    deployment, _ = make(replicas=0)
    assert deployment.snapshot(0.0).demand_per_ready == 0.0
    assert math.isinf(deployment.snapshot(1.0).demand_per_ready)
    assert deployment.snapshot(1.0).mean_utilization() is None


def test_gpus_are_spread_over_named_nodes() -> None:
    settings = ClusterSettings(nodes=2, gpus_per_node=3)
    assert settings.gpu_count == 6
    assert [settings.node_of(i) for i in (0, 2, 3, 5)] == ["gpu-node-0", "gpu-node-0", "gpu-node-1",
                                                          "gpu-node-1"]


@pytest.mark.parametrize("kwargs", [{"nodes": 0}, {"gpus_per_node": 0}, {"startup_delay_seconds": -1.0},
                                    {"loading_utilization": 1.5}], ids=lambda k: next(iter(k)))
def test_bad_settings_are_refused(kwargs: dict[str, float]) -> None:
    with pytest.raises(ValueError):
        ClusterSettings(**kwargs)  # type: ignore[arg-type]


def test_negative_replicas_are_refused() -> None:
    deployment, _ = make()
    with pytest.raises(ValueError, match="replicas must be >= 0"):
        deployment.scale_to(-1)


def test_another_tenant_takes_free_gpus_first_and_never_evicts_a_running_replica() -> None:
    deployment, _ = make(replicas=2, per_node=4)
    deployment.set_others(3)  # only 2 free: it gets 2, the third waits
    snap = deployment.snapshot(1.0)
    assert (snap.gpus_held, snap.others, snap.free_gpus) == (2, 2, 0)
    assert [g.other for g in snap.gpus] == [None, None, "trainer-0002", "trainer-0001"]  # highest first
    assert [g.utilization for g in snap.gpus if g.other] == [0.8, 0.8]
    assert snap.mean_utilization() == 0.5  # ours only: the tenant's busy GPUs are not the service's
    deployment.scale_to(3)
    assert deployment.snapshot(1.0).pending == 1
    deployment.scale_to(1)  # frees a GPU: the tenant's third claim comes before anything else
    snap = deployment.snapshot(1.0)
    assert (snap.gpus_held, snap.others, snap.pending, snap.free_gpus) == (1, 3, 0, 0)


def test_a_pending_replica_gets_the_gpu_the_tenant_gives_back() -> None:
    deployment, clock = make(replicas=2, per_node=4, delay=30.0)
    deployment.set_others(2)
    clock.now += 5
    deployment.scale_to(3)
    assert deployment.unschedulable_since() == (1_005.0,)  # since its creation: tried at once
    clock.now += 50
    deployment.set_others(1)  # the newest of its pods goes
    snap = deployment.snapshot(1.0)
    assert (snap.pending, snap.loading, snap.others, snap.free_gpus) == (0, 1, 1, 0)
    assert [g.other for g in snap.gpus] == [None, None, None, "trainer-0001"]
    assert snap.gpus[2].replica == "svc-0003"
    assert deployment.unschedulable_since() == ()
    clock.now += 30
    assert deployment.snapshot(1.0).ready == 3  # its start-up delay ran from getting the GPU


def test_free_gpus_are_those_no_pod_holds() -> None:
    deployment, _ = make(replicas=1, per_node=4)
    deployment.set_others(1)
    assert deployment.snapshot(0.0).free_gpus == 2
    deployment.scale_to(5)
    snap = deployment.snapshot(0.0)
    assert (snap.free_gpus, snap.pending) == (0, 2)
    assert len(deployment.unschedulable_since()) == 2
    deployment.set_others(0)
    assert deployment.snapshot(0.0).free_gpus == 0  # the freed GPU went to a Pending replica at once
    assert len(deployment.unschedulable_since()) == 1


def test_other_tenants_gpus_must_be_a_count() -> None:
    deployment, _ = make()
    with pytest.raises(ValueError, match="other tenants"):
        deployment.set_others(-1)
