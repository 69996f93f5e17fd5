"""Instant and range queries for `gpu-fleet`: whole vectors (one series per GPU), each answer validated.

The controller's runner wants exactly one number per query; the fleet commands want every series with its
labels, so this client sends the query with the controller's HTTP session (`plumbing.prometheus.session`:
auth, TLS, headers, proxies) and judges the envelope with its decoder (`plumbing.prometheus.answer`), then
checks every series itself: labels an object of strings, each sample `[timestamp, "number"]`. An answer of
any other shape is refused whole (`PrometheusError`), never read as numbers. NaN and Inf samples are dropped
(a GPU whose temperature is NaN has no temperature), as is anything past `max_body_bytes`.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from types import TracebackType

import requests

from fleet.errors import PrometheusError, Unreachable
from plumbing.deadline import Deadline
from plumbing.numbers import ascii_int
from plumbing.prometheus.answer import BadAnswer, auth_refusal, decode_body, error_of
from plumbing.prometheus.config import Endpoint
from plumbing.prometheus.session import CredentialError, EndpointSession, describe_failure

MAX_BODY_BYTES = 64 * 1024 * 1024
"""Larger answers are refused: 64 MiB holds every per-GPU series of a cluster of tens of thousands of GPUs."""
MAX_SERIES = 200_000
MAX_VALUE_CHARS = 400
_FLOAT = re.compile(r"^[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?$|^[+-]?Inf$|^NaN$")


@dataclass(frozen=True)
class Sample:
    """One series of an instant vector: its labels and its (finite) value."""

    labels: Mapping[str, str]
    value: float


@dataclass(frozen=True)
class Series:
    """One series of a range query: its labels and its finite (unix time, value) points, oldest first."""

    labels: Mapping[str, str]
    points: tuple[tuple[float, float], ...]


class FleetPrometheus:
    """One endpoint's session; `vector()`/`vectors()` for instant queries, `matrix()` for range queries."""

    def __init__(self, endpoint: Endpoint, timeout: float = 10.0,
                 max_body_bytes: int = MAX_BODY_BYTES) -> None:
        self.endpoint = endpoint
        self.timeout = timeout
        self.max_body_bytes = max_body_bytes
        self._session = EndpointSession(endpoint)

    def __enter__(self) -> FleetPrometheus:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    def close(self) -> None:
        self._session.close()

    def vector(self, query: str, at: float | None = None) -> list[Sample]:
        """Every series `query` returns now (or at unix time `at`); raises PrometheusError."""
        params = {"query": query, "timeout": f"{self.timeout:.3f}"}
        if at is not None:
            params["time"] = f"{at:.3f}"
        data = self._get("/api/v1/query", params, query)
        kind, result = data.get("resultType"), data.get("result")
        if kind == "scalar":
            value = _value(result, "result")
            return [] if value is None else [Sample({}, value)]
        if kind != "vector":
            raise PrometheusError(f"query {_short(query)}: expected an instant vector, got {_short(kind)}")
        samples: list[Sample] = []
        for index, entry in enumerate(_entries(result, query)):
            labels = _labels(entry, index, query)
            value = _value(entry.get("value"), f"result[{index}].value", query)
            if value is not None:
                samples.append(Sample(labels, value))
        return samples

    def vectors(self, queries: Mapping[str, str]) -> dict[str, list[Sample]]:
        """`vector()` of every query, concurrently, by the caller's key; the first failure is raised."""
        if not queries:
            return {}
        with ThreadPoolExecutor(max_workers=min(8, len(queries)), thread_name_prefix="promql") as pool:
            futures = {key: pool.submit(self.vector, query) for key, query in queries.items()}
            return {key: future.result() for key, future in futures.items()}

    def matrix(self, query: str, start: float, end: float, step: float) -> list[Series]:
        """Every series of a range query over [start, end] every `step` seconds; raises PrometheusError."""
        params = {"query": query, "start": f"{start:.3f}", "end": f"{end:.3f}", "step": f"{step:g}",
                  "timeout": f"{self.timeout:.3f}"}
        data = self._get("/api/v1/query_range", params, query)
        if data.get("resultType") != "matrix":
            raise PrometheusError(f"query {_short(query)}: expected a range vector, got "
                                  f"{_short(data.get('resultType'))}")
        series: list[Series] = []
        for index, entry in enumerate(_entries(data.get("result"), query)):
            labels = _labels(entry, index, query)
            values = entry.get("values")
            if not isinstance(values, list):
                raise _bad(query, f"result[{index}].values is not a list")
            points = []
            for p_index, point in enumerate(values):
                where = f"result[{index}].values[{p_index}]"
                value = _value(point, where, query)
                if value is not None:
                    points.append((float(point[0]), value))
            series.append(Series(labels, tuple(points)))
        return series

    def _get(self, path: str, params: dict[str, str], query: str) -> dict[str, object]:
        """The `data` object of a successful answer; PrometheusError (or Unreachable) otherwise."""
        watch = Deadline(self.timeout)  # the whole exchange, however slowly the server sends it
        try:
            with watch:
                response = self._session.get_api(path, params, self.timeout)
                try:
                    raw = self._read(response)
                finally:
                    response.close()
            if watch.expired:  # cut in its headers, a response can look complete and empty
                raise requests.Timeout("the exchange's deadline passed")
        except (requests.RequestException, OSError, CredentialError) as exc:
            if watch.expired:
                raise Unreachable(f"no complete answer from {self.endpoint.display_url} within "
                                  f"{self.timeout:g} s") from exc
            failure = describe_failure(exc, self.endpoint)
            error = Unreachable if failure.unreachable or failure.timeout else PrometheusError
            raise error(failure.message) from exc
        status = response.status_code
        refused = auth_refusal(status, self.endpoint.name)
        if refused is not None:  # judged before the body: an auth proxy's login page is no JSON
            raise PrometheusError(refused)
        try:
            body = decode_body(raw)
        except BadAnswer as exc:
            raise _bad(query, str(exc)) from exc
        if not 200 <= status < 300:
            reported = error_of(body)
            detail = f"{reported[0]}: {reported[1]}" if reported else "not a Prometheus answer"
            hint = " (no Prometheus API there: check the URL and its path prefix)" if status == 404 else ""
            raise PrometheusError(f"HTTP {status} from {self.endpoint.display_url}{hint} for query "
                                  f"{_short(query)}: {detail}")
        if not isinstance(body, dict) or body.get("status") != "success" or not isinstance(body.get("data"),
                                                                                          dict):
            raise _bad(query, 'expected {"status": "success", "data": {...}}')
        data: dict[str, object] = body["data"]
        return data

    def _read(self, response: requests.Response) -> bytes:
        length = response.headers.get("Content-Length", "")
        declared = ascii_int(length)
        if declared is not None and declared > self.max_body_bytes:
            raise PrometheusError(f"the answer is larger than {self.max_body_bytes:,} bytes")
        chunks: list[bytes] = []
        size = 0
        for chunk in response.iter_content(64 * 1024):
            size += len(chunk)
            if size > self.max_body_bytes:
                raise PrometheusError(f"the answer is larger than {self.max_body_bytes:,} bytes")
            chunks.append(chunk)
        return b"".join(chunks)


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


def _labels(entry: Mapping[str, object], index: int, query: str) -> dict[str, str]:
    metric = entry.get("metric", {})
    if not isinstance(metric, dict) or not all(isinstance(k, str) and isinstance(v, str)
                                               for k, v in metric.items()):
        raise _bad(query, f"result[{index}].metric is not an object of string labels")
    return dict(metric)


def _value(sample: object, where: str, query: str = "") -> float | None:
    """The finite value of `[timestamp, "value"]` (None: NaN or Inf); PrometheusError for another shape."""
    if not isinstance(sample, list) or len(sample) != 2:
        raise _bad(query, f'{where} is not [timestamp, "value"]')
    timestamp, text = sample
    if isinstance(timestamp, bool) or not isinstance(timestamp, int | float) or not math.isfinite(timestamp):
        raise _bad(query, f"{where} has no numeric timestamp")
    if not isinstance(text, str) or len(text) > MAX_VALUE_CHARS or not _FLOAT.match(text):
        raise _bad(query, f"{where}'s value is not a number in a string")
    value = float(text)
    return value if math.isfinite(value) else None


def _short(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."
