"""Keeping a rule's history bounded: only what a window or period can still see.

Pruning makes the cost of a sync independent of how long the rule has run (a month of 15 s syncs replays in
seconds). The newest recommendation is always kept, even when outside every window: it marks the rule as
seen, so the first-sight record (current count as a recommendation) happens once per rule, as in the HPA.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, TypeVar

from autoscaler.policy.types import Recommendation, RuleHistory, ScaleEvent

if TYPE_CHECKING:
    from autoscaler.rules import Behavior

_Timed = TypeVar("_Timed", Recommendation, ScaleEvent)


def first_sight(history: RuleHistory, current: int, now: float) -> RuleHistory:
    """On a rule's first sync, record `current` as a recommendation (the HPA's recordInitialRecommendation).

    So a restarted controller does not scale down before one scale-down window has passed.
    """
    if history.recommendations:
        return history
    return RuleHistory((Recommendation(now, current),), history.scale_up_events, history.scale_down_events)


def prune(history: RuleHistory, behavior: Behavior, now: float) -> RuleHistory:
    """Drop entries whose age is >= every window (recommendations) or every period (scale events).

    Entries are appended in time order, so only a leading run is dropped: O(dropped), not O(history). An
    out-of-order entry left behind is harmless, every stage filters by age itself.
    """
    window = max(behavior.scale_up.stabilization_window_seconds,
                 behavior.scale_down.stabilization_window_seconds)
    recs = _drop_leading(history.recommendations, window, now, keep_last=True)
    up = _drop_leading(history.scale_up_events, behavior.scale_up.longest_period_seconds, now)
    down = _drop_leading(history.scale_down_events, behavior.scale_down.longest_period_seconds, now)
    if (recs is history.recommendations and up is history.scale_up_events
            and down is history.scale_down_events):
        return history
    return RuleHistory(recs, up, down)


def _drop_leading(entries: tuple[_Timed, ...], horizon: float, now: float, keep_last: bool = False,
                  ) -> tuple[_Timed, ...]:
    end = len(entries) - 1 if keep_last else len(entries)
    index = 0
    while index < end and now - entries[index].timestamp >= horizon:
        index += 1
    return entries[index:] if index else entries
