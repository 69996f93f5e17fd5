"""The PromQL runner against malformed and failing answers injected at the HTTP layer (`responses`)."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
import requests
import responses

from plumbing.prometheus.runner import PromQLRunner, PromQLSettings, QueryResult, interpret
from tests.clock import ManualClock

URL = "http://prometheus.test:9090"
QUERY_URL = f"{URL}/api/v1/query"


def vector(*values: str) -> dict[str, object]:
    return {
        "status": "success",
        "data": {
            "resultType": "vector",
            "result": [{"metric": {"i": str(i)}, "value": [1700000000.0, v]} for i, v in enumerate(values)],
        },
    }


@pytest.fixture
def runner() -> Iterator[PromQLRunner]:
    r = PromQLRunner(PromQLSettings(URL, query_timeout=0.5, budget=2.0, max_attempts=3, backoff_initial=0.01))
    yield r
    r.close()


def body(result: object, kind: str = "vector") -> dict[str, object]:
    return {"status": "success", "data": {"resultType": kind, "result": result}}


@pytest.mark.parametrize(
    ("answer", "expected"),
    [
        (body([{"metric": {}, "value": [1.0, "42.5"]}]), QueryResult(42.5)),
        (body([1.0, "7"], "scalar"), QueryResult(7.0)),
        (body([]), "NoSeries"),
        (body([{"metric": {}, "value": [1.0, "1"]}, {"metric": {}, "value": [1.0, "2"]}]), "MultipleSeries"),
        (body([{"metric": {}, "value": [1.0, "NaN"]}]), "NaN"),
        (body([{"metric": {}, "value": [1.0, "+Inf"]}]), "Inf"),
        (body([{"metric": {}, "value": [1.0, "-Inf"]}]), "Inf"),
        (body([{"metric": {}, "values": [[1.0, "1"]]}], "matrix"), "BadQuery"),
        (body([{"metric": {}, "value": [1.0, "abc"]}]), "BadAnswer"),
        ({"unexpected": 1}, "BadAnswer"),
    ],
    ids=["one", "scalar", "none", "several", "nan", "inf", "-inf", "matrix", "text", "malformed"],
)
def test_interpret(answer: object, expected: QueryResult | str) -> None:
    got = interpret(answer)
    if isinstance(expected, QueryResult):
        assert got == expected
    else:
        assert (got.value, got.error_reason) == (None, expected)
        assert got.error


@responses.activate
def test_one_request_per_distinct_query(runner: PromQLRunner) -> None:
    responses.get(QUERY_URL, json=vector("3"))
    results = runner.run_queries(["a", "b", "a", "a", "b"])
    assert set(results) == {"a", "b"}
    assert all(r.value == 3.0 for r in results.values())
    assert len(responses.calls) == 2 and runner.requests_sent == 2
    sent = sorted(
        requests.utils.unquote(c.request.url or "").split("query=")[1].split("&")[0] for c in responses.calls
    )
    assert sent == ["a", "b"]
    assert all("timeout=" in (c.request.url or "") for c in responses.calls)


@responses.activate
def test_5xx_is_retried_then_succeeds(runner: PromQLRunner) -> None:
    responses.get(
        QUERY_URL, status=503, json={"status": "error", "errorType": "unavailable", "error": "busy"}
    )
    responses.get(QUERY_URL, json=vector("5"))
    assert runner.run_queries(["q"])["q"] == QueryResult(5.0)
    assert len(responses.calls) == 2


@responses.activate
def test_persistent_500_gives_httperror_after_max_attempts(runner: PromQLRunner) -> None:
    responses.get(QUERY_URL, status=500, body="internal")
    result = runner.run_queries(["q"])["q"]
    assert (result.value, result.error_reason) == (None, "HTTPError")
    assert "500" in (result.error or "")
    assert len(responses.calls) == 3


@responses.activate
def test_bad_query_is_not_retried(runner: PromQLRunner) -> None:
    responses.get(
        QUERY_URL,
        status=400,
        json={
            "status": "error",
            "errorType": "bad_data",
            "error": "1:5: parse error: unexpected end of input",
        },
    )
    result = runner.run_queries(["sum("])["sum("]
    assert result.error_reason == "BadQuery" and "parse error" in (result.error or "")
    assert len(responses.calls) == 1


@responses.activate
def test_prometheus_evaluation_timeout_is_timeout(runner: PromQLRunner) -> None:
    body = {"status": "error", "errorType": "timeout", "error": "query timed out in expression evaluation"}
    responses.get(QUERY_URL, status=503, json=body)
    result = runner.run_queries(["q"])["q"]
    assert result.error_reason == "Timeout"


@responses.activate
def test_malformed_json_is_badanswer(runner: PromQLRunner) -> None:
    responses.get(QUERY_URL, body="<html>proxy error</html>", content_type="text/html")
    result = runner.run_queries(["q"])["q"]
    assert result.error_reason == "BadAnswer" and "malformed" in (result.error or "")


@responses.activate
def test_missing_data_key_is_badanswer(runner: PromQLRunner) -> None:
    responses.get(QUERY_URL, body=json.dumps({"status": "success"}))
    assert runner.run_queries(["q"])["q"].error_reason == "BadAnswer"


@responses.activate
def test_client_timeout_and_connection_errors(runner: PromQLRunner) -> None:
    responses.get(
        QUERY_URL,
        body=requests.ReadTimeout("read timed out"),
        match=[responses.matchers.query_param_matcher({"query": "slow"}, strict_match=False)],
    )
    responses.get(
        QUERY_URL,
        body=requests.ConnectionError("refused"),
        match=[responses.matchers.query_param_matcher({"query": "down"}, strict_match=False)],
    )
    results = runner.run_queries(["slow", "down"])
    assert results["slow"].error_reason == "Timeout"
    assert results["down"].error_reason == "Unreachable"
    assert runner.requests_sent == 6  # 3 attempts each


@responses.activate
def test_retries_stop_at_the_sync_budget() -> None:
    # backoff 0.4 s doubling, budget 0.6 s: the second retry would overrun, so 2 attempts. On a clock the
    # backoff moves, not the machine's: a busy machine must not decide how many attempts fit
    clock = ManualClock(1000.0)
    r = PromQLRunner(PromQLSettings(URL, query_timeout=0.5, budget=0.6, max_attempts=10, backoff_initial=0.4),
                     monotonic=clock, sleep=clock.advance)
    responses.get(QUERY_URL, body=requests.ConnectionError("refused"))
    try:
        result = r.run_queries(["q"])["q"]
    finally:
        r.close()
    assert result.error_reason == "Unreachable"
    assert len(responses.calls) == 2
    assert clock() - 1000.0 < 0.6  # slept 0.4 s, never past the budget


def test_invalid_settings_fail_at_construction() -> None:
    with pytest.raises(ValueError, match="budget"):
        PromQLRunner(PromQLSettings(URL, budget=0))


@responses.activate
def test_controller_reports_prometheus_errors_end_to_end() -> None:
    """A Prometheus answering 503 through the real runner: failed metric, Warning event, error counter."""
    from autoscaler.controller.loop import Controller
    from tests.clock import T0, ManualClock
    from tests.rules import ref, rule, ruleset
    from tests.unit.autoscaler.controller.fakes import FakeBackend

    responses.get(
        QUERY_URL, status=503, json={"status": "error", "errorType": "unavailable", "error": "busy"}
    )
    backend = FakeBackend()
    backend.add(ref(), 3)
    runner = PromQLRunner(PromQLSettings(URL, query_timeout=0.5, budget=1.0, backoff_initial=0.01))
    c = Controller(backend, runner, ruleset(rule()), ManualClock(T0))
    try:
        outcome = c.sync_once().outcomes[0]
    finally:
        c.close()
        runner.close()
    assert outcome.reason == "MetricsFailed" and backend.patches == []
    assert backend.reasons() == ["FailedGetMetrics"] and "HTTPError: HTTP 503: busy" in backend.events[0][3]
    text = c.metrics.exposition().decode()
    assert 'gpu_autoscaler_query_errors_total{metric="util",reason="HTTPError",rule="svc"} 1.0' in text


def test_the_hint_of_each_failure_fits_it() -> None:
    """An empty result cannot be fixed by aggregating it (sum() of nothing is nothing); several series can."""
    none = interpret(body([])).error or ""
    several = interpret(body([{"metric": {}, "value": [1.0, "1"]}] * 2)).error or ""
    assert "sum()" not in none and "selector" in none and "whenEmpty: zero" in none
    assert "sum() or avg()" in several
