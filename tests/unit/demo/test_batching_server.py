"""The per-request emulated LLM server behind a real HTTP endpoint: vLLM's series per ready pod, read from
each replica's own batch and KV cache; histograms of each request's TTFT and inter-token latency that only
grow; the requests in flight on a pod that goes away counted as cut."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from wsgiref.simple_server import WSGIServer, make_server

import pytest
from prometheus_client import CollectorRegistry, make_wsgi_app

from demo.cluster import ScaleDown
from demo.llm_server import ITL, KV_CACHE, RUNNING, SUCCESS, TTFT, WAITING, BatchingServerCollector
from demo.serving_profile import load_profile
from tests.scrape import Samples, fetch, samples


@pytest.fixture
def served() -> Iterator[tuple[BatchingServerCollector, str]]:
    collector = BatchingServerCollector(load_profile(), "ml")
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
    assert (tally.cut, tally.cut_without_costs, tally.scale_downs) == (0, 0, 0)
    collector.update(60.0, ["llm-0001"], 60.0)  # llm-0002 went away; one replica far past its capacity
    later = collector.tally() - tally
    assert later.cut > 0 and later.met < later.finished  # the overload misses the objective


def test_a_scale_down_cuts_the_removed_replicas_requests_and_counts_those_the_default_order_would_have_cut(
        served: tuple[BatchingServerCollector, str]) -> None:
    collector, url = served
    pods = ["llm-0001", "llm-0002", "llm-0003"]
    collector.update(18.0, pods, 30.0)
    in_flight = {pod: running + waiting for (pod, running), waiting in zip(
        _by_pod(samples(fetch(url)), RUNNING).items(), _by_pod(samples(fetch(url)), WAITING).values(),
        strict=True)}
    assert all(count > 0 for count in in_flight.values()), in_flight
    before = collector.tally()
    collector.scale_down(ScaleDown(removed=("llm-0001",), without_costs=("llm-0003",), costs_set=True))
    event = collector.tally() - before
    assert (event.cut, event.cut_without_costs) == (in_flight["llm-0001"], in_flight["llm-0003"])
    assert (event.scale_downs, event.scale_downs_with_costs, event.finished) == (1, 1, 0)
    collector.update(18.0, pods, 1.0)  # a driver tick that read the Deployment before the scale-down
    assert set(_by_pod(samples(fetch(url)), RUNNING)) == {"llm-0002", "llm-0003"}  # llm-0001 never returns
    assert collector.tally().cut == event.cut
