"""Instant and range queries for `gpu-fleet`: whole vectors (one series per GPU), each answer validated.

The controller's runner wants exactly one number per query; the fleet commands want every series with its
labels, so this client sends the query with the controller's HTTP session (`plumbing.prometheus.session`:
auth, TLS, headers, proxies) and judges the envelope with its decoder (`plumbing.prometheus.answer`), then
checks every series itself: labels an object of strings, each sample `[timestamp, "number"]`. An answer of
any other shape is refused whole (`PrometheusError`), never read as numbers. NaN and Inf samples are dropped
(a GPU whose temperature is NaN has no temperature), as are a range answer's samples outside the window
asked for (a timestamp of 1e300 is no time a report can print), and anything past `max_body_bytes`. `cancel`
(set by a stop signal) cuts the queries in flight at once: a hanging Prometheus never holds a stopping
command for the length of `--query-timeout`.
"""

from __future__ import annotations

import contextlib
import math
import re
import threading
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from types import TracebackType
from typing import TypeVar

import requests

from fleet.errors import PrometheusError, Stopped, Unreachable
from plumbing.deadline import Cancel
from plumbing.prometheus.answer import BadAnswer, RangeGrid, auth_refusal, decode_body, error_of, range_point
from plumbing.prometheus.config import Endpoint
from plumbing.prometheus.session import (
    CredentialError,
    EndpointSession,
    ExchangeCancelled,
    ExchangeTimedOut,
    bounded_exchange,
    describe_failure,
    read_capped,
)

MAX_BODY_BYTES = 64 * 1024 * 1024
"""Larger range answers are refused: 64 MiB holds every per-GPU series of a cluster of tens of thousands of
GPUs."""
MAX_INSTANT_BYTES = 4 * 1024 * 1024
"""An instant answer: one series per GPU is 100-300 bytes, so 4 MiB holds 14,000-40,000 GPUs (the 13 answers
of one look together stop below that). 8 MiB let four answers parsed in turn take 267 MiB."""
INSTANT_BUDGET_BYTES = 32 * 1024 * 1024
"""All the answers of one `vectors()` call together (`status`' 13 queries: ~25,000 GPUs of a few labels).
Parsed and kept, an answer holds up to ~4 times its size (a labels dict and a Sample per series), and the one
being parsed ~10 times; with one large answer parsed at a time (LARGE_ANSWER_BYTES), `status`, `select` and
`wait` stay under 256 MiB whatever Prometheus sends (about 210 MiB at worst: tests/integration/fleet)."""
LARGE_ANSWER_BYTES = 1024 * 1024
"""Answers past this size are parsed one at a time; smaller ones concurrently."""
T = TypeVar("T")
MAX_SERIES = 200_000
MAX_VALUE_CHARS = 400
_FLOAT = re.compile(r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?|[+-]?Inf|NaN")


@dataclass(frozen=True, slots=True)
class Sample:
    """One series of an instant vector: its labels and its (finite) value."""

    labels: Mapping[str, str]
    value: float


@dataclass(frozen=True, slots=True)
class Series:
    """One series of a range query: its labels and its finite (unix time, value) points, oldest first."""

    labels: Mapping[str, str]
    points: tuple[tuple[float, float], ...]


class FleetPrometheus:
    """One endpoint's session; `vector()`/`vectors()` for instant queries, `matrix()` for range queries."""

    def __init__(self, endpoint: Endpoint, timeout: float = 10.0,
                 max_body_bytes: int = MAX_BODY_BYTES, cancel: Cancel | None = None) -> None:
        self.endpoint = endpoint
        self.timeout = timeout
        self.max_body_bytes = max_body_bytes
        self.cancel = cancel or Cancel()
        """Set by a stop signal (`polling.Stop`): the queries in flight are cut, the next ones too."""
        self._session = EndpointSession(endpoint)
        self._one_large = threading.Lock()

    def __enter__(self) -> FleetPrometheus:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    def close(self) -> None:
        self._session.close()

    def vector(self, query: str, at: float | None = None, budget: _Budget | None = None) -> list[Sample]:
        """Every series `query` returns now (or at unix time `at`); raises PrometheusError."""
        params = {"query": query, "timeout": f"{self.timeout:.3f}"}
        if at is not None:
            params["time"] = f"{at:.3f}"
        budget = budget or _Budget(MAX_INSTANT_BYTES)
        return self._get("/api/v1/query", params, query, lambda data: _samples(data, query, budget.share),
                         budget, MAX_INSTANT_BYTES)

    def vectors(self, queries: Mapping[str, str]) -> dict[str, list[Sample]]:
        """`vector()` of every query, concurrently, by the caller's key; the first failure is raised. Their
        answers together are at most INSTANT_BUDGET_BYTES."""
        if not queries:
            return {}
        budget = _Budget(INSTANT_BUDGET_BYTES)
        with ThreadPoolExecutor(max_workers=min(8, len(queries)), thread_name_prefix="promql") as pool:
            futures = {key: pool.submit(self.vector, query, None, budget) for key, query in queries.items()}
            try:
                return {key: future.result() for key, future in futures.items()}
            except (KeyboardInterrupt, SystemExit):  # Ctrl-C: the pool's exit would wait out every query
                self.cancel.cancel()
                raise

    def matrix(self, query: str, start: float, end: float, step: float,
               max_points: int | None = None) -> list[Series]:
        """Every series of a range query over [start, end] every `step` seconds, at most `max_points` points
        in all; raises PrometheusError."""
        params = {"query": query, "start": f"{start:.3f}", "end": f"{end:.3f}", "step": f"{step:g}",
                  "timeout": f"{self.timeout:.3f}"}
        grid = RangeGrid(start, end, step)
        return self._get("/api/v1/query_range", params, query,
                         lambda data: _series(data, query, max_points, grid), _Budget(self.max_body_bytes),
                         self.max_body_bytes)

    def _get(self, path: str, params: dict[str, str], query: str, convert: Callable[[dict[str, object]], T],
             budget: _Budget, limit: int) -> T:
        """`convert` of the `data` object of a successful answer of at most `limit` bytes (charged to
        `budget`); PrometheusError (or Unreachable) otherwise. An answer past LARGE_ANSWER_BYTES is decoded
        and converted while holding `_one_large`, so concurrent queries never hold two parsed at once."""
        try:
            status, raw = bounded_exchange(lambda: self._session.get_api(path, params, self.timeout),
                                           lambda response: _read(response, limit, budget), self.timeout,
                                           self.endpoint.display_url, self.cancel)
        except ExchangeCancelled as exc:
            raise Stopped(str(exc)) from exc
        except ExchangeTimedOut as exc:  # however slowly the server sends it
            raise Unreachable(str(exc)) from exc
        except (requests.RequestException, OSError, CredentialError) as exc:
            failure = describe_failure(exc, self.endpoint)
            error = Unreachable if failure.unreachable or failure.timeout else PrometheusError
            raise error(failure.message) from exc
        refused = auth_refusal(status, self.endpoint.name)
        if refused is not None:  # judged before the body: an auth proxy's login page is no JSON
            raise PrometheusError(refused)
        with self._one_large if len(raw) > LARGE_ANSWER_BYTES else contextlib.nullcontext():
            return convert(self._data(raw, status, query))

    def _data(self, raw: bytes, status: int, query: str) -> dict[str, object]:
        if not 200 <= status < 300:  # judged before the body, which need not be JSON ("Service Unavailable")
            try:
                reported = error_of(decode_body(raw))
            except BadAnswer:
                reported = None
            detail = f"{reported[0]}: {reported[1]}" if reported else "not a Prometheus answer"
            hint = " (no Prometheus API there: check the URL and its path prefix)" if status == 404 else ""
            # a Prometheus still starting (503) or a proxy without its upstream (502, 504): not there yet
            error = Unreachable if status in (502, 503, 504) else PrometheusError
            raise error(f"HTTP {status} from {self.endpoint.display_url}{hint} for query {_short(query)}: "
                        f"{detail}")
        try:
            body = decode_body(raw)
        except BadAnswer as exc:
            raise _bad(query, str(exc)) from exc
        if not isinstance(body, dict) or body.get("status") != "success" or not isinstance(body.get("data"),
                                                                                          dict):
            raise _bad(query, 'expected {"status": "success", "data": {...}}')
        data: dict[str, object] = body["data"]
        return data


class _Budget:
    """Bytes the answers of one call may hold together, charged as they stream in (thread-safe)."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._used = 0
        self._lock = threading.Lock()
        self._strings: dict[str, str] = {}

    def share(self, text: str) -> str:
        """One object for equal label names and values across the answers of the call: the 13 answers of
        `status` label the same GPUs, and a parsed answer otherwise holds its own copy of every string."""
        return self._strings.setdefault(text, text)

    def charge(self, size: int) -> None:
        with self._lock:
            self._used += size
            over = self._used > self.limit
        if over:
            raise PrometheusError(f"the answers together are larger than {self.limit:,} bytes (narrow the "
                                  "selection, e.g. --node or --namespace)")


def _read(response: requests.Response, limit: int, budget: _Budget) -> bytes:
    """The body, refused as soon as it passes `limit` (declared or streamed) or `budget`."""
    return read_capped(response, limit,
                       lambda: PrometheusError(f"the answer is larger than {limit:,} bytes"), budget.charge)


def _samples(data: dict[str, object], query: str, share: Callable[[str], str]) -> list[Sample]:
    kind, result = data.get("resultType"), data.get("result")
    if kind == "scalar":
        value = _value(result, "result")
        return [] if value is None else [Sample({}, value)]
    if kind != "vector":
        raise PrometheusError(f"query {_short(query)}: expected an instant vector, got {_short(kind)}")
    samples: list[Sample] = []
    for index, entry in enumerate(_entries(result, query)):
        labels = _labels(entry, index, query, share)
        value = _value(entry.get("value"), f"result[{index}].value", query)
        if value is not None:
            samples.append(Sample(labels, value))
    return samples


def _series(data: dict[str, object], query: str, max_points: int | None = None,
            grid: RangeGrid | None = None) -> list[Series]:
    """Every series of a matrix answer; a sample outside `grid`'s window is dropped."""
    if data.get("resultType") != "matrix":
        raise PrometheusError(f"query {_short(query)}: expected a range vector, got "
                              f"{_short(data.get('resultType'))}")
    series: list[Series] = []
    total = 0
    for index, entry in enumerate(_entries(data.get("result"), query)):
        labels = _labels(entry, index, query)
        values = entry.get("values")
        if not isinstance(values, list):
            raise _bad(query, f"result[{index}].values is not a list")
        total += len(values)
        if max_points is not None and total > max_points:
            raise _bad(query, f"more than {max_points:,} points in all")
        points = []
        for p_index, point in enumerate(values):
            try:
                t, value = range_point(point, f"result[{index}].values[{p_index}]")
            except BadAnswer as exc:
                raise _bad(query, str(exc)) from None
            if value is not None and (grid is None or grid.covers(t)):
                points.append((t, value))
        series.append(Series(labels, tuple(points)))
    return series


def _bad(query: str, message: str) -> PrometheusError:
    return PrometheusError(f"malformed answer from Prometheus to {_short(query)}: {message}")


def _entries(result: object, query: str) -> Sequence[dict[str, object]]:
    if not isinstance(result, list):
        raise _bad(query, "result is not a list")
    if len(result) > MAX_SERIES:
        raise _bad(query, f"more than {MAX_SERIES:,} series")
    for index, entry in enumerate(result):
        if not isinstance(entry, dict):
            raise _bad(query, f"result[{index}] is not an object")
    return result


def _labels(entry: Mapping[str, object], index: int, query: str,
            share: Callable[[str], str] | None = None) -> dict[str, str]:
    metric = entry.get("metric", {})
    if not isinstance(metric, dict) or not all(isinstance(k, str) and isinstance(v, str)
                                               for k, v in metric.items()):
        raise _bad(query, f"result[{index}].metric is not an object of string labels")
    if share is None:
        return dict(metric)
    return {share(key): share(value) for key, value in metric.items()}


def _value(sample: object, where: str, query: str = "") -> float | None:
    """The finite value of `[timestamp, "value"]` (None: NaN or Inf); PrometheusError for another shape."""
    if not isinstance(sample, list) or len(sample) != 2:
        raise _bad(query, f'{where} is not [timestamp, "value"]')
    timestamp, text = sample
    if isinstance(timestamp, bool) or not isinstance(timestamp, int | float) or not math.isfinite(timestamp):
        raise _bad(query, f"{where} has no numeric timestamp")
    if not isinstance(text, str) or len(text) > MAX_VALUE_CHARS or not _FLOAT.fullmatch(text):
        raise _bad(query, f"{where}'s value is not a number in a string")
    value = float(text)
    return value if math.isfinite(value) else None


def _short(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."
