"""The demo's simulated world served for real: exporters label GPUs with the replicas holding them and show
the cluster model's utilization; the service endpoint counts the requests of the load."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from demo.cluster import ClusterSettings, SimulatedDeployment
from demo.world import SimulatedWorld
from tests.clock import ManualClock
from tests.scrape import Samples, fetch, samples

pytestmark = pytest.mark.integration


def scrape(port: int) -> Samples:
    return samples(fetch(f"http://127.0.0.1:{port}/metrics", timeout=5))


@pytest.fixture
def world() -> Iterator[tuple[SimulatedWorld, ManualClock]]:
    clock = ManualClock(100.0)
    deployment = SimulatedDeployment("demo", "inference", 2, clock,
                                     ClusterSettings(nodes=2, gpus_per_node=2, startup_delay_seconds=30))
    world = SimulatedWorld(deployment, requests_per_gpu_second=10.0, sweep_interval=0.0)
    world.start()
    try:
        yield world, clock
    finally:
        world.stop()


def test_gpus_carry_their_replica_and_its_share_of_the_load(
        world: tuple[SimulatedWorld, ManualClock]) -> None:
    sim, clock = world
    sim.deployment.scale_to(3)  # inference-0003 loads on node 1
    sim.drive(1.5, 0.0)
    node0, node1 = (scrape(port) for port in sim.exporter_ports)
    util0 = {labels["pod"]: value for labels, value in node0["gpu_utilization_ratio"]}
    share = pytest.approx(0.75, abs=0.011)  # NVML reports whole percents
    assert util0 == {"inference-0001": share, "inference-0002": share}
    util1 = {labels["pod"]: value for labels, value in node1["gpu_utilization_ratio"]}
    assert util1 == {"inference-0003": pytest.approx(0.0, abs=0.011), "": pytest.approx(0.0, abs=0.011)}
    assert {labels["namespace"] for labels, _ in node0["gpu_utilization_ratio"]} == {"demo"}
    assert {labels["node"] for labels, _ in node1["gpu_utilization_ratio"]} == {"gpu-node-1"}
    processes = node1.get("gpu_process_memory_used_bytes", [])
    assert len(processes) == 1  # the loading replica's model, the idle GPU runs nothing
    clock.now += 30
    sim.drive(1.5, 0.0)
    util1 = {labels["pod"]: value for labels, value in scrape(sim.exporter_ports[1])["gpu_utilization_ratio"]}
    assert util1["inference-0003"] == pytest.approx(0.5, abs=0.011)


def test_the_service_counts_the_requests_it_receives(world: tuple[SimulatedWorld, ManualClock]) -> None:
    sim, _ = world
    sim.drive(2.0, 3.0)  # 2 GPUs of work at 10 req/s per GPU for 3 s
    sim.drive(5.0, 1.0)  # demand beyond capacity still arrives
    [(labels, value)] = scrape(sim.service_port)["service_requests_total"]
    assert labels == {"namespace": "demo", "service": "inference"}
    assert value == pytest.approx(60.0 + 50.0)
    assert set(sim.scrape_targets()) == {"gpu-exporter", "inference-service"}


def test_the_other_tenants_gpus_carry_its_pods_so_only_unheld_gpus_read_as_free(
        world: tuple[SimulatedWorld, ManualClock]) -> None:
    """What the capacity scenario's query counts: GPUs whose series have no pod label."""
    sim, _ = world
    sim.deployment.set_others(1)  # takes the highest free GPU: node 1's second
    sim.drive(1.0, 0.0)
    node1 = scrape(sim.exporter_ports[1])
    holders = {(labels["namespace"], labels["pod"], labels["container"]): value
               for labels, value in node1["gpu_utilization_ratio"]}
    assert holders == {("batch", "trainer-0001", "trainer"): pytest.approx(0.8, abs=0.011),
                       ("", "", ""): pytest.approx(0.0, abs=0.011)}
    free = [labels for port in sim.exporter_ports  # demo/capacity-rules.yaml: count(gpu_up{pod=""} == 1)
            for labels, value in scrape(port)["gpu_up"] if not labels["pod"] and value == 1]
    assert len(free) == 1 == sim.deployment.snapshot(1.0).free_gpus
    sim.deployment.scale_to(4)  # the fourth replica finds no GPU: Pending, on no exporter
    sim.drive(1.0, 0.0)
    pods = {labels["pod"]
            for port in sim.exporter_ports for labels, _ in scrape(port)["gpu_utilization_ratio"]}
    assert pods == {"inference-0001", "inference-0002", "inference-0003", "trainer-0001"}
    assert len(sim.deployment.unschedulable_since()) == 1


def test_the_service_answers_as_an_llm_server_with_a_queue_per_ready_replica(
        world: tuple[SimulatedWorld, ManualClock]) -> None:
    """Two ready replicas serve 20 requests a second; 30 a second for 5 s leave 50 waiting, 25 each, their
    batches and KV caches full; a loading replica serves none of it and has no series yet."""
    sim, clock = world
    sim.deployment.scale_to(3)  # inference-0003 loads for 30 s
    sim.drive(3.0, 5.0)
    served = scrape(sim.service_port)
    waiting = {labels["pod"]: value for labels, value in served["vllm:num_requests_waiting"]}
    assert waiting == {"inference-0001": pytest.approx(25.0), "inference-0002": pytest.approx(25.0)}
    assert all(value == 1.0 for _, value in served["vllm:kv_cache_usage_perc"])
    assert {labels["namespace"] for labels, _ in served["vllm:num_requests_running"]} == {"demo"}
    clock.now += 30  # the third replica is ready: 30 a second are served, 10 more than arrive: it drains
    sim.drive(2.0, 10.0)
    drained = scrape(sim.service_port)
    assert {value for _, value in drained["vllm:num_requests_waiting"]} == {0.0}
    assert len(drained["vllm:time_to_first_token_seconds_count"]) == 3
