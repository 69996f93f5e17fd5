"""The demo's simulated world served for real: exporters label GPUs with the replicas holding them and show
the cluster model's utilization; the service endpoint counts the requests of the load and serves them as an
emulated continuous-batching LLM server, whose replicas a scale-down cuts."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import requests

from demo.cluster import ClusterSettings, SimulatedDeployment
from demo.processes import running, start_prometheus
from demo.world import SimulatedWorld
from tests.clock import ManualClock
from tests.scrape import Samples, fetch, samples
from tests.support import wait_for

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


def test_the_service_answers_as_an_llm_server_with_a_batch_per_ready_replica(
        world: tuple[SimulatedWorld, ManualClock]) -> None:
    """The same requests as the counter (10 a second per GPU of load), served by one emulated batching replica
    per ready pod; a loading replica serves none of them and has no series yet."""
    sim, clock = world
    sim.deployment.scale_to(3)  # inference-0003 loads for 30 s
    for _ in range(20):
        sim.drive(1.0, 0.5)  # 10 requests a second for 10 s, well within two replicas
    served = scrape(sim.service_port)
    running = {labels["pod"]: value for labels, value in served["vllm:num_requests_running"]}
    assert set(running) == {"inference-0001", "inference-0002"} and all(v > 0 for v in running.values())
    successes = {labels["pod"]: value for labels, value in served["vllm:request_success_total"]}
    assert 60 < sum(successes.values()) < 130  # about 100 arrived; those in a batch are not counted yet
    itl = served["vllm:time_per_output_token_seconds_count"]
    assert {labels["namespace"] for labels, _ in itl} == {"demo"}
    clock.now += 30  # the third replica is ready: it takes its share of the new requests
    sim.drive(1.0, 5.0)
    later = scrape(sim.service_port)
    assert len(later["vllm:time_to_first_token_seconds_count"]) == 3
    assert sim.llm.tally().met == sim.llm.tally().finished > 60  # all within the objective at this load


def test_a_scale_down_drains_the_replicas_it_removes_and_counts_what_an_abort_would_have_cut(
        world: tuple[SimulatedWorld, ManualClock]) -> None:
    """With deletion costs from each pod's requests in flight (as the controller sets them), the idlest
    replica goes and drains (the world's default 60 s): nothing is cut, its requests in flight are served;
    those an abort would have cut on it, and on the newest (the default order), are counted beside."""
    sim, _ = world
    sim.deployment.scale_to(3)
    sim.drive(0.0, 0.0)
    sim.deployment.scale_to(2)  # loading replicas go first: nothing served, nothing cut
    assert sim.llm.tally().scale_downs == 1 and sim.llm.tally().cut_without_drain == 0
    for _ in range(10):
        sim.drive(1.5, 0.5)
    served = scrape(sim.service_port)
    in_flight = {labels["pod"]: value for labels, value in served["vllm:num_requests_running"]}
    for labels, value in served["vllm:num_requests_waiting"]:
        in_flight[labels["pod"]] += value
    assert set(in_flight) == {"inference-0001", "inference-0002"} and all(in_flight.values()), in_flight
    for pod, count in in_flight.items():
        sim.deployment.set_deletion_cost(pod, int(count) + 1)  # what the controller's query would give
    idlest = min(in_flight, key=lambda pod: (in_flight[pod], -int(pod[-4:])))  # a tie: the newest goes
    sim.deployment.scale_to(1)
    tally = sim.llm.tally()
    assert [r.name for r in sim.deployment.replicas()] == sorted(set(in_flight) - {idlest})
    assert (tally.cut_without_drain, tally.cut_without_drain_or_costs) == (in_flight[idlest],
                                                                          in_flight["inference-0002"])
    assert (tally.scale_downs, tally.scale_downs_with_costs, tally.cut) == (2, 1, 0)
    assert sim.llm.draining() == (idlest,)
    for _ in range(120):  # half a second at a time, within the grace period, until it has drained
        if not sim.llm.draining():
            break
        sim.drive(1.5, 0.5)
    assert sim.llm.draining() == ()
    assert (sim.llm.tally().cut, sim.llm.tally().drained) == (0, in_flight[idlest])
    assert {labels["pod"] for labels, _ in scrape(sim.service_port)["vllm:num_requests_running"]} == (
        set(in_flight) - {idlest})


def test_prometheus_scrapes_the_llm_servers_series_as_vllm_names_them(
        world: tuple[SimulatedWorld, ManualClock]) -> None:
    """What the demo's rule queries, through a real scrape: vLLM's names with their colons (the classic text
    format), per pod, the success counter's rate among them."""
    sim, _ = world
    sim.drive(1.0, 2.0)
    config: dict[str, object] = {
        "global": {"scrape_interval": "200ms", "scrape_timeout": "180ms"},
        "scrape_configs": [{"job_name": "inference-service", "static_configs": [
            {"targets": sim.scrape_targets()["inference-service"]}]}],
    }
    with running(start_prometheus(config)) as prometheus:
        def query(text: str) -> list[dict[str, Any]]:
            answer = requests.get(f"{prometheus.url}/api/v1/query", params={"query": text}, timeout=5)
            result: list[dict[str, Any]] = answer.json()["data"]["result"]
            return result

        def rate_seen() -> list[dict[str, Any]]:
            sim.drive(1.0, 0.2)  # the load flows while Prometheus scrapes, as the demo's driver does
            return [r for r in query('sum by (pod) (rate(vllm:request_success_total{namespace="demo"}[2s]))')
                    if float(r["value"][1]) > 0]

        rates = wait_for(rate_seen, timeout=30, what="a success rate per pod", interval=0.2)
        assert {r["metric"]["pod"] for r in rates} <= {"inference-0001", "inference-0002"}
        running_pods = {r["metric"]["pod"] for r in query('vllm:num_requests_running{namespace="demo"}')}
        assert running_pods == {"inference-0001", "inference-0002"}
        assert query('sum(vllm:time_to_first_token_seconds_count{pod=~"inference-.*"})')
