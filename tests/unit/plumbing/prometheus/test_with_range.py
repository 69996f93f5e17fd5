"""`with_range`: a query's ranges shortened to the panic window, and nothing else of the query touched."""

from __future__ import annotations

import pytest

from plumbing.prometheus.syntax import duration_seconds, syntax_error, with_range


@pytest.mark.parametrize(("query", "expected"), [
    ("sum(rate(x[2m]))", "sum(rate(x[30s]))"),
    ("rate(x[1h30m] offset 5m)", "rate(x[30s] offset 5m)"),  # the offset is not a range
    ("avg_over_time(y[10m:15s])", "avg_over_time(y[30s:15s])"),  # the subquery's step is kept
    ("max_over_time(y[5m:])", "max_over_time(y[30s:])"),
    ('sum(rate(x{path="/a[5m]"}[2m]))', 'sum(rate(x{path="/a[5m]"}[30s]))'),  # brackets in a string
    ("rate(x[20s])", "rate(x[20s])"),  # already shorter: kept
    ("max(vllm:num_requests_waiting)", "max(vllm:num_requests_waiting)"),  # no range
    ("histogram_quantile(0.9, sum by (le) (rate(h_bucket[2m]))) / on() group_left rate(c[5m])",
     "histogram_quantile(0.9, sum by (le) (rate(h_bucket[30s]))) / on() group_left rate(c[30s])"),
])
def test_every_longer_range_and_only_ranges_are_shortened(query: str, expected: str) -> None:
    assert with_range(query, 30) == expected
    assert syntax_error(expected) is None


@pytest.mark.parametrize(("text", "seconds"), [("90s", 90), ("1h30m", 5400), ("500ms", 0.5), ("1w", 604_800)])
def test_durations_read_as_promql_reads_them(text: str, seconds: float) -> None:
    assert duration_seconds(text) == seconds
