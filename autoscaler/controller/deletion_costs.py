"""The I/O half of a scale-down that cuts no generation: before the scale patch of a rule with
`podDeletionCost`, the target's pods get their deletion cost from the rule's per-pod query
(`autoscaler.kube.deletion_cost` decides which pods need which annotations).

Everything here is best effort for the scale-down it precedes: a failed query, a pod list or a pod patch that
fails is told in `problem` (a FailedSetDeletionCost Event, a WARNING) and the scale patch goes ahead, as a
Prometheus or API hiccup must not hold a service at a size it no longer needs. A pod gone since the list (404)
is no longer a candidate and is passed over quietly; the first other failure stops the patching, as the next
ones would most likely fail alike and each costs a request timeout.
"""

from __future__ import annotations

from dataclasses import dataclass

from autoscaler.controller.decision_log import ref_text
from autoscaler.controller.sources import EndpointSources
from autoscaler.errors import KubeError, NotFoundError
from autoscaler.kube.backend import PodAnnotator, ScaleBackend
from autoscaler.kube.deletion_cost import cost_patches
from autoscaler.policy import Rule

__all__ = ["CostsSet", "set_deletion_costs"]


@dataclass(frozen=True, slots=True)
class CostsSet:
    """What setting the deletion costs did before one scale-down."""

    pods: int = 0
    """Pods of the target listed."""
    set: int = 0
    """Pods whose cost was set or changed."""
    cleared: int = 0
    """Pods whose earlier cost of ours was cleared (now idle, or no longer in the query)."""
    problem: str | None = None
    """What failed, for the FailedSetDeletionCost Event (None: nothing)."""


def set_deletion_costs(backend: ScaleBackend, sources: EndpointSources, rule: Rule,
                       selector: str | None) -> CostsSet | None:
    """Set the costs of `rule`'s target's pods (those matching `selector`, the scale's status.selector) from
    its per-pod query; None when there is nothing to do: no `podDeletionCost`, or a backend that has no pods
    (the assumed replicas of `status`, the demo's cluster)."""
    cost = rule.pod_deletion_cost
    if cost is None or not isinstance(backend, PodAnnotator):
        return None
    target = ref_text(rule.target)
    if selector is None:
        return CostsSet(problem=f"the scale of {target} has no pod selector: no deletion costs set")
    source = sources.series_source(rule.prometheus)
    if source is None:
        why = f"endpoint {rule.prometheus!r} cannot read a per-pod query"
        return CostsSet(problem=f"{why} (no deletion costs set)")
    seen = source.run_series(cost.query, cost.pod_label)
    if seen.error is not None:
        return CostsSet(problem=f"podDeletionCost query failed: {seen.error} (no deletion costs set)")
    try:
        pods = backend.list_pods(rule.target, selector)
    except KubeError as e:
        return CostsSet(problem=f"cannot list the pods of {target}: {e} (no deletion costs set)")
    problems = []
    if seen.values and pods and not any(pod.name in seen.values for pod in pods):
        problems.append(f"the podDeletionCost query named none of the {len(pods)} pods of {target} in label "
                        f"{cost.pod_label!r} ({len(seen.values)} series, e.g. {min(seen.values)!r})")
    set_, cleared = 0, 0
    for name, patch in sorted(cost_patches(pods, seen.values).items()):
        try:
            backend.annotate_pod(rule.target.namespace, name, patch)
        except NotFoundError:
            continue
        except KubeError as e:
            problems.append(f"cannot set the deletion cost of pod {rule.target.namespace}/{name}: {e} (the "
                            "other pods are left as they are)")
            break
        if any(value is not None for value in patch.values()):
            set_ += 1
        else:
            cleared += 1
    return CostsSet(len(pods), set_, cleared, "; ".join(problems) or None)
