"""The capacity guard on a pool short of GPUs: the same rule replayed with the guard off and on.

    .venv/bin/python -m benchmarks.autoscaling_quality      # prints this comparison after the five traces

The trace `capacity` (demo.traces.short_of_gpus) asks for ten replicas on a pool of 8 GPUs that another
tenant shares (2 GPUs, then none, then 3). Each configuration of the benchmark runs as it is ("guard off")
and with `capacity: {gpusPerReplica: 1, pendingGraceSeconds: 300}` ("guard on"), whose query returns the
GPUs no pod holds. Without
the guard the HPA asks for replicas that can only sit Pending; with it a scale-up stops at what fits. Both
are overloaded while the pool is too small: the guard cannot make GPUs, it only stops asking for absent ones.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass

from autoscaler.policy import Rule
from autoscaler.policy.spec import Capacity
from demo.cluster import ClusterSettings
from demo.replay import ReplayResult, ReplaySettings, replay
from demo.traces import Trace, short_of_gpus

POOL = ClusterSettings(nodes=1, gpus_per_node=8)
"""The pool of the capacity trace: one 8-GPU node, fewer GPUs than maxReplicas (10) x 1 GPU per replica."""
FREE_GPUS_QUERY = "cluster:gpus_unallocated:sum"
"""The GPUs no pod holds, a recording rule on our exporter's series (the replay computes what it returns)."""
GUARD = Capacity(FREE_GPUS_QUERY, gpus_per_replica=1, pending_grace_seconds=300)


@dataclass(frozen=True)
class CapacityOutcome:
    label: str
    """The configuration, e.g. '(c) previous recommended'."""
    trace: Trace
    pool: ClusterSettings
    off: ReplayResult
    on: ReplayResult

    @property
    def guard_helps(self) -> bool:
        """Pending replicas without the guard, none with it, and no more overloaded minutes."""
        off, on = self.off.figures, self.on.figures
        return (off.pending_replica_minutes > 0 and on.pending_replica_minutes == 0
                and on.overloaded_minutes <= off.overloaded_minutes)


def guarded(rule: Rule, capacity: Capacity = GUARD) -> Rule:
    """`rule` with the capacity guard (what a `capacity:` block in its rules file gives)."""
    return dataclasses.replace(rule, capacity=capacity)


def run_capacity(label: str, rule: Rule, settings: ReplaySettings, trace: Trace | None = None,
                 pool: ClusterSettings = POOL) -> CapacityOutcome:
    """`rule` without a capacity guard and with GUARD, on `trace` (short_of_gpus) over `pool`, the other
    settings (start-up delay, sync period) as in `settings`."""
    trace = trace or short_of_gpus()
    pool = dataclasses.replace(pool, startup_delay_seconds=settings.cluster.startup_delay_seconds)
    on_pool = dataclasses.replace(settings, cluster=pool)
    off = replay(dataclasses.replace(rule, capacity=None), trace, on_pool)
    on = replay(guarded(rule), trace, on_pool)
    return CapacityOutcome(label, trace, pool, off, on)


def capacity_table(outcomes: Sequence[CapacityOutcome]) -> str:
    """Two rows per configuration, guard off and on."""
    lines = ["| configuration | capacity guard | GPU-hours | overloaded min | Pending replica-min "
             "| peak Pending | capacity-limited syncs | scale changes | other tenant's wait, GPU-min |",
             "|---|---|---:|---:|---:|---:|---:|---:|---:|"]
    for outcome in outcomes:
        for guard, result in (("off", outcome.off), ("on", outcome.on)):
            f = result.figures
            lines.append(f"| {outcome.label} | {guard} | {f.gpu_hours:.2f} | {f.overloaded_minutes:.1f} | "
                         f"{f.pending_replica_minutes:.1f} | {f.peak_pending} | {f.capacity_limited_syncs} | "
                         f"{f.scale_changes} | {f.others_waiting_gpu_minutes:.1f} |")
    return "\n".join(lines)


def capacity_verdict(outcomes: Sequence[CapacityOutcome]) -> str:
    lines = []
    for outcome in outcomes:
        off, on = outcome.off.figures, outcome.on.figures
        mark = "met" if outcome.guard_helps else "NOT met"
        lines.append(f"- {outcome.label}: {mark}: Pending replica-minutes {on.pending_replica_minutes:.1f} "
                     f"with the guard vs {off.pending_replica_minutes:.1f} without (peak {on.peak_pending} "
                     f"vs {off.peak_pending}), overloaded minutes {on.overloaded_minutes:.1f} vs "
                     f"{off.overloaded_minutes:.1f}, GPU-hours {on.gpu_hours:.2f} vs {off.gpu_hours:.2f}")
    return "\n".join(lines)
