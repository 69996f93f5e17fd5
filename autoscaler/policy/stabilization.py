"""Stage 2: the stabilization windows (the HPA's stabilizeRecommendationWithBehaviors).

The result is `current` clamped into [min of the recommendations within the scale-up window, max of those
within the scale-down window], both including this sync's desired count. A recommendation counts while its
age is strictly less than the window (`ages`: exact for decimal timestamps).
"""

from __future__ import annotations

from collections.abc import Iterable

from autoscaler.policy.ages import younger_than
from autoscaler.policy.decision import Reason, Recommendation, Stage


def stabilize(current: int, desired: int, recommendations: Iterable[Recommendation],
              up_window_seconds: float, down_window_seconds: float, now: float) -> Stage:
    up_bound = desired  # lowest recent recommendation: scale up no further than it
    down_bound = desired  # highest recent recommendation: scale down no further than it
    up_window, down_window = younger_than(up_window_seconds), younger_than(down_window_seconds)
    for rec in recommendations:
        age = now - rec.timestamp
        if age < up_window and rec.replicas < up_bound:
            up_bound = rec.replicas
        if age < down_window and rec.replicas > down_bound:
            down_bound = rec.replicas
    result = min(max(current, up_bound), down_bound)
    if result == desired:
        return Stage(result, Reason.DesiredWithinRange, f"desired {desired} is stable")
    if desired >= current:
        return Stage(result, Reason.ScaleUpStabilized,
                     f"scale up {current} -> {desired} held at {result}: lowest recommendation in the last "
                     f"{up_window_seconds:g}s")
    return Stage(result, Reason.ScaleDownStabilized,
                 f"scale down {current} -> {desired} held at {result}: highest recommendation in the last "
                 f"{down_window_seconds:g}s")
