"""`overloadBudget`: the headroom a rule keeps, sized from its own load's volatility over the start-up time.

A hand-picked target says how busy a replica may be; it cannot say how fast the load rises while new replicas
load their model. This stage measures it: every minute it keeps the largest load a metric showed (an
`Average` metric times the replicas, a `Total` metric as it is), and from the last day it takes the rises over
`startupSeconds` (load a start-up later / load now). The rise that only `percentOfMinutes` of the minutes
exceed is the headroom: each metric's effective target is its target divided by it, so replicas sized now
still serve the load a start-up later in all but that share of minutes. At most `MAX_HEADROOM`, and never
above the target (a falling load needs no headroom). With under `MIN_HISTORY_MINUTES` of rises the rule runs
on its own targets and says so.

Pure: the minutes live in `RuleHistory.budget`, the clock is the `now` passed in, and a headroom is computed
once a minute, when a minute closes.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from autoscaler.policy.decision import MetricObservation, MinuteLoads, RuleHistory
from autoscaler.policy.minutes import Derive, recorded

if TYPE_CHECKING:
    from autoscaler.policy.spec import OverloadBudget, Rule

LOOKBACK_MINUTES = 1_440
"""A day of minutes: the daily curve's own rises are in it."""
MIN_HISTORY_MINUTES = 60
MAX_HEADROOM = 4.0
"""Targets are divided by at most this: a volatility that needs more is better met by a higher minReplicas."""


@dataclass(frozen=True, slots=True)
class BudgetedTargets:
    """What the budget did this sync: each metric's effective target, or why the given targets ran."""

    targets: tuple[tuple[str, float], ...]
    note: str | None = None


def record(rule: Rule, budget: OverloadBudget, history: RuleHistory, current: int,
           observations: Sequence[MetricObservation], now: float) -> RuleHistory:
    """The history with this sync's loads recorded (and the headroom recomputed when a minute closed)."""
    series = recorded(rule.metrics, history.budget, current, observations, now, kept_minutes(budget),
                      derivation(budget))
    return replace(history, budget=series)


def kept_minutes(budget: OverloadBudget) -> int:
    return LOOKBACK_MINUTES + startup_minutes(budget)


def derivation(budget: OverloadBudget) -> Derive:
    """The headroom of a series, from its closed minutes (all but the last).

    The rises are kept in order from one minute to the next (`Rises`): a minute adds one rise and drops at
    most one, placed by bisection, where sorting a day of them every minute made a replay of a budget rule
    cost twenty times that of any other rule. The pick is `headroom`'s, over the same sorted rises.
    """
    horizon = startup_minutes(budget)

    def derive(loads: tuple[float | None, ...], previous: MinuteLoads | None) -> tuple[float | None, Rises]:
        closed = loads[:-1]
        kept = previous.kept if previous is not None else None
        if previous is not None and isinstance(kept, Rises) and kept.horizon == horizon:
            rises = kept.moved(previous.loads[:-1], closed)
        else:
            rises = Rises(horizon, tuple(sorted(_rises(closed, horizon))))
        return pick(rises.ordered, budget.percent_of_minutes), rises

    return derive


@dataclass(frozen=True, slots=True)
class Rises:
    """Every rise over `horizon` minutes of a series' closed minutes, in increasing order."""

    horizon: int
    ordered: tuple[float, ...]

    def moved(self, before: tuple[float | None, ...], after: tuple[float | None, ...]) -> Rises:
        """The rises of `after`: the closed minutes a minute after `before`, one minute more at the end and
        as many fewer at the start as the series is longer than it keeps (`minutes._with_load`)."""
        dropped = len(before) + 1 - len(after)
        if dropped not in (0, 1):
            return Rises(self.horizon, tuple(sorted(_rises(after, self.horizon))))
        ordered = list(self.ordered)
        if dropped and self.horizon < len(before):
            gone = _rise(before[0], before[self.horizon])
            if gone is not None:
                del ordered[bisect.bisect_left(ordered, gone)]
        if len(after) > self.horizon:
            new = _rise(after[-1 - self.horizon], after[-1])
            if new is not None:
                bisect.insort(ordered, new)
        return Rises(self.horizon, tuple(ordered))


def startup_minutes(budget: OverloadBudget) -> int:
    return max(1, math.ceil(budget.startup_seconds / 60.0))


def budgeted(rule: Rule, history: RuleHistory) -> tuple[Rule, BudgetedTargets]:
    """`rule` with each metric's target divided by its headroom, and what was done."""
    headrooms = {series.name: series.derived for series in history.budget}
    metrics, targets, short = [], [], []
    for metric in rule.metrics:
        headroom = headrooms.get(metric.name)
        if headroom is None:
            short.append(metric.name)
            headroom = 1.0
        target = metric.target / headroom
        metrics.append(replace(metric, target=target))
        targets.append((metric.name, target))
    note = (f"overloadBudget: under {MIN_HISTORY_MINUTES} min of history for {', '.join(short)}: "
            "the given target(s) run" if short else None)
    return replace(rule, metrics=tuple(metrics)), BudgetedTargets(tuple(targets), note)


def headroom(loads: Sequence[float | None], horizon: int, percent_of_minutes: float) -> float | None:
    """The rise over `horizon` minutes that only `percent_of_minutes` % of the minutes exceed, in
    [1, MAX_HEADROOM]; None with fewer than MIN_HISTORY_MINUTES rises."""
    return pick(sorted(_rises(loads, horizon)), percent_of_minutes)


def _rises(loads: Sequence[float | None], horizon: int) -> list[float]:
    return [later / earlier for earlier, later in zip(loads, loads[horizon:], strict=False)
            if earlier is not None and later is not None and earlier > 0]


def _rise(earlier: float | None, later: float | None) -> float | None:
    """The rise from one minute's load to a later one's, as `_rises` computes it (None: no rise)."""
    return later / earlier if earlier is not None and later is not None and earlier > 0 else None


def pick(rises: Sequence[float], percent_of_minutes: float) -> float | None:
    """From the rises in increasing order, the one only `percent_of_minutes` % of them exceed, in
    [1, MAX_HEADROOM]; None with fewer than MIN_HISTORY_MINUTES rises."""
    if len(rises) < MIN_HISTORY_MINUTES:
        return None
    exceeding = math.floor(len(rises) * percent_of_minutes / 100.0)
    rise = rises[len(rises) - 1 - min(exceeding, len(rises) - 1)]
    return min(max(rise, 1.0), MAX_HEADROOM)
