"""The queries behind `gpu-fleet report`: one range query per series over the whole window, each answer
validated by `fleet.querying.prom`, merged into one timeline per GPU (`timeline.merge`).

Eight queries, whatever the size of the fleet, after one instant query that counts its GPUs: the step grows
with them (`timeline.report_window`), so the report's memory does not. Filters are applied in PromQL
(`== 1`, the throttling reasons) so the answers carry only what the report counts. The autoscaler's series
are read from the replica that holds the leader lease at each step (`LEADER`, as the shipped alert rules
read them): a replica that lost its lease keeps showing its last decision. A failover hands a rule's series
to another replica (another `instance`), so a rule's timeline is the union of its series.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from fleet.querying.prom import FleetPrometheus, Series
from fleet.reporting.timeline import POINT_BUDGET, Point, Window, merge

NOT_THROTTLING = ("gpu_idle", "applications_clocks_setting", "display_clock_setting", "sync_boost")
"""Clock event reasons that are not throttling: an idle GPU, a setting, a synchronised boost."""

LEADER = "and on (instance) (gpu_autoscaler_leader == 1)"
"""Keeps the series of the autoscaler replica that leads (always 1 without --leader-elect)."""

QUERIES: dict[str, str] = {
    "utilization": "gpu_utilization_ratio",
    "energy": "gpu_energy_consumption_joules_total",
    "health": 'gpu_health_state{state=~"throttled|critical"} == 1',
    "throttling": f'gpu_clocks_event_reason_active{{reason!~"{"|".join(NOT_THROTTLING)}"}} == 1',
    "xid": "gpu_xid_errors_total",
    "replicas": f"gpu_autoscaler_current_replicas {LEADER}",
    "max_replicas": f"gpu_autoscaler_max_replicas {LEADER}",
    "reasons": f"(gpu_autoscaler_decision_reason == 1) {LEADER}",
}

Timelines = dict[tuple[str, ...], list[Point]]
Progress = Callable[[str], None]


@dataclass(frozen=True)
class Inputs:
    """Everything the report computes from, per GPU (or per rule) and instant."""

    window: Window
    utilization: Timelines
    energy: Timelines
    health: Timelines
    """(node, uuid, state) -> the instants the GPU was in `state` (throttled or critical)."""
    throttling: Timelines
    """(node, uuid, reason) -> the instants `reason` was active."""
    xid: Timelines
    """(node, uuid, xid) -> the counter."""
    replicas: dict[tuple[str, str], list[tuple[float, float]]]
    """(namespace, rule) -> (t, current replicas)."""
    max_replicas: dict[tuple[str, str], dict[float, float]]
    reasons: dict[tuple[str, str], list[tuple[float, str]]]


GPUS_IN_WINDOW = "count(group by (node, uuid) (last_over_time(gpu_utilization_ratio[{seconds}s])))"
"""How many GPUs had a utilization series at any time in the window: what the report's step is sized by."""
MAX_ANSWER_BYTES = 16 * 1024 * 1024
"""A report's range answer: MAX_POINTS_FACTOR * POINT_BUDGET points are ~10 MB of JSON; beyond, it is refused
as it streams, before it is parsed (parsed, JSON takes ~10 times its size)."""
MAX_POINTS_FACTOR = 4
"""An answer may hold this many times the points the window and the counted GPUs allow (health, throttling
and XID series are per reason and label; a fleet that grows during the window): beyond, it is refused."""


def gpus_in_window(client: FleetPrometheus, since: float, end: float) -> int:
    samples = client.vector(GPUS_IN_WINDOW.format(seconds=max(1, math.ceil(since))), at=end)
    count = samples[0].value if samples else 0.0
    return int(min(max(count, 0.0), 10_000_000))


def fetch(client: FleetPrometheus, window: Window, progress: Progress) -> Inputs:
    """Each answer merged into timelines as soon as it arrives, so one answer's series are held at a time."""
    budget = POINT_BUDGET * MAX_POINTS_FACTOR
    merged: dict[str, object] = {}
    for number, (name, query) in enumerate(QUERIES.items(), start=1):
        progress(f"query {number}/{len(QUERIES)}: {name} ({window.points:,} steps of {window.step:g}s)")
        start = window.start - (window.step if name == "energy" else 0.0)  # the base of the first increase
        series = client.matrix(query, start, window.end, window.step, max_points=budget)
        merged[name] = _MERGES[name](series, window.step)
        del series
    return Inputs(window=window, **merged)  # type: ignore[arg-type]


_MERGES: dict[str, Callable[[list[Series], float], object]] = {
    "utilization": lambda series, step: merge(series, step),
    "energy": lambda series, step: merge(series, step),
    "health": lambda series, step: merge(series, step, ("state",)),
    "throttling": lambda series, step: merge(series, step, ("reason",)),
    "xid": lambda series, step: merge(series, step, ("xid",)),
    "replicas": lambda series, _: {rule: sorted(points.items()) for rule, points in _by_rule(series).items()},
    "max_replicas": lambda series, _: _by_rule(series),
    "reasons": lambda series, _: _reasons(series),
}
"""Each query's series into the Inputs field of the same name."""


def _rule(series: Series) -> tuple[str, str]:
    return series.labels.get("namespace", ""), series.labels.get("rule", "")


def _by_rule(series: list[Series]) -> dict[tuple[str, str], dict[float, float]]:
    """Each rule's points from all its series (the replicas that led it in turn); where two led at once, in
    the moment of a failover, the larger count."""
    out: dict[tuple[str, str], dict[float, float]] = {}
    for one in series:
        points = out.setdefault(_rule(one), {})
        for t, value in one.points:
            points[t] = max(value, points.get(t, value))
    return out


def _reasons(series: list[Series]) -> dict[tuple[str, str], list[tuple[float, str]]]:
    out: dict[tuple[str, str], list[tuple[float, str]]] = {}
    for one in series:
        reason = one.labels.get("reason", "")
        out.setdefault(_rule(one), []).extend((t, reason) for t, _ in one.points)
    for points in out.values():
        points.sort()
    return out
