"""PromQL runner: every distinct query of a sync sent once, concurrently, each bounded in time and size.

Prometheus answers become `QueryResult`s: exactly one finite sample is a value; anything else (no
series, several series, NaN, Inf, an HTTP error, a bad query, a malformed answer, a timeout, an unreachable
server) is a failed metric with a reason from `QueryErrorReason`, so the engine's failed-metric rules apply.
Nothing raises past this module. Transient failures are retried with tenacity (exponential backoff) while the
sync's time budget allows, so a sync never overruns its interval.

With `batch_size` > 1 the distinct queries are packed into few POST requests (`batching`) and each query's
result split back out and judged as if it had been sent alone. A batch that fails (a bad query in it, a
timeout, a too-large body or answer) is sent again as two halves, down to single queries, within the budget:
one bad query costs a few extra requests, never another query its value.

The instant query is sent with the endpoint's requests Session (`session`) directly rather than through
prometheus-api-client's `custom_query`: that returns only `data.result`, after reading a body of any size,
so the envelope (status, resultType) could not be validated, nor the body bounded in size and time.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
import time
from collections.abc import Callable, Collection, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

import requests
from tenacity import RetryCallState, Retrying, retry_if_exception, stop_after_attempt, wait_exponential
from tenacity.stop import stop_base

from plumbing.prometheus.answer import (
    BadAnswer,
    QueryErrorReason,
    QueryResult,
    auth_refusal,
    bad_answer,
    decode_body,
    error_of,
    failed,
    interpret_body,
)
from plumbing.prometheus.batching import Batch, Form, plan, split_answer
from plumbing.prometheus.config import Endpoint, PrometheusConfig, endpoint_from_url
from plumbing.prometheus.range_query import RangeSeries, RangeSettings, query_range
from plumbing.prometheus.series import SeriesValues, series_values
from plumbing.prometheus.session import (
    CredentialError,
    EndpointSession,
    ExchangeTimedOut,
    bounded_exchange,
    describe_failure,
    read_capped,
)

__all__ = ["MetricsSource", "PromQLRunner", "PromQLSettings", "QueryErrorReason", "QueryResult",
           "SeriesSource", "SeriesValues", "interpret", "runners"]

log = logging.getLogger(__name__)


@runtime_checkable
class HistorySource(Protocol):
    """A metrics source that can also read a query's past (`PromQLRunner`); tests' fakes need not."""

    def run_range(self, query: str, start: float, end: float, step: float) -> RangeSeries: ...


@runtime_checkable
class SeriesSource(Protocol):
    """A metrics source that can read a query's series one by one (`PromQLRunner`); tests' fakes need not."""

    def run_series(self, query: str, label: str) -> SeriesValues: ...


class MetricsSource(Protocol):
    """What the controller needs from a metrics backend (Prometheus here, an in-memory one in the demo)."""

    def run_queries(self, queries: Collection[str], alone: Collection[str] = ()) -> Mapping[str, QueryResult]:
        """Each query's result; `alone` are queries whose rules opted out of batching (`batch: false`)."""
        ...


@dataclass(frozen=True)
class PromQLSettings:
    """How queries are sent. All durations in seconds."""

    url: str
    """Base URL of the default endpoint when the runner is given no `Endpoint` (the `--prometheus` form)."""
    query_timeout: float = 5.0
    """Cap on one HTTP request; also sent as Prometheus' evaluation `timeout` so the server gives up too."""
    budget: float = 10.0
    """Cap on all queries of one sync, retries included; keep it below the sync interval."""
    max_attempts: int = 3
    """Attempts per query for transient failures (timeouts, unreachable, 5xx, 429)."""
    backoff_initial: float = 0.1
    """First retry delay; doubles on every retry (tenacity wait_exponential)."""
    backoff_max: float = 2.0
    workers: int = 16
    """Concurrent HTTP requests; 16 keeps a local Prometheus busy without queueing it."""
    max_body_bytes: int = 16 * 1024 * 1024
    """A bigger answer is BadAnswer: an answer the autoscaler can use is one series, a few hundred bytes."""
    batch_size: int = 0
    """Queries per POST request; 0 or 1 sends each query alone. The controller's --prometheus-batch-size sets
    it (default 100: Prometheus evaluates a batch in time linear in its queries, and 100 queries make 11
    requests of a 1,100-query sync)."""
    batch_max_bytes: int = 128 * 1024
    """Cap on a batch's PromQL text in bytes (Prometheus reads a POST form of up to 10 MB)."""


class _Failure(Exception):
    """A failed attempt, carrying the result to report if it is the last one."""

    def __init__(self, result: QueryResult, retryable: bool) -> None:
        super().__init__(result.error)
        self.result = result
        self.retryable = retryable


def _failure(reason: QueryErrorReason, message: str, retryable: bool = False) -> _Failure:
    return _Failure(failed(reason, message), retryable)


def interpret(body: object) -> QueryResult:
    """A decoded answer body as one value or a failure with a reason (see `answer`)."""
    return interpret_body(body)


class PromQLRunner:
    """Runs a sync's queries against one Prometheus; satisfies `MetricsSource`."""

    def __init__(
        self,
        settings: PromQLSettings,
        endpoint: Endpoint | None = None,
        monotonic: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        if settings.query_timeout <= 0 or settings.budget <= 0 or settings.max_attempts < 1:
            raise ValueError(f"query_timeout and budget must be > 0 and max_attempts >= 1 (got {settings})")
        self.settings = settings
        self.endpoint = endpoint if endpoint is not None else endpoint_from_url(settings.url)
        self._monotonic = monotonic
        self._sleep = sleep
        # Retries are ours (tenacity, budget-aware); the session's urllib3 retries are off.
        self._session = EndpointSession(self.endpoint, pool_maxsize=settings.workers)
        self._pool = ThreadPoolExecutor(max_workers=settings.workers, thread_name_prefix="promql")
        self._lock = threading.Lock()
        self.requests_sent = 0
        """HTTP requests sent so far (attempts, retries included): the benchmark and tests read it."""
        self._forms: dict[str, Form | None] = {}
        """`batching.batch_form` of each query seen (the same queries come every sync); bounded below."""

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)
        self._session.close()

    def run_range(self, query: str, start: float, end: float, step: float) -> RangeSeries:
        """`query` over [start, end] every `step` (a rule's past, read once), within the query timeout and
        the range reader's bounds; RangeQueryError (a PrometheusClientError) when unusable."""
        settings = RangeSettings(timeout=max(self.settings.query_timeout, 1.0))
        return query_range(self._session, query, start, end, step, settings)

    def run_series(self, query: str, label: str) -> SeriesValues:
        """`query`'s series by `label` (a per-pod query), sent alone within the query timeout, retried like a
        metric's; never raises: a failure is a SeriesValues with its `error`."""
        deadline = self._monotonic() + self.settings.query_timeout
        read: list[bytes] = []

        def attempt() -> None:
            status, raw = self._exchange(lambda timeout: self._session.get_api(
                "/api/v1/query", {"query": query, "timeout": f"{timeout:.3f}"}, timeout), deadline)
            if not 200 <= status < 300:
                result = self._judge(status, raw)  # raises the retryable ones
                raise _Failure(result, retryable=False)
            read.append(raw)

        try:
            self._retrying(deadline, lambda e: e.retryable)(attempt)
            return series_values(decode_body(read[-1]), label)
        except _Failure as failure:
            result = failure.result
        except BadAnswer as e:
            result = bad_answer(str(e))
        return SeriesValues(error=f"{result.error_reason}: {result.error}")

    def run_queries(self, queries: Collection[str], alone: Collection[str] = ()) -> dict[str, QueryResult]:
        distinct = list(dict.fromkeys(queries))
        deadline = self._monotonic() + self.settings.budget
        if len(self._forms) > 4 * len(distinct) + 10_000:  # queries of rules since removed
            self._forms.clear()
        packed = plan(distinct, self._forms, self.settings.batch_size, self.settings.batch_max_bytes, alone)
        futures: list[tuple[tuple[str, ...], Future[dict[str, QueryResult]]]] = [
            ((q,), self._pool.submit(self._run_alone, q, deadline)) for q in packed.alone]
        futures += [(b.queries, self._pool.submit(self._run_batch, b, deadline)) for b in packed.batches]
        results: dict[str, QueryResult] = {}
        for names, future in futures:
            remaining = max(deadline - self._monotonic(), 0.0) + 0.5
            try:
                results.update(future.result(timeout=remaining))
            except FutureTimeout:
                future.cancel()
                late = QueryResult(None, QueryErrorReason.TIMEOUT,
                                   f"no answer within the sync budget of {self.settings.budget:g}s")
                results.update(dict.fromkeys(names, late))
        return {q: results[q] for q in distinct}

    def _run_alone(self, query: str, deadline: float) -> dict[str, QueryResult]:
        return {query: self._run_one(query, deadline)}

    def _run_batch(self, batch: Batch, deadline: float) -> dict[str, QueryResult]:
        """The batch's results; on a failure that may come from one of its queries, its halves' results."""
        if len(batch.queries) == 1:
            return self._run_alone(batch.queries[0], deadline)
        if self._monotonic() >= deadline:
            spent = QueryResult(None, QueryErrorReason.TIMEOUT, "sync budget spent before the query was sent")
            return dict.fromkeys(batch.queries, spent)
        try:  # a timed-out batch is split at once rather than retried: one slow query may be the cause
            return self._retrying(deadline, lambda e: e.retryable and e.result.error_reason != "Timeout")(
                self._batch_attempt, batch, deadline)
        except _Failure as failure:
            if failure.result.error_reason == QueryErrorReason.UNREACHABLE:
                return dict.fromkeys(batch.queries, failure.result)  # what each would get alone
            log.debug("batch of %d queries failed, sending halves: %s", len(batch.queries),
                      failure.result.error)
        first, second = batch.halves()
        return {**self._run_batch(first, deadline), **self._run_batch(second, deadline)}

    def _batch_attempt(self, batch: Batch, deadline: float) -> dict[str, QueryResult]:
        status, raw = self._exchange(lambda timeout: self._session.post_api(
            "/api/v1/query", {"query": batch.text, "timeout": f"{timeout:.3f}"}, timeout), deadline)
        if 200 <= status < 300:
            try:
                return split_answer(decode_body(raw), batch)
            except BadAnswer as e:
                raise _Failure(bad_answer(str(e)), retryable=False) from e
        if status in (400, 413, 422):  # a bad query, an evaluation error or too long: halves will tell
            raise _failure(QueryErrorReason.BAD_QUERY, f"HTTP {status} for a batch")
        result = self._judge(status, raw)  # raises the retryable ones; the rest (401, 403, 404, 3xx) are
        return dict.fromkeys(batch.queries, result)  # the endpoint's, what each query would get alone

    def _retrying(self, deadline: float, retry: Callable[[_Failure], bool]) -> Retrying:
        return Retrying(
            stop=stop_after_attempt(self.settings.max_attempts) | _StopAtDeadline(deadline, self._monotonic),
            wait=wait_exponential(multiplier=self.settings.backoff_initial, max=self.settings.backoff_max),
            retry=retry_if_exception(lambda e: isinstance(e, _Failure) and retry(e)),
            sleep=self._sleep,
            reraise=True,
        )

    def _run_one(self, query: str, deadline: float) -> QueryResult:
        if self._monotonic() >= deadline:
            return QueryResult(None, QueryErrorReason.TIMEOUT, "sync budget spent before the query was sent")
        try:
            return self._retrying(deadline, lambda e: e.retryable)(self._attempt, query, deadline)
        except _Failure as failure:
            log.debug("query %r failed: %s", query, failure.result.error)
            return failure.result

    def _attempt(self, query: str, deadline: float) -> QueryResult:
        status, raw = self._exchange(lambda timeout: self._session.get_api(
            "/api/v1/query", {"query": query, "timeout": f"{timeout:.3f}"}, timeout), deadline)
        result = self._judge(status, raw)
        if not result.ok:
            raise _Failure(result, retryable=False)
        return result

    def _exchange(self, send: Callable[[float], requests.Response], deadline: float) -> tuple[int, bytes]:
        """(status, body) of one request `send(timeout)`; a failure to get them raises _Failure."""
        timeout = min(self.settings.query_timeout, deadline - self._monotonic())
        if timeout <= 0:
            raise _failure(QueryErrorReason.TIMEOUT, "sync budget spent")
        with self._lock:
            self.requests_sent += 1
        try:
            return bounded_exchange(lambda: send(timeout),
                                    lambda response: self._read_body(response, deadline),
                                    timeout, self.endpoint.display_url)
        except ExchangeTimedOut as e:  # a server dripping bytes cannot outlast the query's timeout
            raise _failure(QueryErrorReason.TIMEOUT, str(e)) from e
        except (requests.RequestException, OSError, CredentialError) as e:
            failure = describe_failure(e, self.endpoint)
            reason = (QueryErrorReason.TIMEOUT if failure.timeout else
                      QueryErrorReason.UNREACHABLE if failure.unreachable else QueryErrorReason.HTTP_ERROR)
            raise _failure(reason, failure.message, failure.retryable) from e

    def _read_body(self, response: requests.Response, deadline: float) -> bytes:
        """The body, at most `max_body_bytes`, read before the sync's deadline."""
        limit = self.settings.max_body_bytes

        def in_time(_size: int) -> None:
            if self._monotonic() > deadline:
                raise _failure(QueryErrorReason.TIMEOUT, "the answer was still arriving at the sync deadline")

        return read_capped(response, limit, lambda: _Failure(
            bad_answer(f"the body is larger than {limit:,} bytes"), retryable=False), in_time)

    def _judge(self, status: int, raw: bytes) -> QueryResult:
        """The query's result from the HTTP status and body; raises _Failure for the retryable ones."""
        name, where = self.endpoint.name, self.endpoint.display_url
        if 200 <= status < 300:
            try:
                return interpret_body(decode_body(raw))
            except BadAnswer as e:
                return bad_answer(str(e))
        if 300 <= status < 400:
            return failed(QueryErrorReason.HTTP_ERROR,
                          f"HTTP {status} from {where}: a redirect, not followed (follow_redirects is false)")
        refused = auth_refusal(status, name)
        if refused is not None:
            return failed(QueryErrorReason.HTTP_ERROR, refused)
        if status == 404:
            return failed(QueryErrorReason.HTTP_ERROR, f"404 from {where}/api/v1/query: no Prometheus API "
                          "there (check the url and its path prefix)")
        try:
            error = error_of(decode_body(raw))
        except BadAnswer:
            error = None
        detail = error[1] if error else "not a Prometheus answer"
        if error is not None and error[0] == "timeout":
            raise _failure(QueryErrorReason.TIMEOUT, f"Prometheus timed out: {detail}", retryable=True)
        if status in (400, 422):
            return failed(QueryErrorReason.BAD_QUERY, f"HTTP {status}: {detail}")
        retryable = status >= 500 or status == 429
        raise _failure(QueryErrorReason.HTTP_ERROR, f"HTTP {status}: {detail}", retryable=retryable)


def runners(config: PrometheusConfig, settings: PromQLSettings) -> dict[str, PromQLRunner]:
    """One runner per endpoint of `config`, each with `settings` (its url replaced by the endpoint's)."""
    return {name: PromQLRunner(dataclasses.replace(settings, url=endpoint.url), endpoint)
            for name, endpoint in config.endpoints.items()}


def close_all(sources: dict[str, PromQLRunner]) -> None:
    for runner in sources.values():
        runner.close()


class _StopAtDeadline(stop_base):
    """Stop retrying when the backoff sleep would leave no time for a useful attempt before the deadline."""

    min_attempt = 0.05

    def __init__(self, deadline: float, monotonic: Callable[[], float]) -> None:
        self.deadline = deadline
        self.monotonic = monotonic

    def __call__(self, retry_state: RetryCallState) -> bool:
        return self.monotonic() + retry_state.upcoming_sleep + self.min_attempt >= self.deadline
