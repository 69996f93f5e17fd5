"""The queries behind `gpu-fleet report`: one range query per series over the whole window, each answer
validated by `fleet.prom`, merged into one timeline per GPU (`fleet.timeline.merge`).

Eight queries, whatever the size of the fleet. Filters are applied in PromQL (`== 1`, the throttling
reasons) so the answers carry only what the report counts. The autoscaler's series are read from the replica
that holds the leader lease at each step (`LEADER`, as the shipped alert rules read them): a replica that
lost its lease keeps showing its last decision. A failover hands a rule's series to another replica (another
`instance`), so a rule's timeline is the union of its series.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from fleet.prom import FleetPrometheus, Series
from fleet.timeline import Point, Window, merge

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


def fetch(client: FleetPrometheus, window: Window, progress: Progress) -> Inputs:
    answers: dict[str, list[Series]] = {}
    for number, (name, query) in enumerate(QUERIES.items(), start=1):
        progress(f"query {number}/{len(QUERIES)}: {name} ({window.points:,} steps of {window.step:g}s)")
        answers[name] = client.matrix(query, window.start, window.end, window.step)
    return Inputs(
        window=window,
        utilization=merge(answers["utilization"], window.step),
        energy=merge(answers["energy"], window.step),
        health=merge(answers["health"], window.step, ("state",)),
        throttling=merge(answers["throttling"], window.step, ("reason",)),
        xid=merge(answers["xid"], window.step, ("xid",)),
        replicas={rule: sorted(points.items()) for rule, points in _by_rule(answers["replicas"]).items()},
        max_replicas=_by_rule(answers["max_replicas"]),
        reasons=_reasons(answers["reasons"]),
    )


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
