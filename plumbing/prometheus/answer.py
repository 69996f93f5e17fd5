"""What a Prometheus instant-query answer means: one finite number, or the reason it cannot drive scaling.

Every answer is validated before a value is taken from it: the JSON envelope (status, data, resultType,
result), each series' labels and each sample `[timestamp, "value"]`. A shape Prometheus never sends (a value
that is an object, a list or a bare number, a missing timestamp, a non-string label) is `BadAnswer` for that
query alone: never read as a number, so it can never cause a scale change. Shared by the controller's runner
and `check`, so both judge an answer the same way.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from enum import StrEnum

MAX_SAMPLE_CHARS = 400
"""Prometheus formats 1.7e308 in full: 309 digits. Longer is not a number it sent."""
_FLOAT = re.compile(r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?|[+-]?Inf|NaN")


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
    BAD_ANSWER = "BadAnswer"
    """The server answered something that is not a valid Prometheus answer (shape, encoding, size)."""


@dataclass(frozen=True)
class QueryResult:
    """One query's outcome: `value` when it returned exactly one finite sample, else the reason it failed."""

    value: float | None
    error_reason: QueryErrorReason | None = None
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.value is not None


class BadAnswer(Exception):
    """The answer's shape is not one Prometheus sends; the message says which part."""


def failed(reason: QueryErrorReason, message: str) -> QueryResult:
    return QueryResult(None, reason, message)


def bad_answer(message: str) -> QueryResult:
    return failed(QueryErrorReason.BAD_ANSWER, f"malformed answer from Prometheus: {message}")


def decode_body(raw: bytes) -> object:
    """The JSON of a body; BadAnswer for bytes that are not UTF-8 JSON (or nest absurdly deep)."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise BadAnswer("the body is not UTF-8") from None
    try:
        return json.loads(text)
    except (ValueError, RecursionError):
        raise BadAnswer(f"the body is not JSON ({len(raw):,} bytes)") from None


def error_of(body: object) -> tuple[str, str] | None:
    """(errorType, error) of a Prometheus error answer, each cut to 300 characters; None for anything else."""
    if not isinstance(body, dict) or body.get("status") != "error":
        return None
    kind, text = body.get("errorType"), body.get("error")
    if not isinstance(kind, str) or not isinstance(text, str):
        return None
    return kind[:40], (text[:300] + "...") if len(text) > 300 else text


def result_of(body: object, result_type: str) -> list[object]:
    """The `data.result` list of a successful answer of `result_type` (vector, matrix); BadAnswer otherwise.
    One envelope check for the batch splitter and the range reader (single answers go through
    `interpret_body`, which also accepts scalars)."""
    if not isinstance(body, dict) or body.get("status") != "success":
        raise BadAnswer("expected {\"status\": \"success\", \"data\": ...}")
    data = body.get("data")
    if not isinstance(data, dict) or data.get("resultType") != result_type:
        raise BadAnswer(f"expected data.resultType {result_type}")
    result = data.get("result")
    if not isinstance(result, list):
        raise BadAnswer("data.result is not a list")
    return result


def interpret_body(body: object) -> QueryResult:
    """A successful answer's body (decoded JSON) as one value or a failure with a reason."""
    try:
        return _interpret(body)
    except BadAnswer as exc:
        return bad_answer(str(exc))


def _interpret(body: object) -> QueryResult:
    if not isinstance(body, dict) or body.get("status") != "success":
        raise BadAnswer("expected {\"status\": \"success\", \"data\": ...}")
    data = body.get("data")
    if not isinstance(data, dict):
        raise BadAnswer("no data object")
    kind, result = data.get("resultType"), data.get("result")
    if kind == "scalar":
        return _value(_sample(result, "result"))
    if kind == "vector":
        if not isinstance(result, list):
            raise BadAnswer(f"a vector's result is {_type(result)}, expected a list")
        samples = [_series(entry, index) for index, entry in enumerate(result)]
        if not samples:
            return failed(QueryErrorReason.NO_SERIES, "query returned no series (does its selector match any "
                          "series now? check the metric name and labels; if no series means 0, set the "
                          "metric's whenEmpty: zero)")
        if len(samples) > 1:
            shown = ", ".join(_labels(entry) for entry in result[:2]) + (", ..." if len(result) > 2 else "")
            return failed(QueryErrorReason.MULTIPLE_SERIES, f"query returned {len(samples)} series "
                          f"({shown}), expected one (wrap it in sum() or avg())")
        return _value(samples[0])
    if kind == "matrix":
        return failed(QueryErrorReason.BAD_QUERY, "query returned a range vector; the autoscaler needs an "
                      "instant value (drop the [range] or wrap it in e.g. avg_over_time())")
    if kind == "string":
        return failed(QueryErrorReason.BAD_QUERY, "query returned a string; the autoscaler needs a number")
    raise BadAnswer(f"unknown resultType {_short(kind)}")


def _series(entry: object, index: int) -> str:
    where = f"result[{index}]"
    if not isinstance(entry, dict):
        raise BadAnswer(f"{where} is {_type(entry)}, expected an object")
    metric = entry.get("metric", {})
    if not isinstance(metric, dict) or not all(isinstance(k, str) and isinstance(v, str)
                                               for k, v in metric.items()):
        raise BadAnswer(f"{where}.metric is not an object of string labels")
    if "value" not in entry:
        if "histogram" in entry:
            raise BadAnswer(f"{where} is a native histogram; the autoscaler needs a float sample")
        raise BadAnswer(f"{where} has no value")
    return _sample(entry["value"], f"{where}.value")


def _sample(sample: object, where: str) -> str:
    """The value string of `[timestamp, "value"]`, after checking both parts."""
    if not isinstance(sample, list) or len(sample) != 2:
        raise BadAnswer(f"{where} is {_type(sample)}, expected [timestamp, \"value\"]")
    timestamp, value = sample
    if isinstance(timestamp, bool) or not isinstance(timestamp, int | float) or not math.isfinite(timestamp):
        raise BadAnswer(f"{where} has no numeric timestamp (got {_type(timestamp)})")
    if not isinstance(value, str):
        raise BadAnswer(f"{where}'s value is {_type(value)}, expected a string such as \"1.5\"")
    if len(value) > MAX_SAMPLE_CHARS or not _FLOAT.fullmatch(value):
        raise BadAnswer(f"{where}'s value {_short(value)} is not a number")
    return value


GRID_SLACK_SECONDS = 1e-3
"""Prometheus writes the timestamps of a range answer in milliseconds."""


@dataclass(frozen=True, slots=True)
class RangeGrid:
    """The instants a range query asks for, `start + k * step` up to `end`: Prometheus answers on them and
    nowhere else, at most once each per series."""

    start: float
    end: float
    step: float

    @property
    def points(self) -> int:
        return int((self.end - self.start) // self.step) + 1

    def covers(self, t: float) -> bool:
        """Within [start, end] (a millisecond's slack): a sample outside the window was not asked for."""
        return self.start - GRID_SLACK_SECONDS <= t <= self.end + GRID_SLACK_SECONDS

    def on_grid(self, t: float) -> bool:
        return abs(self.start + round((t - self.start) / self.step) * self.step - t) <= GRID_SLACK_SECONDS


def range_point(sample: object, where: str) -> tuple[float, float | None]:
    """`(timestamp, value)` of one sample `[timestamp, "value"]` of a range answer, both checked as every
    range reader needs them: a finite number of seconds (a bool is not one), a number in a string; NaN and
    Inf values are None. BadAnswer for another shape. Whether the timestamp is in the window asked for is
    the reader's to judge (`RangeGrid`): `tune` refuses what Prometheus never sends, `gpu-fleet` drops it."""
    if not isinstance(sample, list) or len(sample) != 2:
        raise BadAnswer(f'{where} is not [timestamp, "value"]')
    t, text = sample
    if isinstance(t, bool) or not isinstance(t, int | float) or not math.isfinite(t):
        raise BadAnswer(f"{where} has no numeric timestamp")
    if not isinstance(text, str) or len(text) > MAX_SAMPLE_CHARS or not _FLOAT.fullmatch(text):
        raise BadAnswer(f"{where}'s value is not a number in a string")
    value = float(text)
    return float(t), value if math.isfinite(value) else None


def _value(text: str) -> QueryResult:
    value = float(text)
    why = "the autoscaler treats NaN and Inf as a failed metric"
    if math.isnan(value):
        return failed(QueryErrorReason.NAN, f"query returned NaN; {why}")
    if math.isinf(value):
        return failed(QueryErrorReason.INF, f"query returned {'+Inf' if value > 0 else '-Inf'}; {why}")
    return QueryResult(value)


def _labels(entry: object) -> str:
    metric = entry.get("metric", {}) if isinstance(entry, dict) else {}
    text = "{" + ", ".join(f'{k}="{v}"' for k, v in sorted(metric.items())) + "}"
    return text if len(text) <= 200 else text[:197] + "..."


def _type(value: object) -> str:
    names = {dict: "an object", list: "a list", str: "a string", bool: "a boolean", type(None): "null",
             int: "a number", float: "a number"}
    return names.get(type(value), type(value).__name__)


def _short(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def auth_refusal(status: int, endpoint: str) -> str | None:
    """What a 401 or 403 means, whatever its body (an auth proxy answers with a login page, not JSON):
    the message for every client of the endpoint, or None for any other status."""
    if status == 401:
        return f"401 from Prometheus: check the credentials of endpoint {endpoint}"
    if status == 403:
        return (f"403 from Prometheus: endpoint {endpoint}'s credentials are not allowed to query "
                "(RBAC, tenant)")
    return None
