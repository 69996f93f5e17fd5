"""The pod-deletion-cost annotations set before a Deployment's scale-down, and which pods need which: pure,
so the controller, the demo and the tests share one ranking.

A ReplicaSet that scales down removes, among pods otherwise alike (scheduled, running, ready), those with the
lowest `controller.kubernetes.io/pod-deletion-cost` first. Each pod's cost is its in-flight requests (the
rule's per-pod query), so the idlest go and no running generation is cut while an idle pod remains. Ours are
marked: `gpu-autoscaler.io/pod-deletion-cost` holds the value we wrote, so a cost that differs from it (or has
no mark) is the user's and is never changed or cleared. A pod at 0, or absent from the query, carries none
(0 is the default); a cost we set earlier on such a pod is cleared, so the ranking is always this
scale-down's. Only pods whose annotations change are patched: the API server sees one write per pod whose
load changed, not one per pod per scale-down.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping

from autoscaler.kube.backend import PodMeta

__all__ = ["COST_ANNOTATION", "OURS_ANNOTATION", "cost_of", "cost_patches"]

COST_ANNOTATION = "controller.kubernetes.io/pod-deletion-cost"
OURS_ANNOTATION = "gpu-autoscaler.io/pod-deletion-cost"
"""The cost we wrote on the pod: a cost equal to it is ours to change and clear, any other the user's."""
MAX_INT32 = 2**31 - 1
"""The annotation's value is an int32 (the API server refuses the pod update otherwise)."""


def cost_of(in_flight: float) -> int:
    """The cost of a pod with `in_flight` requests: rounded up (a pod with any work outranks an idle one),
    within [0, int32]."""
    if not math.isfinite(in_flight) or in_flight <= 0:
        return 0
    return min(math.ceil(in_flight), MAX_INT32)


def cost_patches(pods: Iterable[PodMeta], in_flight: Mapping[str, float],
                 ) -> dict[str, dict[str, str | None]]:
    """For each pod whose annotations must change: the merge patch of its annotations (None removes one).
    A pod whose cost is the user's is left out."""
    patches: dict[str, dict[str, str | None]] = {}
    for pod in pods:
        current, ours = pod.annotations.get(COST_ANNOTATION), pod.annotations.get(OURS_ANNOTATION)
        if current is not None and current != ours:
            continue  # the user's own cost (or one changed since we wrote it)
        cost = cost_of(in_flight.get(pod.name, 0.0))
        if cost > 0 and (current, ours) != (str(cost), str(cost)):
            patches[pod.name] = {COST_ANNOTATION: str(cost), OURS_ANNOTATION: str(cost)}
        elif cost == 0 and ours is not None:
            patches[pod.name] = {COST_ANNOTATION: None, OURS_ANNOTATION: None}
    return patches
