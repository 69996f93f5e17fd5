"""The per-request emulated LLM server behind a real HTTP endpoint: vLLM's series per ready pod, read from
each replica's own batch and KV cache; histograms of each request's TTFT and inter-token latency that only
grow; a pod a scale-down removes drains (no new request, those in flight served until its grace period ends,
what is left cut; without a drain, cut at once); a pod that goes away otherwise loses its requests."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from wsgiref.simple_server import WSGIServer, make_server

import pytest
from prometheus_client import CollectorRegistry, make_wsgi_app

from demo.cluster import ScaleDown
from demo.llm_server import (
    DRAIN_SECONDS,
    ITL,
    KV_CACHE,
    RUNNING,
    SUCCESS,
    TTFT,
    WAITING,
    BatchingServerCollector,
)
from demo.serving_profile import load_profile
from tests.scrape import Samples, fetch, samples


@pytest.fixture
def served(request: pytest.FixtureRequest) -> Iterator[tuple[BatchingServerCollector, str]]:
    """The collector served on 127.0.0.1; `drain_seconds` from an indirect parameter (the default without)."""
    drain = getattr(request, "param", DRAIN_SECONDS)
    collector = BatchingServerCollector(load_profile(), "ml", drain_seconds=drain)
    registry = CollectorRegistry()
    registry.register(collector)
    server: WSGIServer = make_server("127.0.0.1", 0, make_wsgi_app(registry))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield collector, f"http://127.0.0.1:{server.server_address[1]}/metrics"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


def _by_pod(found: Samples, name: str) -> dict[str, float]:
    return {labels["pod"]: value for labels, value in found[name]}


def test_two_ready_pods_serve_vllms_series_from_their_own_batches(
        served: tuple[BatchingServerCollector, str]) -> None:
    collector, url = served
    collector.update(10.0, ["llm-0001", "llm-0002"], 60.0)  # well within two replicas' capacity
    first = samples(fetch(url))
    assert set(_by_pod(first, RUNNING)) == {"llm-0001", "llm-0002"}
    assert all(0.0 < value < 1.0 for value in _by_pod(first, KV_CACHE).values())
    assert set(_by_pod(first, WAITING).values()) == {0.0}
    counts = _by_pod(first, f"{TTFT}_count")
    assert 300 < sum(counts.values()) < 700 and counts == _by_pod(first, f"{ITL}_count")
    fast = {labels["pod"]: value for labels, value in first[f"{TTFT}_bucket"] if labels["le"] == "0.5"}
    assert fast == counts  # every request's first token within 0.5 s at this load
    collector.update(40.0, ["llm-0001"], 60.0)  # llm-0002 went away; one replica can't keep up with 40/s
    second = samples(fetch(url))
    assert set(_by_pod(second, RUNNING)) == {"llm-0001"} and collector.cut > 0
    assert _by_pod(second, WAITING)["llm-0001"] > 0
    assert _by_pod(second, f"{TTFT}_count")["llm-0001"] >= counts["llm-0001"]


def test_each_served_request_counts_once_as_a_success_and_in_the_tally(
        served: tuple[BatchingServerCollector, str]) -> None:
    collector, url = served
    collector.update(6.0, ["llm-0001", "llm-0002"], 60.0)  # well within two replicas' capacity
    found = samples(fetch(url))
    successes = {labels["pod"]: value for labels, value in found[SUCCESS]}
    assert successes == _by_pod(found, f"{TTFT}_count")
    assert {labels["finished_reason"] for labels, _ in found[SUCCESS]} == {"stop"}
    tally = collector.tally()
    assert tally.finished == sum(successes.values()) > 200
    assert tally.met == tally.finished and tally.attainment == 1.0  # every request within the objective
    assert (tally.cut, tally.cut_without_drain, tally.cut_without_drain_or_costs, tally.drained,
            tally.scale_downs) == (0, 0, 0, 0, 0)
    collector.update(60.0, ["llm-0001"], 60.0)  # llm-0002 went away; one replica far past its capacity
    later = collector.tally() - tally
    assert later.cut > 0 and later.met < later.finished  # the overload misses the objective


def _in_flight(url: str) -> dict[str, float]:
    found = samples(fetch(url))
    waiting = _by_pod(found, WAITING)
    return {pod: running + waiting[pod] for pod, running in _by_pod(found, RUNNING).items()}


@pytest.mark.parametrize("served", [0.0], indirect=True, ids=["no drain"])
def test_without_a_drain_a_scale_down_cuts_the_removed_replicas_requests_and_counts_the_default_orders(
        served: tuple[BatchingServerCollector, str]) -> None:
    collector, url = served
    pods = ["llm-0001", "llm-0002", "llm-0003"]
    collector.update(18.0, pods, 30.0)
    in_flight = _in_flight(url)
    assert all(count > 0 for count in in_flight.values()), in_flight
    before = collector.tally()
    collector.scale_down(ScaleDown(removed=("llm-0001",), without_costs=("llm-0003",), costs_set=True))
    event = collector.tally() - before
    assert (event.cut, event.cut_without_drain, event.cut_without_drain_or_costs) == (
        in_flight["llm-0001"], in_flight["llm-0001"], in_flight["llm-0003"])
    assert (event.scale_downs, event.scale_downs_with_costs, event.finished, event.drained) == (1, 1, 0, 0)
    assert collector.draining() == () and set(_in_flight(url)) == {"llm-0002", "llm-0003"}  # its series end
    collector.update(18.0, pods, 1.0)  # a driver tick that read the Deployment before the scale-down
    assert set(_in_flight(url)) == {"llm-0002", "llm-0003"}  # llm-0001 never returns
    assert collector.tally().cut == event.cut


def test_a_removed_replica_drains_its_requests_in_flight_within_the_grace_period_and_takes_no_new_one(
        served: tuple[BatchingServerCollector, str]) -> None:
    """The default drain (60 s, longer than any request here): nothing cut; the removed pod still serves its
    series while it finishes exactly the requests it had (each scored), then its series end."""
    collector, url = served
    pods = ["llm-0001", "llm-0002", "llm-0003"]
    collector.update(18.0, pods, 30.0)
    in_flight = _in_flight(url)
    successes = _by_pod(samples(fetch(url)), SUCCESS)
    assert all(count > 0 for count in in_flight.values()), in_flight
    before = collector.tally()
    collector.scale_down(ScaleDown(removed=("llm-0001",), without_costs=("llm-0003",), costs_set=True))
    event = collector.tally() - before
    assert (event.cut, event.cut_without_drain, event.cut_without_drain_or_costs) == (
        0, in_flight["llm-0001"], in_flight["llm-0003"])
    assert collector.draining() == ("llm-0001",) and _in_flight(url)["llm-0001"] == in_flight["llm-0001"]
    collector.update(30.0, pods, 0.5)  # a stale read still names it: far more arrive than it holds
    during = samples(fetch(url))
    so_far = (collector.tally() - before).drained
    assert 0 < so_far < in_flight["llm-0001"], so_far  # it serves on, and not all at once
    assert _in_flight(url)["llm-0001"] == in_flight["llm-0001"] - so_far  # none of the new ones went to it
    assert _by_pod(during, SUCCESS)["llm-0001"] == successes["llm-0001"] + so_far  # its series count them
    assert _by_pod(during, f"{TTFT}_count")["llm-0001"] == successes["llm-0001"] + so_far
    for _ in range(60):  # a second at a time, as the demo's driver ticks, until it has drained
        if not collector.draining():
            break
        collector.update(18.0, pods[1:], 1.0)
    assert collector.draining() == () and set(_in_flight(url)) == {"llm-0002", "llm-0003"}  # its series end
    drained = collector.tally() - before
    assert (drained.cut, drained.drained) == (0, in_flight["llm-0001"])


@pytest.mark.parametrize("served", [2.0], indirect=True, ids=["2 s drain"])
def test_what_a_draining_replica_has_not_finished_when_its_grace_period_ends_is_cut(
        served: tuple[BatchingServerCollector, str]) -> None:
    """Requests of up to 960 tokens take seconds: a 2 s grace period ends with some of them unfinished."""
    collector, url = served
    pods = ["llm-0001", "llm-0002", "llm-0003"]
    collector.update(18.0, pods, 30.0)
    removed = _in_flight(url)["llm-0001"]
    before = collector.tally()
    collector.scale_down(ScaleDown(removed=("llm-0001",), without_costs=("llm-0003",)))
    collector.update(18.0, pods[1:], 1.0)
    assert collector.draining() == ("llm-0001",) and (collector.tally() - before).cut == 0  # within grace
    collector.update(18.0, pods[1:], 1.0)  # the grace period ends
    after = collector.tally() - before
    assert collector.draining() == () and "llm-0001" not in _in_flight(url)
    assert after.cut > 0 and after.drained > 0 and after.cut + after.drained == removed, (after, removed)


@pytest.mark.parametrize("drain", [-1.0, float("nan")], ids=["negative", "nan"])
def test_a_grace_period_that_is_no_duration_is_refused_at_construction(drain: float) -> None:
    with pytest.raises(ValueError, match="drain_seconds"):
        BatchingServerCollector(load_profile(), "ml", drain_seconds=drain)
