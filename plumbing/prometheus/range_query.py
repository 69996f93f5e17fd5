"""Range queries (`/api/v1/query_range`) for the commands that read a metric's past (`tune`): bounded,
validated, split into chunks.

Sent with the controller's own endpoint session (`session.EndpointSession`: auth, TLS, proxy, redirects as
configured), so `tune` reads history from where `run` reads the present. Every answer is checked before a
number is taken from it: the envelope, `resultType: matrix`, at most one series, each sample
`[timestamp, "value"]` with a finite timestamp on the requested grid (`start + k * step`, each once: at most
`(end - start) / step + 1` points) and a value Prometheus could have written; anything else is a
`RangeQueryError` naming the endpoint and the query, never a number. A body is read to at most what the
points asked for can take (`body_limit`, never more than `max_body_bytes`), so a flood of extra points is
refused before it is decoded; a range of more than `max_points_per_request` steps is asked for in chunks
(Prometheus refuses more than 11,000 points per series), and at most `max_points` in all.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass

import requests

from plumbing.prometheus.answer import (
    BadAnswer,
    RangeGrid,
    auth_refusal,
    decode_body,
    error_of,
    range_point,
    result_of,
)
from plumbing.prometheus.errors import PrometheusClientError
from plumbing.prometheus.session import (
    CredentialError,
    EndpointSession,
    ExchangeTimedOut,
    bounded_exchange,
    describe_failure,
    read_capped,
)


class RangeQueryError(PrometheusClientError):
    """A range query could not give a usable answer (unreachable, refused, malformed, too large)."""


@dataclass(frozen=True, slots=True)
class RangeSettings:
    """Bounds of range queries. Durations in seconds."""

    timeout: float = 30.0
    """One HTTP request, also sent as Prometheus' evaluation timeout."""
    max_body_bytes: int = 32 * 1024 * 1024
    """10,000 points of one series are about 300 KB of JSON; 32 MiB is far beyond any honest answer."""
    max_points_per_request: int = 10_000
    """Below Prometheus' own limit of 11,000 points per series."""
    max_points: int = 1_000_000
    """All chunks together: 60 days at 15 s is 345,600."""


POINT_BYTES = 400
"""One point as Prometheus writes it, `[1700000000.123,"<value>"],`: a value is at most 330 characters (it
writes 1.7e308 in full)."""
ENVELOPE_BYTES = 64 * 1024
"""The envelope and the series' labels."""


def body_limit(points: int, settings: RangeSettings) -> int:
    """The largest body an answer of `points` points of one series can be."""
    return min(settings.max_body_bytes, ENVELOPE_BYTES + points * POINT_BYTES)


@dataclass(frozen=True, slots=True)
class RangeSeries:
    """One query's samples over the range: `values[t]` for each step that had a sample (NaN/Inf as None)."""

    query: str
    values: dict[float, float | None]


def chunks(start: float, end: float, step: float, per_request: int) -> Iterator[tuple[float, float]]:
    """[start, end] cut into ranges of at most `per_request` steps each, on the grid start + k * step."""
    first = start
    while first <= end:
        last = min(end, first + (per_request - 1) * step)
        yield first, last
        first = last + step


def query_range(session: EndpointSession, query: str, start: float, end: float, step: float,
                settings: RangeSettings = RangeSettings()) -> RangeSeries:
    """The samples of `query` from `start` to `end` every `step` seconds; RangeQueryError if unusable."""
    if not (math.isfinite(start) and math.isfinite(end) and math.isfinite(step)) or step <= 0 or end < start:
        raise ValueError(f"bad range: start {start}, end {end}, step {step}")
    points = int((end - start) // step) + 1
    if points > settings.max_points:
        raise RangeQueryError(f"{points:,} steps of {step:g}s asked for {query!r}: more than "
                              f"{settings.max_points:,}; use a larger --step or a shorter --since")
    values: dict[float, float | None] = {}
    for first, last in chunks(start, end, step, settings.max_points_per_request):
        raw = _get(session, query, first, last, step, settings)
        try:
            values.update(parse_matrix(decode_body(raw), first, last, step))
        except BadAnswer as exc:
            raise RangeQueryError(f"malformed answer from {session.endpoint.display_url} to {query!r}: "
                                  f"{exc}") from exc
    return RangeSeries(query, values)


def _get(session: EndpointSession, query: str, start: float, end: float, step: float,
         settings: RangeSettings) -> bytes:
    where = session.endpoint.display_url
    params = {"query": query, "start": f"{start:.3f}", "end": f"{end:.3f}", "step": f"{step:g}",
              "timeout": f"{settings.timeout:.3f}"}  # seconds: Prometheus refuses "1.6s"
    try:
        status, raw = bounded_exchange(
            lambda: session.get_api("/api/v1/query_range", params, settings.timeout),
            lambda response: _read(response, body_limit(RangeGrid(start, end, step).points, settings), where),
            settings.timeout, where)
    except ExchangeTimedOut as exc:  # however slowly the server sends it
        raise RangeQueryError(str(exc)) from exc
    except (requests.RequestException, OSError, CredentialError) as exc:
        raise RangeQueryError(describe_failure(exc, session.endpoint).message) from exc
    if 200 <= status < 300:
        return raw
    refused = auth_refusal(status, session.endpoint.name)
    if refused is not None:
        raise RangeQueryError(refused)
    try:
        error = error_of(decode_body(raw))
    except BadAnswer:
        error = None
    detail = error[1] if error else "not a Prometheus answer"
    raise RangeQueryError(
        f"HTTP {status} from {where}/api/v1/query_range for {query!r}: {detail}")


def _read(response: requests.Response, limit: int, where: str) -> bytes:
    return read_capped(response, limit,
                       lambda: RangeQueryError(f"the answer from {where} is larger than {limit:,} bytes"))


def parse_matrix(body: object, start: float, end: float, step: float) -> dict[float, float | None]:
    """The samples of a matrix answer of at most one series, each checked; BadAnswer names what is wrong.
    No series is an empty dict (no history); several series are refused (the metric needs exactly one), and
    so is a series of more points than the grid has, or a point off it."""
    if error_of(body) is not None:
        raise BadAnswer(f"error answer: {error_of(body)}")
    result = result_of(body, "matrix")
    if len(result) > 1:
        raise BadAnswer(f"{len(result)} series, expected one (wrap the query in sum() or avg())")
    if not result:
        return {}
    entry = result[0]
    if not isinstance(entry, dict) or not isinstance(entry.get("values"), list):
        raise BadAnswer("result[0] has no list of values")
    grid = RangeGrid(start, end, step)
    if len(entry["values"]) > grid.points:
        raise BadAnswer(f"{len(entry['values']):,} points, more than the {grid.points:,} steps of {step:g}s "
                        "asked for")
    out: dict[float, float | None] = {}
    for index, sample in enumerate(entry["values"]):
        where = f"result[0].values[{index}]"
        t, value = range_point(sample, where)
        if not grid.covers(t):
            raise BadAnswer(f"{where}'s timestamp {t} is outside the range asked for")
        if not grid.on_grid(t):
            raise BadAnswer(f"{where}'s timestamp {t} is not on the grid asked for ({start} + k * {step:g})")
        out[t] = value
    return out
