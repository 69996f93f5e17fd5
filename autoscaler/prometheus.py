"""PromQL runner: every distinct query of a sync sent once, concurrently, each bounded in time.

Prometheus answers become `QueryResult`s: exactly one finite sample is a value; anything else (no
series, several series, NaN, Inf, an HTTP error, a bad query, a timeout, an unreachable server) is a failed
metric with a reason from `QueryErrorReason`, so the engine's failed-metric rules apply. Nothing raises
past this module. Transient failures are retried with tenacity (exponential backoff) while the sync's time
budget allows, so a sync never overruns its interval.
"""

from __future__ import annotations

import ast
import json
import logging
import math
import re
import threading
import time
from collections.abc import Callable, Collection, Mapping
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Protocol

import requests
from prometheus_api_client import PrometheusConnect
from prometheus_api_client.exceptions import PrometheusApiClientException
from requests.adapters import HTTPAdapter
from tenacity import RetryCallState, Retrying, retry_if_exception, stop_after_attempt, wait_exponential
from tenacity.stop import stop_base
from urllib3.exceptions import MaxRetryError, ReadTimeoutError
from urllib3.util.retry import Retry

log = logging.getLogger(__name__)


class QueryErrorReason(StrEnum):
    """Why a query gave no usable value (label values of gpu_autoscaler_query_errors_total)."""

    NO_SERIES = "NoSeries"
    MULTIPLE_SERIES = "MultipleSeries"
    NAN = "NaN"
    INF = "Inf"
    TIMEOUT = "Timeout"
    HTTP_ERROR = "HTTPError"
    BAD_QUERY = "BadQuery"
    UNREACHABLE = "Unreachable"


@dataclass(frozen=True)
class QueryResult:
    """One query's outcome: `value` when it returned exactly one finite sample, else the reason it failed."""

    value: float | None
    error_reason: str | None = None
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.value is not None


class MetricsSource(Protocol):
    """What the controller needs from a metrics backend (Prometheus here, an in-memory one in the demo)."""

    def run_queries(self, queries: Collection[str]) -> Mapping[str, QueryResult]: ...


@dataclass(frozen=True)
class PromQLSettings:
    """How queries are sent. All durations in seconds."""

    url: str
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


class _Failure(Exception):
    """A failed attempt, carrying the result to report if it is the last one."""

    def __init__(self, result: QueryResult, retryable: bool) -> None:
        super().__init__(result.error)
        self.result = result
        self.retryable = retryable


_STATUS = re.compile(r"HTTP Status Code (\d+) \((.*)\)\s*$", re.DOTALL)


def _failure(reason: QueryErrorReason, message: str, retryable: bool = False) -> _Failure:
    return _Failure(QueryResult(None, str(reason), message), retryable)


def interpret(result: Any) -> QueryResult:
    """Turn the `data.result` of an instant query into one value or a failure with a reason."""
    if isinstance(result, list) and len(result) == 2 and isinstance(result[0], int | float):
        sample: Any = result  # a scalar result: [timestamp, "value"]
    elif isinstance(result, list):
        if not result:
            return QueryResult(
                None,
                QueryErrorReason.NO_SERIES,
                "query returned no series (does its selector match any series now? check the metric name and "
                "labels; add `or vector(0)` if no series means 0)",
            )
        if len(result) > 1:
            return QueryResult(
                None,
                QueryErrorReason.MULTIPLE_SERIES,
                f"query returned {len(result)} series, expected one (wrap it in sum() or avg())",
            )
        entry = result[0]
        if not isinstance(entry, dict) or "value" not in entry:
            return QueryResult(
                None,
                QueryErrorReason.BAD_QUERY,
                "query returned a range vector; use an instant vector or a scalar",
            )
        sample = entry["value"]
    else:
        return QueryResult(
            None, QueryErrorReason.HTTP_ERROR, f"malformed answer: result is {type(result).__name__}"
        )
    try:
        value = float(sample[1])
    except (TypeError, ValueError, IndexError):
        return QueryResult(
            None, QueryErrorReason.BAD_QUERY, f"query returned a non-numeric sample {sample!r}"
        )
    if math.isnan(value):
        return QueryResult(None, QueryErrorReason.NAN, "query returned NaN")
    if math.isinf(value):
        return QueryResult(None, QueryErrorReason.INF, f"query returned {value}")
    return QueryResult(value)


def _classify_http(exc: PrometheusApiClientException) -> _Failure:
    match = _STATUS.search(str(exc))
    if match is None:
        return _failure(QueryErrorReason.HTTP_ERROR, str(exc))
    status = int(match.group(1))
    detail = match.group(2)
    error_type = ""
    try:
        body = json.loads(_body_text(detail))
        error_type = str(body.get("errorType", ""))
        detail = str(body.get("error", detail))
    except (ValueError, TypeError, AttributeError):
        pass  # not a Prometheus JSON error body (a proxy's page): keep the raw text
    if error_type == "timeout":
        return _failure(QueryErrorReason.TIMEOUT, f"Prometheus timed out: {detail}", retryable=True)
    if status in (400, 422):
        return _failure(QueryErrorReason.BAD_QUERY, f"HTTP {status}: {detail}")
    retryable = status >= 500 or status == 429
    return _failure(QueryErrorReason.HTTP_ERROR, f"HTTP {status}: {detail}", retryable=retryable)


def _body_text(text: str) -> str:
    """The client puts `repr(response.content)` in its message: recover the body from the `b'...'` literal."""
    try:
        value = ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return text
    return value.decode("utf-8", errors="replace") if isinstance(value, bytes) else text


class PromQLRunner:
    """Runs a sync's queries against one Prometheus; satisfies `MetricsSource`."""

    def __init__(
        self,
        settings: PromQLSettings,
        session: requests.Session | None = None,
        monotonic: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        if settings.query_timeout <= 0 or settings.budget <= 0 or settings.max_attempts < 1:
            raise ValueError(f"query_timeout and budget must be > 0 and max_attempts >= 1 (got {settings})")
        self.settings = settings
        self._monotonic = monotonic
        self._sleep = sleep
        self._session = session if session is not None else requests.Session()
        url = settings.url.rstrip("/")
        # Retries are ours (tenacity, budget-aware); the client's urllib3 retries would sleep past the budget.
        self._client = PrometheusConnect(
            url=url, session=self._session, retry=Retry(total=0, raise_on_status=False)
        )
        self._session.mount(
            url,
            HTTPAdapter(
                max_retries=Retry(total=0, raise_on_status=False),
                pool_connections=1,
                pool_maxsize=settings.workers,
            ),
        )
        self._pool = ThreadPoolExecutor(max_workers=settings.workers, thread_name_prefix="promql")
        self._lock = threading.Lock()
        self.requests_sent = 0
        """HTTP requests sent so far (attempts, retries included): the benchmark and tests read it."""

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)
        self._client.close()

    def run_queries(self, queries: Collection[str]) -> dict[str, QueryResult]:
        distinct = list(dict.fromkeys(queries))
        deadline = self._monotonic() + self.settings.budget
        futures = {q: self._pool.submit(self._run_one, q, deadline) for q in distinct}
        results: dict[str, QueryResult] = {}
        for query, future in futures.items():
            remaining = max(deadline - self._monotonic(), 0.0) + 0.5
            try:
                results[query] = future.result(timeout=remaining)
            except FutureTimeout:
                future.cancel()
                results[query] = QueryResult(
                    None,
                    QueryErrorReason.TIMEOUT,
                    f"no answer within the sync budget of {self.settings.budget:g}s",
                )
        return results

    def _run_one(self, query: str, deadline: float) -> QueryResult:
        if self._monotonic() >= deadline:
            return QueryResult(None, QueryErrorReason.TIMEOUT, "sync budget spent before the query was sent")
        retrying = Retrying(
            stop=stop_after_attempt(self.settings.max_attempts) | _StopAtDeadline(deadline, self._monotonic),
            wait=wait_exponential(multiplier=self.settings.backoff_initial, max=self.settings.backoff_max),
            retry=retry_if_exception(lambda e: isinstance(e, _Failure) and e.retryable),
            sleep=self._sleep,
            reraise=True,
        )
        try:
            return retrying(self._attempt, query, deadline)
        except _Failure as failure:
            log.debug("query %r failed: %s", query, failure.result.error)
            return failure.result

    def _attempt(self, query: str, deadline: float) -> QueryResult:
        timeout = min(self.settings.query_timeout, deadline - self._monotonic())
        if timeout <= 0:
            raise _failure(QueryErrorReason.TIMEOUT, "sync budget spent")
        with self._lock:
            self.requests_sent += 1
        try:
            data = self._client.custom_query(query, params={"timeout": f"{timeout:.3f}"}, timeout=timeout)
        except (requests.Timeout, requests.ConnectionError) as e:
            if isinstance(e, requests.Timeout) or _is_read_timeout(e):
                message = f"no answer within {timeout:.2f}s"
                raise _failure(QueryErrorReason.TIMEOUT, message, retryable=True) from e
            message = f"cannot reach {self.settings.url}: {e}"
            raise _failure(QueryErrorReason.UNREACHABLE, message, retryable=True) from e
        except PrometheusApiClientException as e:
            raise _classify_http(e) from e
        except (ValueError, KeyError, TypeError) as e:
            raise _failure(
                QueryErrorReason.HTTP_ERROR, f"malformed answer from {self.settings.url}: {e}"
            ) from e
        except requests.RequestException as e:
            raise _failure(QueryErrorReason.HTTP_ERROR, str(e), retryable=True) from e
        result = interpret(data)
        if not result.ok:
            raise _Failure(result, retryable=False)
        return result


def _is_read_timeout(e: requests.ConnectionError) -> bool:
    """requests reports urllib3's exhausted retries of a read timeout as a ConnectionError."""
    cause = e.args[0] if e.args else None
    return isinstance(cause, MaxRetryError) and isinstance(cause.reason, ReadTimeoutError)


class _StopAtDeadline(stop_base):
    """Stop retrying when the backoff sleep would leave no time for a useful attempt before the deadline."""

    min_attempt = 0.05

    def __init__(self, deadline: float, monotonic: Callable[[], float]) -> None:
        self.deadline = deadline
        self.monotonic = monotonic

    def __call__(self, retry_state: RetryCallState) -> bool:
        return self.monotonic() + retry_state.upcoming_sleep + self.min_attempt >= self.deadline
