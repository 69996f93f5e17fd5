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

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from autoscaler.policy.decision import MetricObservation, RuleHistory
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
    """The headroom of a series, from its closed minutes (all but the last)."""
    horizon = startup_minutes(budget)

    def derive(loads: tuple[float | None, ...]) -> float | None:
        return headroom(loads[:-1], horizon, budget.percent_of_minutes)

    return derive


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
    rises = sorted(later / earlier for earlier, later in zip(loads, loads[horizon:], strict=False)
                   if earlier is not None and later is not None and earlier > 0)
    if len(rises) < MIN_HISTORY_MINUTES:
        return None
    exceeding = math.floor(len(rises) * percent_of_minutes / 100.0)
    rise = rises[len(rises) - 1 - min(exceeding, len(rises) - 1)]
    return min(max(rise, 1.0), MAX_HEADROOM)
