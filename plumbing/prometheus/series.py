"""An instant vector read series by series: each series' value under one of its labels (a pod's in-flight
requests by its `pod` label), for the queries whose answer is meant to be many series.

The envelope and every sample are checked as for a single value (`answer`); a series without the label, or
whose value is NaN or Inf, is left out (counted in `skipped`) rather than failing the others.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field

from plumbing.prometheus.answer import BadAnswer, range_point, result_of

__all__ = ["SeriesValues", "series_values"]

MAX_SERIES = 10_000
"""More series than a target has pods by far: an answer beyond it is not a per-pod query's."""


@dataclass(frozen=True, slots=True)
class SeriesValues:
    """Each series' value by its `label`'s value (series sharing one are summed), or why there is none."""

    values: Mapping[str, float] = field(default_factory=dict)
    skipped: int = 0
    """Series without the label, or whose value is NaN or Inf."""
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.error is None


def series_values(body: object, label: str) -> SeriesValues:
    """The decoded answer of an instant query as values by `label`; BadAnswer when it is not a vector."""
    result = result_of(body, "vector")
    if len(result) > MAX_SERIES:
        raise BadAnswer(f"{len(result):,} series, more than {MAX_SERIES:,}")
    values: dict[str, float] = {}
    skipped = 0
    for index, entry in enumerate(result):
        where = f"result[{index}]"
        if not isinstance(entry, dict) or not isinstance(entry.get("metric", {}), dict):
            raise BadAnswer(f"{where} is not a series with a metric object")
        _, value = range_point(entry.get("value"), f"{where}.value")
        name = entry.get("metric", {}).get(label)
        if not isinstance(name, str) or not name or value is None or not math.isfinite(value):
            skipped += 1
            continue
        values[name] = values.get(name, 0.0) + value
    return SeriesValues(values, skipped)
