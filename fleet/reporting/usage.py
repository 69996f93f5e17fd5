"""What `gpu-fleet report` computes from the timelines `fetch` read: pure functions, no I/O, no clock.

Every point of a timeline stands for one step of the window (`step` seconds). Definitions:

- **GPU-hours**: points x step. **Busy GPU-hours**: the sum of utilization x step. **Utilization**: busy /
  GPU-hours.
- **Idle GPU-hours**: the GPU-hours of hours (whole hours from the window's start, per GPU and holder) whose
  average utilization is below the threshold (5 % by default), compared exactly (`mean_below`: seven samples
  of 0.05 average 0.05, not the 0.04999... their float sum gives). **Allocated-but-idle**: the same, held by
  a pod.
- **Workload**: the pod's owner name as its pod name shows it (`workload_of`).
- **Energy**: the increase of `gpu_energy_consumption_joules_total` per GPU (a decrease is a reset: the new
  value counts), attributed to the holder of the step it happened in. The energy timeline starts one step
  before the window (`fetch`), so its n increases cover the same n steps as the n utilization points
  of GPU time; a point before the window is only the base of the first increase.
- **Incidents**: runs of consecutive steps in `throttled` or `critical` health, with start and duration.
- **XIDs**: increases of `gpu_xid_errors_total{xid}`; a counter that appears inside the window counts from 0
  (the exporter serves it from the first XID on).
- **Scaling**: a change of `gpu_autoscaler_current_replicas` is a scale event; time at max is the time
  current >= max replicas; reason shares are the share of steps each `gpu_autoscaler_decision_reason` was 1.
"""

from __future__ import annotations

import itertools
import math
import re
from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction

from fleet.reporting.fetch import Inputs
from fleet.reporting.timeline import Point, Window
from plumbing.numbers import ascii_int

UNALLOCATED = "(unallocated)"
_SAFE = "bcdfghjklmnpqrstvwxz2456789"
"""The alphabet Kubernetes draws generated name suffixes from (no vowels: no words by accident)."""
_RANDOM = re.compile(rf"[{_SAFE}]{{5}}")
_HASH = re.compile(rf"[{_SAFE}]{{5,10}}")


def workload_of(pod: str) -> str:
    """The owner's name: strip a StatefulSet ordinal (`-0`) or a generated 5-character suffix (`-x7k2p`),
    then, after either, a ReplicaSet's pod-template hash (`-7d9f8c6b5d`): `embed-7d9f8c6b5d-x7k2p` -> `embed`,
    `train-0` -> `train`, `batch-job-x7k2p` -> `batch-job`. A name without such suffixes is its own."""
    parts = pod.split("-")
    if len(parts) > 1 and (ascii_int(parts[-1]) is not None or _RANDOM.fullmatch(parts[-1])):
        parts.pop()
        if len(parts) > 1 and _HASH.fullmatch(parts[-1]) and any(c in "0123456789" for c in parts[-1]):
            parts.pop()
    return "-".join(parts)


def mean_below(values: Sequence[float], threshold: float) -> bool:
    """mean(values) < threshold, exactly: a correctly rounded sum decides when it is clearly apart from
    threshold x n; near the boundary the values are added as exact fractions."""
    total, bound = math.fsum(values), threshold * len(values)
    if abs(total - bound) > 1e-9 * abs(bound):
        return total < bound
    return sum(map(Fraction, values), Fraction(0)) < Fraction(threshold) * len(values)


@dataclass(frozen=True)
class Prices:
    per_gpu_hour: float | None = None
    per_kwh: float | None = None


@dataclass
class Usage:
    """One row of a usage table (a node, a namespace or a workload)."""

    name: str
    gpu_hours: float = 0.0
    busy_gpu_hours: float = 0.0
    idle_gpu_hours: float = 0.0
    allocated_idle_gpu_hours: float = 0.0
    energy_kwh: float = 0.0
    utilization: float = 0.0
    gpu_cost: float | None = None
    energy_cost: float | None = None


@dataclass
class IdleAllocation:
    """A pod's hold on one GPU, with the hours it held it idle (the biggest saving first)."""

    namespace: str
    pod: str
    workload: str
    node: str
    gpu: str
    uuid: str
    held_gpu_hours: float = 0.0
    idle_gpu_hours: float = 0.0
    utilization: float = 0.0


@dataclass(frozen=True)
class Incident:
    node: str
    gpu: str
    uuid: str
    state: str
    start: float
    duration_seconds: float


@dataclass(frozen=True)
class Throttling:
    node: str
    reason: str
    gpu_hours: float


@dataclass(frozen=True)
class XidEvent:
    node: str
    gpu: str
    uuid: str
    xid: str
    time: float
    count: float


@dataclass(frozen=True)
class ScaleEvent:
    namespace: str
    rule: str
    time: float
    from_replicas: float
    to_replicas: float


@dataclass(frozen=True)
class RuleSummary:
    namespace: str
    rule: str
    scale_ups: int
    scale_downs: int
    seconds_at_max: float
    share_at_max: float
    reason_shares: dict[str, float]


@dataclass
class Report:
    window: Window
    threshold: float
    prices: Prices
    total: Usage
    nodes: list[Usage]
    namespaces: list[Usage]
    workloads: list[Usage]
    allocated_idle: list[IdleAllocation]
    incidents: list[Incident]
    throttling: list[Throttling]
    xids: list[XidEvent]
    rules: list[RuleSummary]
    scale_events: list[ScaleEvent]
    hourly: dict[str, list[float | None]] = field(default_factory=dict)
    """'node/gpu' -> average utilization of each hour of the window (None: no data): the heatmap."""


def compute(inputs: Inputs, threshold: float = 0.05, prices: Prices | None = None) -> Report:
    prices = prices or Prices()
    window = inputs.window
    hours_per_point = window.step / 3600.0
    hour_count = max(1, int(-(-window.seconds // 3600)))
    tables: dict[str, dict[str, Usage]] = {"node": {}, "namespace": {}, "workload": {}}
    total = Usage("total")
    holds: dict[tuple[str, str, str, str], IdleAllocation] = {}
    hourly: dict[str, list[float | None]] = {}

    def rows(labels: Mapping[str, str]) -> list[Usage]:
        namespace, pod = labels.get("namespace", ""), labels.get("pod", "")
        names = {"node": labels.get("node", ""),
                 "namespace": namespace if pod else UNALLOCATED,
                 "workload": f"{namespace}/{workload_of(pod)}" if pod else UNALLOCATED}
        return [total, *(tables[kind].setdefault(name, Usage(name)) for kind, name in names.items())]

    for (node, uuid), points in sorted(inputs.utilization.items()):
        gpu = points[0].labels.get("gpu", "")
        buckets: dict[tuple[int, str, str], list[Point]] = defaultdict(list)
        for point in points:
            bucket = int((point.t - window.start) // 3600)
            buckets[(bucket, point.labels.get("namespace", ""), point.labels.get("pod", ""))].append(point)
        sums: dict[int, list[float]] = defaultdict(list)
        for (bucket, namespace, pod), members in buckets.items():
            values = [p.value for p in members]
            sums[bucket].extend(values)
            gpu_hours, busy = len(values) * hours_per_point, sum(values) * hours_per_point
            idle = gpu_hours if mean_below(values, threshold) else 0.0
            for row in rows(members[-1].labels):
                row.gpu_hours += gpu_hours
                row.busy_gpu_hours += busy
                row.idle_gpu_hours += idle
                row.allocated_idle_gpu_hours += idle if pod else 0.0
            if pod:
                hold = holds.setdefault((namespace, pod, node, uuid), IdleAllocation(
                    namespace, pod, workload_of(pod), node, gpu, uuid))
                hold.held_gpu_hours += gpu_hours
                hold.idle_gpu_hours += idle
                hold.utilization += busy
        hourly[f"{node}/{gpu}"] = [sum(sums[b]) / len(sums[b]) if sums.get(b) else None
                                   for b in range(hour_count)]
    for points in inputs.energy.values():
        for before, point in itertools.pairwise(points):
            if point.t < window.start:
                continue
            delta = point.value - before.value if point.value >= before.value else point.value
            for row in rows(point.labels):
                row.energy_kwh += delta / 3.6e6
    every = [total, *(row for table in tables.values() for row in table.values())]
    for row in every:
        row.utilization = row.busy_gpu_hours / row.gpu_hours if row.gpu_hours else 0.0
        if prices.per_gpu_hour is not None:
            row.gpu_cost = row.gpu_hours * prices.per_gpu_hour
        if prices.per_kwh is not None:
            row.energy_cost = row.energy_kwh * prices.per_kwh
    for hold in holds.values():
        hold.utilization = hold.utilization / hold.held_gpu_hours if hold.held_gpu_hours else 0.0
    ranked = sorted((h for h in holds.values() if h.idle_gpu_hours > 0),
                    key=lambda h: (-h.idle_gpu_hours, h.namespace, h.pod))
    scale_events, rules = _scaling(inputs)
    return Report(
        window=window, threshold=threshold, prices=prices, total=total,
        nodes=_sorted(tables["node"]), namespaces=_sorted(tables["namespace"]),
        workloads=_sorted(tables["workload"]), allocated_idle=ranked,
        incidents=_incidents(inputs), throttling=_throttling(inputs), xids=_xids(inputs),
        rules=rules, scale_events=scale_events, hourly=hourly)


def _sorted(table: dict[str, Usage]) -> list[Usage]:
    return sorted(table.values(), key=lambda row: (-row.gpu_hours, row.name))


def _runs(points: list[Point], step: float) -> list[list[Point]]:
    """Runs of points at most one step apart."""
    runs: list[list[Point]] = []
    for point in points:
        if runs and point.t - runs[-1][-1].t <= step * 1.5:
            runs[-1].append(point)
        else:
            runs.append([point])
    return runs


def _incidents(inputs: Inputs) -> list[Incident]:
    step = inputs.window.step
    found = [Incident(node, run[0].labels.get("gpu", ""), uuid, state, run[0].t, run[-1].t - run[0].t + step)
             for (node, uuid, state), points in inputs.health.items() for run in _runs(points, step)]
    return sorted(found, key=lambda i: (i.start, i.node, i.gpu, i.state))


def _throttling(inputs: Inputs) -> list[Throttling]:
    hours: dict[tuple[str, str], float] = defaultdict(float)
    for (node, _uuid, reason), points in inputs.throttling.items():
        hours[(node, reason)] += len(points) * inputs.window.step / 3600.0
    return [Throttling(node, reason, value) for (node, reason), value in sorted(hours.items())]


def _xids(inputs: Inputs) -> list[XidEvent]:
    window = inputs.window
    events: list[XidEvent] = []
    for (node, uuid, xid), points in inputs.xid.items():
        gpu = points[0].labels.get("gpu", "")
        if points[0].t > window.start + window.step / 2 and points[0].value > 0:
            events.append(XidEvent(node, gpu, uuid, xid, points[0].t, points[0].value))
        for before, point in itertools.pairwise(points):
            delta = point.value - before.value if point.value >= before.value else point.value
            if delta > 0:
                events.append(XidEvent(node, gpu, uuid, xid, point.t, delta))
    return sorted(events, key=lambda e: (e.time, e.node, e.gpu, e.xid))


def _scaling(inputs: Inputs) -> tuple[list[ScaleEvent], list[RuleSummary]]:
    events: list[ScaleEvent] = []
    summaries: list[RuleSummary] = []
    step = inputs.window.step
    for (namespace, rule), points in sorted(inputs.replicas.items()):
        ordered = sorted(points)
        mine = [ScaleEvent(namespace, rule, t, before, value)
                for (_, before), (t, value) in itertools.pairwise(ordered) if value != before]
        events.extend(mine)
        maximum = inputs.max_replicas.get((namespace, rule), {})
        at_max = sum(1 for t, value in ordered if t in maximum and value >= maximum[t])
        counts = Counter(reason for _, reason in inputs.reasons.get((namespace, rule), []))
        steps = sum(counts.values())
        summaries.append(RuleSummary(
            namespace, rule, sum(1 for e in mine if e.to_replicas > e.from_replicas),
            sum(1 for e in mine if e.to_replicas < e.from_replicas), at_max * step,
            at_max / len(ordered) if ordered else 0.0,
            {reason: count / steps for reason, count in sorted(counts.items())}))
    return events, summaries
