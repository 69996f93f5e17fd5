"""Stages 0 and 3: minReplicas/maxReplicas, as corrections before everything and as bounds on a change."""

from __future__ import annotations

from autoscaler.policy.decision import Reason, Stage


def correct_out_of_bounds(current: int, min_replicas: int, max_replicas: int) -> Stage | None:
    """current > max -> max, current < min -> min; no metrics, stabilization or rate limits (as the HPA)."""
    if current > max_replicas:
        return Stage(max_replicas, Reason.AboveMaxReplicas,
                     f"current {current} is above maxReplicas {max_replicas}: scale to {max_replicas}")
    if current < min_replicas:
        return Stage(min_replicas, Reason.BelowMinReplicas,
                     f"current {current} is below minReplicas {min_replicas}: scale to {min_replicas}")
    return None


def clamp_to_bounds(desired: int, min_replicas: int, max_replicas: int) -> Stage:
    if desired > max_replicas:
        return Stage(max_replicas, Reason.TooManyReplicas,
                     f"desired {desired} is above maxReplicas: limited to {max_replicas}")
    if desired < min_replicas:
        return Stage(min_replicas, Reason.TooFewReplicas,
                     f"desired {desired} is below minReplicas: limited to {min_replicas}")
    return Stage(desired, Reason.DesiredWithinRange,
                 f"desired {desired} is within [{min_replicas}, {max_replicas}]")
