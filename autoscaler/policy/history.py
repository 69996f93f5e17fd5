"""Keeping a rule's history bounded, as the HPA does, so that a sync's cost does not grow with the rule's age.

Recommendations no window can see any more are dropped (the HPA overwrites one such entry per sync; both ways
the entries within a window are the same, and stabilization looks at nothing else), and so are those a later
one makes redundant (`deciding`: never again a window's lowest or highest), which stabilization cannot tell
apart either. The newest recommendation
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
    """The history for the next sync: only the recommendations that may still decide a window kept
    (`deciding`), and the rule's longest policy periods noted for `RuleHistory.with_scale`."""
    entries = history.recommendations
    kept = deciding(entries, now, behavior.scale_up.stabilization_window_seconds,
                    behavior.scale_down.stabilization_window_seconds)
    up = behavior.scale_up.longest_period_seconds
    down = behavior.scale_down.longest_period_seconds
    if len(kept) == len(entries) and history.longest_up_period == up and history.longest_down_period == down:
        return history
    return dataclasses.replace(history, recommendations=kept, longest_up_period=up, longest_down_period=down)


def deciding(entries: tuple[Recommendation, ...], now: float, up_window_seconds: float,
             down_window_seconds: float) -> tuple[Recommendation, ...]:
    """The recommendations that can still be the lowest of the scale-up window or the highest of the
    scale-down window at `now` or later, in order, and the newest one (the seen marker).

    An entry counts in a window no longer than one recorded at the same time or later; when such a later
    entry is as low (as high), the older one can never be the window's lowest (highest) again: stabilization
    over what is kept gives what it gives over every entry, at every later sync. So a trace of syncs much
    denser than the windows (simulate of thousands of rows a second apart) carries the monotonic runs of
    the windows, a few entries, not every row of the last five minutes: each sync costs what the HPA's does
    at 15 s, not a copy and a scan of the whole window. An entry out of time order (a clock that went back)
    is only dropped once both windows are past it.
    """
    if len(entries) <= 1:
        return entries
    up_seen = younger_than(up_window_seconds)
    down_seen = younger_than(down_window_seconds)
    newest = entries[-1]
    kept = [newest]
    lowest = highest = newest.replicas  # of the entries after the one looked at
    earliest = newest.timestamp  # their earliest timestamp: they outlast it when it is not later
    for rec in reversed(entries[:-1]):
        age = now - rec.timestamp
        outlasted = earliest >= rec.timestamp
        low = age < up_seen and not (outlasted and lowest <= rec.replicas)
        high = age < down_seen and not (outlasted and highest >= rec.replicas)
        if low or high:
            kept.append(rec)
        lowest = min(lowest, rec.replicas)
        highest = max(highest, rec.replicas)
        earliest = min(earliest, rec.timestamp)
    if len(kept) == len(entries):
        return entries
    kept.reverse()
    return tuple(kept)
