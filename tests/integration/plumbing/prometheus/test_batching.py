"""Batched queries against a real Prometheus: every query's result (value, reason, message) is the one it
gives sent alone, whatever else shares its batch.

Prometheus scrapes itself (counters, a classic histogram) and a target of fixed gauges, and records one rule.
Queries that read data are pinned with `@ T` to a moment already scraped, so a result cannot change between
the per-query run and the batched one; the few unpinned ones (`vector(0)`, `count(up)`) are stable.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass

import pytest
import requests
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from prometheus_client import CollectorRegistry, Gauge, start_http_server

from demo.processes import ManagedProcess, free_port, start_prometheus
from plumbing.prometheus.runner import PromQLRunner, PromQLSettings
from tests.support import wait_for

pytestmark = pytest.mark.integration

RULES = """
groups:
  - name: recorded
    interval: 1s
    rules:
      - record: recorded:test_value:sum
        expr: sum(test_value)
"""


@dataclass
class Server:
    process: ManagedProcess
    at: float
    """A moment every series already had samples for 5 s before."""


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    registry = CollectorRegistry()
    gauge = Gauge("test_value", "fixed values", ["k"], registry=registry)
    other = Gauge("test_other", "same labels as test_value", ["k"], registry=registry)
    for k, v in {"a": 1.5, "b": 2.0, "c": -4.0, "nan": float("nan"), "inf": float("inf")}.items():
        gauge.labels(k=k).set(v)
        other.labels(k=k).set(10.0)
    port = free_port()
    http, thread = start_http_server(port, addr="127.0.0.1", registry=registry)
    workdir = tmp_path_factory.mktemp("prometheus")
    config: dict[str, object] = {
        "global": {"scrape_interval": "200ms", "evaluation_interval": "1s"},
        "scrape_configs": [{"job_name": "target", "static_configs": [{"targets": [f"127.0.0.1:{port}"]}]}],
    }
    process = start_prometheus(config, rule_files={"recorded.yml": RULES}, workdir=workdir)
    try:
        url = process.url
        # scrape itself too (its port is known only now): counters and classic histograms of its own
        config["scrape_configs"] = [*config["scrape_configs"],  # type: ignore[misc]
                                    {"job_name": "prometheus",
                                     "static_configs": [{"targets": [url.removeprefix("http://")]}]}]
        config["rule_files"] = ["recorded.yml"]
        (workdir / "prometheus.yml").write_text(yaml.safe_dump(config, sort_keys=False))
        requests.post(f"{url}/-/reload", timeout=5).raise_for_status()

        def ready() -> bool:
            answer = requests.get(f"{url}/api/v1/query", params={"query": "count(up) == 2 and "
                                  "count(recorded:test_value:sum)"}, timeout=2).json()
            return bool(answer["data"]["result"])

        wait_for(ready, 30, "both targets scraped and the recording rule evaluated")
        ready_at = time.time()
        wait_for(lambda: time.time() > ready_at + 6, 10, "6 s of samples")
        yield Server(process, round(time.time() - 0.5, 3))
    finally:
        process.stop()
        http.shutdown()
        http.server_close()
        thread.join(timeout=5)


def queries(at: float) -> st.SearchStrategy[str]:
    pin = f"@ {at}"
    selectors = [f"test_value {pin}", f'test_value{{k="a"}} {pin}', f'test_value{{k=~"a|b"}} {pin}',
                 f'test_value{{k="missing"}} {pin}', f'test_value{{k="nan"}} {pin}',
                 f'test_value{{k="inf"}} {pin}',
                 f"up {pin}", f"recorded:test_value:sum {pin}", f'test_value{{k="b"}} offset 1s {pin}',
                 f"scrape_duration_seconds {pin}"]
    fixed = [
        "vector(0)", "1", "0/0", "1/0", "-1/0", "count(up)", "scalar(vector(3))", "2 * 3 > bool 5",
        f'scalar(test_value{{k="a"}} {pin})', f"scalar(test_value {pin})", "time() - time() + 4",
        f"rate(scrape_samples_scraped[3s] {pin})", f"sum by (k) (test_value {pin})",
        "histogram_quantile(0.9, sum by (le) "
        f"(rate(prometheus_http_request_duration_seconds_bucket[3s] {pin})))",
        f"histogram_quantile(0.5, test_value {pin})",
        f'label_replace(test_value{{k="a"}} {pin}, "k", "b", "", "")',
        # bad ones: offline syntax errors (sent alone), a range vector, a string, and evaluation errors
        "sum(test_value", f"up[5s] {pin}", '"text"', f"test_value {pin} + on() test_value {pin}",
        f'rate({{__name__=~"test_value|test_other"}}[3s] {pin})',
        f'label_replace(test_value {pin}, "k", "same", "", "")',
    ]
    selector = st.sampled_from(selectors)
    built = st.one_of(
        selector,
        st.builds(lambda f, s: f"{f}({s})", st.sampled_from(["sum", "avg", "max", "count", "abs"]),
                  selector),
        st.builds(lambda a, op, b: f"{a} {op} {b}", selector,
                  st.sampled_from(["+", "/", "or", "and", "unless"]),
                  st.one_of(selector, st.sampled_from(["1", "0"]))),
    )
    return st.one_of(st.sampled_from(fixed), built)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data(), batch_size=st.sampled_from([2, 3, 7, 100]))
def test_batched_results_are_those_of_single_queries(server: Server, data: st.DataObject,
                                                     batch_size: int) -> None:
    asked = data.draw(st.lists(queries(server.at), min_size=1, max_size=25), label="queries")
    single = PromQLRunner(PromQLSettings(server.process.url, query_timeout=5.0, budget=20.0))
    batched = PromQLRunner(PromQLSettings(server.process.url, query_timeout=5.0, budget=20.0,
                                          batch_size=batch_size))
    try:
        alone = single.run_queries(asked)
        together = batched.run_queries(asked)
    finally:
        single.close()
        batched.close()
    assert together == alone
    assert batched.requests_sent <= single.requests_sent * 3  # halving costs a few requests, never many


def test_a_batch_is_one_request_and_every_reason_comes_out(server: Server) -> None:
    pin = f"@ {server.at}"
    asked = [f'test_value{{k="a"}} {pin}', f"test_value {pin}", f'test_value{{k="missing"}} {pin}',
             f'test_value{{k="nan"}} {pin}', f'test_value{{k="inf"}} {pin}', "1", "vector(0)"]
    runner = PromQLRunner(PromQLSettings(server.process.url, batch_size=100))
    try:
        results = runner.run_queries(asked)
    finally:
        runner.close()
    assert [(r.value, r.error_reason) for r in results.values()] == [
        (1.5, None), (None, "MultipleSeries"), (None, "NoSeries"), (None, "NaN"), (None, "Inf"), (1.0, None),
        (0.0, None)]
    assert runner.requests_sent == 1
