"""`slo` of a rules file: the latency query and its objective, the metric whose target is learned, how far
back, the bounds the learned target keeps to, and whether it acts."""

from __future__ import annotations

import re
from typing import cast

from yaml.nodes import Node

from autoscaler.policy.spec import MetricSpec, Slo, SloMode
from plumbing.prometheus.syntax import duration_seconds
from plumbing.yamlnodes import NodeReader, line_of

__all__ = ["MAX_LOOKBACK_SECONDS", "MAX_OBJECTIVE_SECONDS", "MIN_LOOKBACK_SECONDS", "parse_slo"]

MIN_LOOKBACK_SECONDS = 3_600
"""An hour: less history than that cannot hold enough minutes near the objective to learn from."""
MAX_LOOKBACK_SECONDS = 14 * 86_400
"""Two weeks at one point a minute is 20,160 points per query: two range requests, about 600 KB each."""
MAX_OBJECTIVE_SECONDS = 3_600.0
"""A latency objective of more than an hour is a typo (milliseconds for seconds)."""
MAX_BOUND = 1e15  # as a metric's target

_LOOKBACK = re.compile(r"(?:[0-9]+(?:s|m|h|d|w))+")
_FIELDS = {"latency", "objectiveSeconds", "learn", "lookback", "bounds", "mode"}


def parse_slo(reader: NodeReader, node: Node, where: str, metrics: tuple[MetricSpec, ...]) -> Slo | None:
    """The block, or None after reporting each bad field; `learn` must name one of the rule's `metrics`
    (when they parsed)."""
    fields = reader.mapping(node, where, _FIELDS, required=("latency", "objectiveSeconds", "learn", "bounds"))
    if fields is None:
        return None
    before = len(reader.problems)
    latency = reader.string(fields["latency"], f"{where}.latency") if "latency" in fields else None
    objective = None
    if "objectiveSeconds" in fields:
        objective = reader.number(fields["objectiveSeconds"], f"{where}.objectiveSeconds", above=0,
                                  high=MAX_OBJECTIVE_SECONDS)
    learn = reader.string(fields["learn"], f"{where}.learn") if "learn" in fields else None
    names = [m.name for m in metrics]
    if learn is not None and names and learn not in names:
        reader.problem(line_of(fields["learn"]), f"{where}.learn",
                       f"expected the name of one of the rule's metrics ({', '.join(names)}) (got {learn!r})")
    lookback = 7 * 86_400
    if "lookback" in fields:
        lookback = _lookback(reader, fields["lookback"], f"{where}.lookback") or lookback
    low = high = None
    if "bounds" in fields:
        low, high = _bounds(reader, fields["bounds"], f"{where}.bounds")
    mode = "scale"
    if "mode" in fields:
        mode = reader.choice(fields["mode"], f"{where}.mode", ("scale", "observe")) or mode
    if len(reader.problems) > before or latency is None or objective is None or learn is None \
            or low is None or high is None:
        return None
    return Slo(latency=latency.strip(), objective_seconds=objective, learn=learn, lookback_seconds=lookback,
               bound_min=low, bound_max=high, mode=cast(SloMode, mode), line=line_of(node))


def _lookback(reader: NodeReader, node: Node, where: str) -> int | None:
    """A duration such as `7d` or `36h`, in [an hour, two weeks]."""
    text = reader.string(node, where)
    if text is None:
        return None
    if not _LOOKBACK.fullmatch(text.strip()):
        reader.problem(line_of(node), where, f"expected a duration such as 7d, 36h or 90m (got {text!r})")
        return None
    seconds = int(duration_seconds(text.strip()))
    if not MIN_LOOKBACK_SECONDS <= seconds <= MAX_LOOKBACK_SECONDS:
        reader.problem(line_of(node), where, f"expected a duration from 1h to 14d (got {text!r})")
        return None
    return seconds


def _bounds(reader: NodeReader, node: Node, where: str) -> tuple[float | None, float | None]:
    fields = reader.mapping(node, where, {"min", "max"}, required=("min", "max"))
    if fields is None:
        return None, None
    low = high = None
    if "min" in fields:
        low = reader.number(fields["min"], f"{where}.min", above=0, high=MAX_BOUND)
    if "max" in fields:
        high = reader.number(fields["max"], f"{where}.max", above=0, high=MAX_BOUND)
    if low is not None and high is not None and low > high:
        reader.problem(line_of(fields["max"]), f"{where}.max",
                       f"expected max >= min (got {high:g} < {low:g})")
        return None, None
    return low, high
