"""The queries behind `gpu-fleet report`: one range query per series over the whole window, each answer
validated by `fleet.prom`, merged into one timeline per GPU (`fleet.timeline.merge`).

Seven queries, whatever the size of the fleet. Filters are applied in PromQL (`== 1`, the throttling
reasons) so the answers carry only what the report counts.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from fleet.prom import FleetPrometheus, Series
from fleet.timeline import Point, Window, merge

NOT_THROTTLING = ("gpu_idle", "applications_clocks_setting", "display_clock_setting", "sync_boost")
"""Clock event reasons that are not throttling: an idle GPU, a setting, a synchronised boost."""

QUERIES: dict[str, str] = {
    "utilization": "gpu_utilization_ratio",
    "energy": "gpu_energy_consumption_joules_total",
    "health": 'gpu_health_state{state=~"throttled|critical"} == 1',
    "throttling": f'gpu_clocks_event_reason_active{{reason!~"{"|".join(NOT_THROTTLING)}"}} == 1',
    "xid": "gpu_xid_errors_total",
    "replicas": "gpu_autoscaler_current_replicas",
    "max_replicas": "gpu_autoscaler_max_replicas",
    "reasons": "gpu_autoscaler_decision_reason == 1",
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
        replicas={_rule(s): list(s.points) for s in answers["replicas"]},
        max_replicas={_rule(s): dict(s.points) for s in answers["max_replicas"]},
        reasons=_reasons(answers["reasons"]),
    )


def _rule(series: Series) -> tuple[str, str]:
    return series.labels.get("namespace", ""), series.labels.get("rule", "")


def _reasons(series: list[Series]) -> dict[tuple[str, str], list[tuple[float, str]]]:
    out: dict[tuple[str, str], list[tuple[float, str]]] = {}
    for one in series:
        reason = one.labels.get("reason", "")
        out.setdefault(_rule(one), []).extend((t, reason) for t, _ in one.points)
    for points in out.values():
        points.sort()
    return out
