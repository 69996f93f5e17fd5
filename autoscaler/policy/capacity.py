"""The capacity guard, as a pure stage: never scale a GPU service into Pending pods.

The HPA and KEDA scale up whatever the cluster can hold (kubernetes/kubernetes#79158): on a full cluster the
new replicas sit Pending, hold nothing but a place in the scheduler's queue, and stay counted when the HPA
looks at the next scale-up. The guard limits a scale-up to what fits: floor(free GPUs / GPUs per replica) more
replicas per sync, and none while replicas added earlier have been Pending as unschedulable for longer than a
grace period (a cluster autoscaler adding nodes gets that long). Scale-downs pass unchanged. The caller
observes the free GPUs (the rule's capacity query) and the Pending replicas; a failed capacity query limits
nothing (the caller reports it): a Prometheus hiccup must not freeze a service under load.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

from autoscaler.policy.ages import older_than
from autoscaler.policy.decision import Reason, Stage

if TYPE_CHECKING:
    from autoscaler.policy.spec import Capacity


@dataclass(frozen=True, slots=True)
class CapacityObservation:
    """What the capacity guard needs from one sync."""

    free_gpus: float | None
    """What the capacity query returned (None: it failed, `error` says why)."""
    unschedulable_since: tuple[float, ...] = ()
    """For each replica of the target Pending as unschedulable: since when (the same clock as `now`)."""
    error: str | None = None

    def stuck(self, grace_seconds: float, now: float) -> int:
        """Replicas Pending as unschedulable for more than `grace_seconds`."""
        beyond = older_than(grace_seconds)
        return sum(1 for since in self.unschedulable_since if now - since > beyond)


def guard_capacity(capacity: Capacity, current: int, replicas: int, seen: CapacityObservation,
                   now: float) -> Stage | None:
    """The scale-up `current -> replicas` limited by capacity, or None when it fits (or is no scale-up)."""
    if replicas <= current:
        return None
    stuck = seen.stuck(capacity.pending_grace_seconds, now)
    if stuck:
        return Stage(current, Reason.CapacityLimited,
                     f"{stuck} replica(s) Pending as unschedulable for more than "
                     f"{capacity.pending_grace_seconds}s: hold {current} (not {replicas}) until they run")
    if seen.free_gpus is None:
        return None
    room = math.floor(max(seen.free_gpus, 0.0) / capacity.gpus_per_replica)
    if current + room >= replicas:
        return None
    return Stage(current + room, Reason.CapacityLimited,
                 f"{seen.free_gpus:g} free GPU(s), {capacity.gpus_per_replica} per replica: {room} more "
                 f"replica(s) fit: {current} -> {current + room} (not {replicas})")
