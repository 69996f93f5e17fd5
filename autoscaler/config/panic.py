"""`behavior.panic` of a rules file: Knative's panic mode fields, and each metric's query over its window.

The panic window is read by shortening the ranges of the metric's own query (`rate(x[2m])` becomes
`rate(x[30s])`), so a rule states its signal once; a query with no range (a gauge such as
`vllm:num_requests_waiting`) is its own short-window value and costs no second query.
"""

from __future__ import annotations

import dataclasses

from yaml.nodes import Node

from autoscaler.policy.spec import (
    DEFAULT_PANIC_THRESHOLD_PERCENT,
    DEFAULT_PANIC_WINDOW_SECONDS,
    MetricSpec,
    Panic,
)
from plumbing.prometheus.syntax import with_range
from plumbing.yamlnodes import NodeReader

__all__ = ["MAX_PANIC_THRESHOLD_PERCENT", "MAX_PANIC_WINDOW_SECONDS", "MIN_PANIC_THRESHOLD_PERCENT",
           "parse_panic", "with_panic_queries"]

MIN_PANIC_THRESHOLD_PERCENT = 110.0  # Knative's bounds of panic-threshold-percentage
MAX_PANIC_THRESHOLD_PERCENT = 1000.0
MAX_PANIC_WINDOW_SECONDS = 600
"""Ten minutes: a longer window is no longer short, and the scale-up window does that job."""


def parse_panic(reader: NodeReader, node: Node, where: str) -> Panic | None:
    fields = reader.mapping(node, where, {"windowSeconds", "thresholdPercent"})
    if fields is None:
        return None
    window = DEFAULT_PANIC_WINDOW_SECONDS
    if "windowSeconds" in fields:
        window = reader.integer(fields["windowSeconds"], f"{where}.windowSeconds", low=1,
                                high=MAX_PANIC_WINDOW_SECONDS) or DEFAULT_PANIC_WINDOW_SECONDS
    threshold = DEFAULT_PANIC_THRESHOLD_PERCENT
    if "thresholdPercent" in fields:
        threshold = reader.number(fields["thresholdPercent"], f"{where}.thresholdPercent",
                                  low=MIN_PANIC_THRESHOLD_PERCENT,
                                  high=MAX_PANIC_THRESHOLD_PERCENT) or DEFAULT_PANIC_THRESHOLD_PERCENT
    return Panic(window_seconds=window, threshold_percent=threshold)


def with_panic_queries(metrics: tuple[MetricSpec, ...], panic: Panic | None) -> tuple[MetricSpec, ...]:
    """Each metric with its query over the panic window ("" when it has no range to shorten)."""
    if panic is None:
        return metrics
    shortened = []
    for metric in metrics:
        query = with_range(metric.query, panic.window_seconds)
        shortened.append(dataclasses.replace(metric, panic_query="" if query == metric.query else query))
    return tuple(shortened)
