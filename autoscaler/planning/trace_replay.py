"""`plan_replicas` over a whole trace at once: the same counts, desired counts and reasons, a few µs per row.

`simulate` replays a month of 15 s syncs (172,800 rows). Through `plan_replicas` each row builds a dozen
frozen values (proposals, stages, a history with its tuples) and formats messages nobody reads: about 15 µs.
Here the state of one rule lives in mutable locals for the whole trace, and only what `simulate` prints is
computed:

- the stabilization windows keep, instead of every recommendation, a monotonic deque per window (the lowest
  recommendation of the scale-up window at the front of one, the highest of the scale-down window at the
  front of the other): each row costs O(1) amortized, where the HPA scans its list;
- scale events stay a `RuleHistory`, and a count that must move goes through the engine's own
  `bound_and_limit` and `RuleHistory.with_scale`, so the policies' arithmetic exists once;
- a metric's ratio is computed by the very expressions of `propose`, so every float rounds the same way.

It covers every rule but those with schedules, scale to zero (minReplicas 0), panic mode, an overload
budget, a forecast or a capacity column in the trace (`covers`); `simulate` and `tune` replay those through
`plan_replicas` row by row.
tests/unit/autoscaler/planning/test_trace_replay.py checks both agree on random rules and traces.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass

from autoscaler.policy import MAX_REPLICAS, Reason, Rule, RuleHistory
from autoscaler.policy.ages import younger_than
from autoscaler.policy.engine import bound_and_limit
from autoscaler.policy.proposal import ceil_count


@dataclass(frozen=True, slots=True)
class ReplayedTrace:
    """Per row, in trace order: the count applied, the engine's raw desired count (None: not used), why."""

    replicas: list[int]
    desired: list[int | None]
    reasons: list[Reason]


def covers(rule: Rule) -> bool:
    """Whether `replay_columns` replays `rule` exactly as `plan_replicas` (the rule's capacity guard is off
    in any trace without a capacity column, which the caller checks)."""
    return (not rule.schedules and rule.min_replicas >= 1 and rule.behavior.panic is None
            and rule.overload_budget is None and rule.forecast is None
            and all(math.isfinite(m.target) and m.target > 0 for m in rule.metrics))


def replay_columns(rule: Rule, times: Sequence[float], values: Sequence[Sequence[float | None]],
                   replicas: int) -> ReplayedTrace:
    """Row i happens at `times[i]`; `values[k][i]` is what metric `rule.metrics[k]` gave: a finite number, or
    None for a failed query (as simulate's reader and tune's range reader give them).

    Each row's count is applied at once and becomes the next row's current count, as `simulate.replay`.
    """
    if not covers(rule):
        raise ValueError(f"rule {rule.name!r} has schedules, scale to zero or an invalid target")
    rows = len(times)
    if replicas == 0:  # a target at zero is held (the rule's minReplicas > 0): nothing ever moves it
        return ReplayedTrace([0] * rows, [None] * rows, [Reason.ScalingDisabled] * rows)
    return _replay(rule, times, values, replicas)


def _replay(rule: Rule, times: Sequence[float], values: Sequence[Sequence[float | None]],
            replicas: int) -> ReplayedTrace:
    """The loop, flat: one function whose state is locals, as a month is 172,800 turns of it."""
    behavior = rule.behavior
    up_window = younger_than(behavior.scale_up.stabilization_window_seconds)
    down_window = younger_than(behavior.scale_down.stabilization_window_seconds)
    # recommendations that may yet be the lowest of the scale-up window (rising counts, oldest first) and
    # the highest of the scale-down window (falling counts): the fronts are the windows' extremes
    lowest: deque[tuple[float, int]] = deque()
    highest: deque[tuple[float, int]] = deque()
    # scale events only: what `bound_and_limit` reads and `with_scale` stores
    events = RuleHistory(longest_up_period=behavior.scale_up.longest_period_seconds,
                         longest_down_period=behavior.scale_down.longest_period_seconds)
    min_replicas, max_replicas = rule.min_replicas, rule.max_replicas
    up_tolerance_top = 1.0 + behavior.scale_up.tolerance
    down_tolerance_bottom = 1.0 - behavior.scale_down.tolerance
    metrics = [(m.type == "Average", m.target) for m in rule.metrics]
    fallback = rule.fallback
    threshold = fallback.failure_threshold if fallback is not None else None
    fallback_desired = min(max(fallback.replicas, 0), MAX_REPLICAS) if fallback is not None else 0
    out_replicas: list[int] = []
    out_desired: list[int | None] = []
    out_reasons: list[Reason] = []
    within_range, within_tolerance = Reason.DesiredWithinRange, Reason.WithinTolerance
    current = replicas
    all_failed = 0
    if times:  # first_sight: the count before the first sync is the first recommendation
        lowest.append((times[0], current))
        highest.append((times[0], current))
    for now, row in zip(times, zip(*values, strict=True), strict=True):
        # the proposals of every metric, combined (the engine's propose_all + combine)
        best = -1
        lowest_proposal = MAX_REPLICAS + 1
        failed = False
        for (average, target), value in zip(metrics, row, strict=True):
            if value is None:
                failed = True
                continue
            ratio = value / target if average else value / (target * current)
            if down_tolerance_bottom <= ratio <= up_tolerance_top:
                proposal = current
            elif average:
                proposal = ceil_count(ratio * current)
            else:
                proposal = ceil_count(value / target)
            if proposal > best:
                best = proposal
            if proposal < lowest_proposal:
                lowest_proposal = proposal
        all_failed = all_failed + 1 if best < 0 else 0
        if current > max_replicas or current < min_replicas:  # correct_out_of_bounds: no metrics
            target_count = max_replicas if current > max_replicas else min_replicas
            reason = Reason.AboveMaxReplicas if current > max_replicas else Reason.BelowMinReplicas
            if threshold is not None and all_failed > threshold:
                reason = Reason.Fallback
            events = events.with_scale(now, current, target_count)
            out_replicas.append(target_count)
            out_desired.append(None)
            out_reasons.append(reason)
            current = target_count
            continue
        if threshold is not None and all_failed > threshold:
            desired, proposed_reason, is_fallback = fallback_desired, within_range, True
        elif best < 0:
            out_replicas.append(current)
            out_desired.append(None)
            out_reasons.append(Reason.MetricsFailed)
            continue
        elif failed and best < current:
            out_replicas.append(current)
            out_desired.append(None)
            out_reasons.append(Reason.MetricsPartiallyFailed)
            continue
        else:
            is_fallback = False
            desired = best
            proposed_reason = (within_tolerance if best == current and lowest_proposal == current
                               else within_range)
        # stabilization (the engine's `stabilize`): the windows' extremes, this desired count included
        while lowest and now - lowest[0][0] >= up_window:
            lowest.popleft()
        while highest and now - highest[0][0] >= down_window:
            highest.popleft()
        up_bound = lowest[0][1] if lowest and lowest[0][1] < desired else desired
        down_bound = highest[0][1] if highest and highest[0][1] > desired else desired
        stable = min(max(current, up_bound), down_bound)
        while lowest and lowest[-1][1] >= desired:
            lowest.pop()
        lowest.append((now, desired))
        while highest and highest[-1][1] <= desired:
            highest.pop()
        highest.append((now, desired))
        reason = proposed_reason
        if stable != desired:
            reason = Reason.ScaleUpStabilized if desired >= current else Reason.ScaleDownStabilized
        applied = current
        if stable != current:
            limited = bound_and_limit(rule, current, stable, events, now)
            if limited.replicas != stable:
                reason = limited.reason
            applied = limited.replicas
        out_replicas.append(applied)
        out_desired.append(desired)
        out_reasons.append(Reason.Fallback if is_fallback else reason)
        if applied != current:
            events = events.with_scale(now, current, applied)
            current = applied
    return ReplayedTrace(out_replicas, out_desired, out_reasons)
