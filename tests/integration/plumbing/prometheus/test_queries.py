"""The PromQL runner against a real Prometheus scraping a target whose values the tests set."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from demo.processes import free_port
from plumbing.prometheus.config import endpoint_from_url
from plumbing.prometheus.range_query import RangeSettings, query_range
from plumbing.prometheus.runner import PromQLRunner, PromQLSettings
from plumbing.prometheus.session import EndpointSession
from tests.prom import Prom
from tests.support import wait_for

pytestmark = pytest.mark.integration


@pytest.fixture
def runner(prom: Prom) -> Iterator[PromQLRunner]:
    r = PromQLRunner(PromQLSettings(prom.url, query_timeout=2.0, budget=4.0, backoff_initial=0.05))
    yield r
    r.close()


def test_values_and_failure_reasons(prom: Prom, runner: PromQLRunner) -> None:
    t = prom.target
    t.set("a", 42.5)
    t.set("b", 1.0)
    t.set("nan", float("nan"))
    t.set("inf", float("inf"))
    prom.wait_value('test_load{series="a"}', 42.5)
    prom.wait_value('test_load{series="inf"}', float("inf"))
    prom.wait_value('test_load{series="nan"}', float("nan"))
    queries = {
        'test_load{series="a"}': (42.5, None),
        'sum(test_load{series=~"a|b"})': (43.5, None),
        'scalar(test_load{series="a"})': (42.5, None),
        'test_load{series=~"a|b"}': (None, "MultipleSeries"),
        'test_load{series="missing"}': (None, "NoSeries"),
        'test_load{series="nan"}': (None, "NaN"),
        'test_load{series="inf"}': (None, "Inf"),
        "sum(test_load": (None, "BadQuery"),
        'test_load{series="a"}[1m]': (None, "BadQuery"),
        'test_load{series="a"} + on() group_left test_load': (None, "BadQuery"),
    }
    results = runner.run_queries(list(queries))
    got = {q: (r.value, r.error_reason) for q, r in results.items()}
    assert got == queries
    assert "parse error" in (results["sum(test_load"].error or "")


def test_staleness_makes_a_vanished_series_no_series(prom: Prom, runner: PromQLRunner) -> None:
    prom.target.set("stale", 3.0)
    query = 'test_load{series="stale"}'
    prom.wait_value(query, 3.0)
    assert runner.run_queries([query])[query].value == 3.0
    prom.target.remove("stale")
    prom.wait_absent(query)  # Prometheus marks the series stale on the next scrape
    assert runner.run_queries([query])[query].error_reason == "NoSeries"


def test_each_distinct_query_reaches_prometheus_once(prom: Prom, runner: PromQLRunner) -> None:
    prom.target.set("a", 1.0)
    prom.wait_value('test_load{series="a"}', 1.0)
    queries = [f'test_load{{series="a"}} * {i % 7}' for i in range(70)]
    before, sent_before = prom.query_requests(), runner.requests_sent
    results = runner.run_queries(queries)
    assert len(results) == 7 and all(r.ok for r in results.values())
    # deterministic: the runner's own count of HTTP requests, one per distinct query (no retry was needed)
    assert runner.requests_sent - sent_before == 7
    # and Prometheus agrees; its counter is updated after each answer is written, hence a bounded wait
    wait_for(lambda: prom.query_requests() - before >= 7, 5, "Prometheus to count the 7 queries")
    assert prom.query_requests() - before == 7


def test_prometheus_down_is_unreachable() -> None:
    r = PromQLRunner(
        PromQLSettings(f"http://127.0.0.1:{free_port()}", query_timeout=1, budget=1, backoff_initial=0.05)
    )
    try:
        result = r.run_queries(["up"])["up"]
    finally:
        r.close()
    assert result.error_reason == "Unreachable"
    assert 1 < r.requests_sent <= 3  # retried within the budget


def test_slow_prometheus_times_out_within_the_budget(silent_server: int) -> None:
    r = PromQLRunner(
        PromQLSettings(
            f"http://127.0.0.1:{silent_server}", query_timeout=30.0, budget=1.0, backoff_initial=0.05
        )
    )
    started = time.monotonic()
    try:
        results = r.run_queries(["a", "b"])
    finally:
        r.close()
    elapsed = time.monotonic() - started
    assert {q: res.error_reason for q, res in results.items()} == {"a": "Timeout", "b": "Timeout"}
    # The budget, not the 30 s query timeout, ends the wait; the margin is for a loaded machine.
    assert elapsed < 1.0 + 5.0


def test_a_range_query_with_a_fractional_timeout_is_answered(prom: Prom) -> None:
    """Prometheus reads the `timeout` parameter as seconds or as its own duration, in which "1.6s" is no valid
    duration (a 400): the demo's syncs every 2 s give the controller's range reads a 1.6 s timeout."""
    prom.target.set("a", 3.0)
    prom.wait_value('test_load{series="a"}', 3.0)
    session = EndpointSession(endpoint_from_url(prom.url))
    try:
        now = time.time()
        series = query_range(session, 'test_load{series="a"}', now - 10.0, now, 1.0,
                             RangeSettings(timeout=1.6))
    finally:
        session.close()
    assert 3.0 in series.values.values()
