"""Per-series answers (`run_series`, `series_values`): each series' value by a label, the odd series left out,
an answer that is not a vector or a failed request one error, never a raise."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import responses

from plumbing.prometheus.answer import BadAnswer
from plumbing.prometheus.runner import PromQLRunner, PromQLSettings
from plumbing.prometheus.series import series_values

URL = "http://prometheus.test:9090"
QUERY_URL = f"{URL}/api/v1/query"


def vector(*series: tuple[dict[str, str], str]) -> dict[str, object]:
    return {"status": "success", "data": {"resultType": "vector", "result": [
        {"metric": labels, "value": [1700000000.0, value]} for labels, value in series]}}


@pytest.fixture
def runner() -> Iterator[PromQLRunner]:
    r = PromQLRunner(PromQLSettings(URL, query_timeout=0.5, budget=2.0, max_attempts=3, backoff_initial=0.01))
    yield r
    r.close()


def test_values_by_label_summed_per_value_odd_series_left_out() -> None:
    got = series_values(vector(({"pod": "a"}, "3"), ({"pod": "b"}, "0"), ({"pod": "a"}, "2"),
                               ({"job": "x"}, "9"), ({"pod": "c"}, "NaN"), ({"pod": ""}, "1")), "pod")
    assert (dict(got.values), got.skipped, got.ok) == ({"a": 5.0, "b": 0.0}, 3, True)


@pytest.mark.parametrize("answer", [
    {"status": "success", "data": {"resultType": "scalar", "result": [1.0, "1"]}},
    {"status": "success", "data": {"resultType": "vector", "result": [{"metric": {"pod": "a"}, "value": 3}]}},
    {"status": "success", "data": {"resultType": "vector", "result": ["a"]}},
    {"status": "error"},
])
def test_a_shape_prometheus_never_sends_is_a_bad_answer(answer: object) -> None:
    with pytest.raises(BadAnswer):
        series_values(answer, "pod")


@responses.activate
def test_run_series_retries_a_5xx_then_reads_the_series(runner: PromQLRunner) -> None:
    busy = {"status": "error", "errorType": "unavailable", "error": "busy"}
    responses.get(QUERY_URL, status=503, json=busy)
    responses.get(QUERY_URL, json=vector(({"pod": "a"}, "4")))
    got = runner.run_series("sum by (pod) (x)", "pod")
    assert (dict(got.values), got.error, len(responses.calls)) == ({"a": 4.0}, None, 2)


@responses.activate
@pytest.mark.parametrize(("status", "answer", "reason"), [
    (400, {"status": "error", "errorType": "bad_data", "error": "parse error"}, "BadQuery"),
    (200, {"status": "success", "data": {"resultType": "matrix", "result": []}}, "BadAnswer"),
    (200, {"status": "success"}, "BadAnswer"),
])
def test_run_series_tells_a_failure_in_its_error(runner: PromQLRunner, status: int, answer: object,
                                                 reason: str) -> None:
    responses.get(QUERY_URL, status=status, json=answer)
    got = runner.run_series("q", "pod")
    assert not got.ok and got.values == {}
    assert (got.error or "").startswith(f"{reason}: ")
