"""Keeping a rule's history bounded, as the HPA does, so that a sync's cost does not grow with the rule's age.

Recommendations no window can see any more are dropped (the HPA overwrites one such entry per sync; both ways
the entries within a window are the same, and stabilization looks at nothing else). The newest recommendation
is always kept, even when outside every window: it marks the rule as seen, so the first-sight record (current
count as a recommendation) happens once per rule, as in the HPA.

Scale events are never dropped here: `RuleHistory.with_scale` stores them as the HPA's storeScaleEvent does,
overwriting an outdated event, which bounds the lists. Dropping them by age instead would make the policies
depend on how often the rule is synced: both directions' events count toward each policy's period start, so an
event past its own direction's longest period can still be inside a longer period of the other direction.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

from autoscaler.policy.ages import younger_than
from autoscaler.policy.decision import Recommendation, RuleHistory

if TYPE_CHECKING:
    from autoscaler.policy.spec import Behavior


def first_sight(history: RuleHistory, current: int, now: float) -> RuleHistory:
    """On a rule's first sync, record `current` as a recommendation (the HPA's recordInitialRecommendation).

    So a restarted controller does not scale down before one scale-down window has passed.
    """
    if history.recommendations:
        return history
    return dataclasses.replace(history, recommendations=(Recommendation(now, current),))


def prune(history: RuleHistory, behavior: Behavior, now: float) -> RuleHistory:
    """The history for the next sync: recommendations whose age is >= both windows dropped, and the rule's
    longest policy periods noted for `RuleHistory.with_scale`.

    Recommendations are appended in time order, so only a leading run is dropped: O(dropped), not
    O(history). An out-of-order entry left behind is harmless, stabilization filters by age itself.
    """
    seen = younger_than(max(behavior.scale_up.stabilization_window_seconds,
                            behavior.scale_down.stabilization_window_seconds))
    entries = history.recommendations
    index, end = 0, len(entries) - 1  # keep the last one
    while index < end and now - entries[index].timestamp >= seen:
        index += 1
    up = behavior.scale_up.longest_period_seconds
    down = behavior.scale_down.longest_period_seconds
    if index == 0 and history.longest_up_period == up and history.longest_down_period == down:
        return history
    return dataclasses.replace(history, recommendations=entries[index:], longest_up_period=up,
                               longest_down_period=down)
