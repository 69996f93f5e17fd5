"""The per-request emulated LLM server behind a real HTTP endpoint: vLLM's series per ready pod, read from
each replica's own batch and KV cache; histograms of each request's TTFT and inter-token latency that only
grow; the requests in flight on a pod that goes away counted as cut."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from wsgiref.simple_server import WSGIServer, make_server

import pytest
from prometheus_client import CollectorRegistry, make_wsgi_app

from demo.llm_server import ITL, KV_CACHE, RUNNING, TTFT, WAITING, BatchingServerCollector
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
