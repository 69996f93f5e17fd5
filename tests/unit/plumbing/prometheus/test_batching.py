"""Batched queries (`batching` and the runner's batches) against a fake Prometheus at the HTTP layer.

The fake evaluates a batch the way Prometheus does: it reads back each wrapped query and its index, answers
every query's series with the index label added, and fails the whole batch (HTTP 400) when one query in it is
bad. Each test compares the batched results with what the same queries give sent alone.
"""

from __future__ import annotations

import json
import re
import urllib.parse
from collections.abc import Collection, Iterator

import promql_parser
import pytest
import requests
import responses

from autoscaler.cli.main import build_parser
from autoscaler.config.rules import parse_rules
from autoscaler.controller.sources import EndpointSources
from autoscaler.errors import RulesError
from plumbing.prometheus.answer import BadAnswer
from plumbing.prometheus.batching import BATCH_LABEL, Batch, Form, batch_form, plan, split_answer
from plumbing.prometheus.runner import PromQLRunner, PromQLSettings, QueryResult

URL = "http://prometheus.test:9090"
QUERY_URL = f"{URL}/api/v1/query"
T = 1700000000.0
WRAPPED = re.compile(r'label_replace\((.*), "' + BATCH_LABEL + r'", "(\d+)", "", ""\)', re.S)

# query -> its series (label dicts with a value), a scalar ("scalar", value), or "bad" (HTTP 400 alone)
Answer = list[tuple[dict[str, str], str]] | tuple[str, str] | str
TABLE: dict[str, Answer] = {
    "one": [({"job": "a"}, "1.5")],
    "two": [({"job": "a"}, "1"), ({"job": "b"}, "2")],
    "none": [],
    "nan_series": [({}, "NaN")],
    "inf_series": [({"x": "y"}, "-Inf")],
    "named": [({"__name__": "up", "job": "p"}, "7")],
    "1 + 1": ("scalar", "2"),
    "scalar(one)": ("scalar", "1.5"),
    "bad_selector{": "bad",
    "sum(x": "bad",
    "fails_in_prometheus": "bad",  # parses offline, refused by the server (e.g. an evaluation error)
}


def _series(labels: dict[str, str], value: str) -> dict[str, object]:
    return {"metric": labels, "value": [T, value]}


def _alone(query: str) -> tuple[int, dict[str, object]]:
    answer = TABLE[query]
    if answer == "bad":
        return 400, {"status": "error", "errorType": "bad_data", "error": f"parse error in {query}"}
    if isinstance(answer, tuple):
        return 200, {"status": "success", "data": {"resultType": "scalar", "result": [T, answer[1]]}}
    assert isinstance(answer, list)
    return 200, {"status": "success", "data": {"resultType": "vector",
                                                "result": [_series(labels, v) for labels, v in answer]}}


def _batch(text: str) -> tuple[int, dict[str, object]]:
    result = []
    for part in text.split("\nor\n"):
        while part.startswith("(\n"):  # the balanced tree's own parentheses, on lines of their own
            part = part[2:]
        while part.endswith("\n)"):
            part = part[:-2]
        match = WRAPPED.fullmatch(part)
        assert match, part
        inner, index = match.groups()
        scalar = inner.startswith("vector(") and inner.endswith("\n)")
        query = inner[len("vector("):-2] if scalar else inner.removesuffix("\n")
        answer = TABLE[query]
        if answer == "bad":
            return 400, {"status": "error", "errorType": "bad_data", "error": "parse error"}
        if isinstance(answer, tuple):
            assert scalar, f"{query} is a scalar: it must be wrapped in vector()"
            answer = [({}, answer[1])]
        assert isinstance(answer, list)
        result += [_series({**labels, BATCH_LABEL: index}, v) for labels, v in answer]
    return 200, {"status": "success", "data": {"resultType": "vector", "result": result}}


class FakePrometheus:
    def __init__(self) -> None:
        self.batches: list[int] = []
        self.singles: list[str] = []
        self.fail_batches_with: int | None = None

    def get(self, request: requests.PreparedRequest) -> tuple[int, dict[str, str], str]:
        query = urllib.parse.parse_qs(urllib.parse.urlsplit(request.url or "").query)["query"][0]
        self.singles.append(query)
        status, body = _alone(query)
        return status, {}, json.dumps(body)

    def post(self, request: requests.PreparedRequest) -> tuple[int, dict[str, str], str]:
        assert request.headers["Content-Type"] == "application/x-www-form-urlencoded"
        raw = request.body.decode() if isinstance(request.body, bytes) else str(request.body)
        text = urllib.parse.parse_qs(raw)["query"][0]
        self.batches.append(text.count("\nor\n") + 1)
        if self.fail_batches_with is not None:
            return self.fail_batches_with, {}, "{}"
        status, body = _batch(text)
        return status, {}, json.dumps(body)


@pytest.fixture
def fake() -> Iterator[FakePrometheus]:
    server = FakePrometheus()
    with responses.RequestsMock(assert_all_requests_are_fired=False) as mock:
        mock.add_callback(responses.GET, QUERY_URL, callback=server.get)
        mock.add_callback(responses.POST, QUERY_URL, callback=server.post)
        yield server


def runner(batch_size: int) -> PromQLRunner:
    return PromQLRunner(PromQLSettings(URL, query_timeout=0.5, budget=3.0, max_attempts=2,
                                       backoff_initial=0.01, batch_size=batch_size))


def both(queries: list[str], batch_size: int = 100,
         alone: tuple[str, ...] = ()) -> tuple[dict[str, QueryResult], dict[str, QueryResult]]:
    single, batched = runner(0), runner(batch_size)
    try:
        return single.run_queries(queries), batched.run_queries(queries, alone)
    finally:
        single.close()
        batched.close()


GOOD = ["one", "two", "none", "nan_series", "inf_series", "named", "1 + 1", "scalar(one)"]


def test_batched_results_equal_single_ones(fake: FakePrometheus) -> None:
    single, batched = both(GOOD)
    assert batched == single
    assert single["two"].error_reason == "MultipleSeries" and "job=\"a\"" in (single["two"].error or "")
    assert BATCH_LABEL not in (batched["two"].error or "")
    assert single["1 + 1"] == QueryResult(2.0)
    assert fake.batches == [len(GOOD)]  # one POST for all of them
    assert len(fake.singles) == len(GOOD)  # from the per-query runner only


def test_batches_are_bounded_in_queries(fake: FakePrometheus) -> None:
    queries = GOOD * 3  # duplicates are sent once
    single, batched = both(queries, batch_size=3)
    assert batched == single
    assert sorted(fake.batches) == [2, 3, 3]


def test_one_bad_query_falls_back_to_halves_and_fails_alone(fake: FakePrometheus) -> None:
    queries = [*GOOD, "fails_in_prometheus"]
    single, batched = both(queries)
    assert batched == single
    assert batched["fails_in_prometheus"].error_reason == "BadQuery"
    assert all(batched[q] == single[q] for q in GOOD)
    assert fake.batches[0] == len(queries)
    assert len(fake.batches) < 2 * len(queries)


@pytest.mark.parametrize("status", [413, 422, 500])
def test_every_failing_batch_ends_as_single_queries(fake: FakePrometheus, status: int) -> None:
    fake.fail_batches_with = status
    single, batched = both(GOOD)
    assert batched == single


def test_queries_not_batched_go_alone_unwrapped(fake: FakePrometheus) -> None:
    _, batched = both(["one", "two", "bad_selector{"])  # does not parse: sent alone, its own error
    assert batched["bad_selector{"].error_reason == "BadQuery"
    assert fake.batches == [2]
    assert fake.singles.count("bad_selector{") == 2  # once per runner


def test_rules_that_opt_out_are_sent_alone(fake: FakePrometheus) -> None:
    single, batched = both(GOOD, alone=("one", "two"))
    assert batched == single
    assert fake.batches == [len(GOOD) - 2]
    assert fake.singles.count("one") == 2


def test_batch_size_zero_or_one_never_posts(fake: FakePrometheus) -> None:
    for size in (0, 1):
        r = runner(size)
        try:
            r.run_queries(GOOD)
        finally:
            r.close()
    assert fake.batches == []


@pytest.mark.parametrize(
    ("query", "form"),
    [
        ("up", Form.VECTOR), ('sum by (job) (rate(x[5m]))', Form.VECTOR), ("up @ 100 offset 1m", Form.VECTOR),
        ("1", Form.SCALAR), ("time()", Form.SCALAR), ("scalar(up) * 2", Form.SCALAR), ("-(1)", Form.SCALAR),
        ("vector(0)", Form.VECTOR), ("up + 1", Form.VECTOR), ("0/0", Form.SCALAR),
        ("up[5m]", None), ('"text"', None), ("up[5m:1m]", None), ("sum(up", None),
        (f'up{{{BATCH_LABEL}="1"}}', None), ("(" * 100 + "up" + ")" * 100, None),
        ("up" + " + up" * 200, None),
    ],
    ids=lambda v: str(v)[:30],
)
def test_batch_form(query: str, form: Form | None) -> None:
    assert batch_form(query) is form


def test_plan_caps_bytes_and_leaves_a_lone_query_unwrapped() -> None:
    queries = [f"x{i}" + " " * 1000 for i in range(5)]
    packed = plan(queries, {}, size=100, max_bytes=2200)
    assert [len(b.queries) for b in packed.batches] == [2, 2]
    assert packed.alone == (queries[4],)


def or_depth(expr: object) -> int:
    """How many `or` a leaf of the parsed batch sits under, at most."""
    if isinstance(expr, promql_parser.ParenExpr):
        return or_depth(expr.expr)
    if isinstance(expr, promql_parser.BinaryExpr) and str(expr.op) == "or":
        return 1 + max(or_depth(expr.lhs), or_depth(expr.rhs))
    return 0


@pytest.mark.parametrize(("count", "depth"), [(1, 0), (2, 1), (5, 3), (100, 7)])
def test_a_batch_is_a_balanced_or_tree(count: int, depth: int) -> None:
    """Prometheus' cost of a chain `a or b or c ...` grows with the square of its length; the balanced tree's
    depth is log2 of the batch, which the chain's would be count - 1."""
    batch = Batch(tuple(f'up{{i="{i}"}} # {i}' for i in range(count)), (Form.VECTOR,) * count)
    assert or_depth(promql_parser.parse(batch.text)) == depth


def test_split_refuses_series_without_a_valid_index() -> None:
    batch = Batch(("a", "b"), (Form.VECTOR, Form.VECTOR))
    for labels in ({}, {BATCH_LABEL: "2"}, {BATCH_LABEL: "x"}, {BATCH_LABEL: "\u00b2"}):
        body = {"status": "success", "data": {"resultType": "vector", "result": [_series(labels, "1")]}}
        with pytest.raises(BadAnswer):
            split_answer(body, batch)
    with pytest.raises(BadAnswer):
        split_answer({"status": "success", "data": {"resultType": "scalar", "result": [T, "1"]}}, batch)


def test_a_comment_at_the_end_of_a_query_does_not_swallow_the_wrapper() -> None:
    text = Batch(("up # the comment", "1"), (Form.VECTOR, Form.SCALAR)).text
    assert "up # the comment\n," in text and "vector(1\n)" in text


RULES_YAML = """
rules:
  - name: batched
    target: {kind: Deployment, namespace: ns, name: a}
    maxReplicas: 5
    metrics: [{name: m, query: one, type: Total, target: 1}]
  - name: alone
    batch: false
    target: {kind: Deployment, namespace: ns, name: b}
    maxReplicas: 5
    metrics: [{name: m, query: two, type: Total, target: 1}, {name: n, query: one, type: Total, target: 1}]
"""


class RecordingSource:
    def __init__(self) -> None:
        self.calls: list[tuple[set[str], set[str]]] = []

    def run_queries(self, queries: Collection[str], alone: Collection[str] = ()) -> dict[str, QueryResult]:
        self.calls.append((set(queries), set(alone)))
        return dict.fromkeys(queries, QueryResult(1.0))


def test_a_rule_with_batch_false_sends_its_queries_alone() -> None:
    rules = parse_rules(RULES_YAML, "rules.yaml").rules
    assert [r.batch for r in rules] == [True, False]
    source = RecordingSource()
    EndpointSources(source).run(rules)
    assert source.calls == [({"one", "two"}, {"one", "two"})]  # `one` is asked by an opted-out rule too
    EndpointSources(source).run(rules[:1])
    assert source.calls[-1] == ({"one"}, set())


def test_batch_must_be_a_boolean() -> None:
    with pytest.raises(RulesError, match=r"rules\[1\]\.batch: expected true or false"):
        parse_rules(RULES_YAML.replace("batch: false", "batch: 'no'"), "rules.yaml")


@pytest.mark.parametrize(("argv", "expected"), [([], 100), (["--prometheus-batch-size", "0"], 0),
                                                (["--prometheus-batch-size", "7"], 7)])
def test_the_batch_size_flag(argv: list[str], expected: int) -> None:
    args = build_parser(["run"]).parse_args(["run", "--rules", "r.yaml", *argv])
    assert args.prometheus_batch_size == expected


def test_a_bad_batch_size_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        build_parser(["run"]).parse_args(["run", "--rules", "r.yaml", "--prometheus-batch-size", "-1"])
    assert "expected an integer from 0 to 1000" in capsys.readouterr().err
