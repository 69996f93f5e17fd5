"""Stage 4: the scaling policies (the HPA's calculateScaleUp/DownLimitWithScalingRules).

Each policy limits the change over its period, counted from the replica count at the start of the period:
`current - (pods added in the period) + (pods removed in the period)`, events counting while their age is
strictly less than the period (`ages`: exact for decimal timestamps); an event counts whether or
not it is marked outdated, as in the HPA. Pods: start +- value. Percent: up ceil(start*(1+value/100)), down
int(start*(1-value/100)) in float arithmetic, exactly as the HPA (so 10% up from 100 gives 111).
selectPolicy Max takes the policy allowing the largest change, Min the smallest, Disabled allows none.
A Percent too large for a float, or a limit that overflows to inf, saturates at +-SATURATED: it allows any
change a count can make, as the exact value would, instead of raising OverflowError.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

from autoscaler.policy.ages import younger_than
from autoscaler.policy.decision import Reason, RuleHistory, ScaleEvent, Stage

if TYPE_CHECKING:
    from autoscaler.policy.spec import ScalingPolicy, ScalingRules


def _change_in_period(events: Iterable[ScaleEvent], period_seconds: float, now: float) -> int:
    bound = younger_than(period_seconds)
    return sum(abs(e.replica_change) for e in events if now - e.timestamp < bound)


def period_start_replicas(current: int, history: RuleHistory, period_seconds: float, now: float) -> int:
    added = _change_in_period(history.scale_up_events, period_seconds, now)
    removed = _change_in_period(history.scale_down_events, period_seconds, now)
    return current - added + removed


def scale_up_limit(current: int, rules: ScalingRules, history: RuleHistory, now: float,
                   ) -> tuple[int, ScalingPolicy | None]:
    """The highest count the policies allow now, and the policy that sets it (None when Disabled)."""
    return _select(current, rules, history, now, _up_to, direction=1)


def scale_down_limit(current: int, rules: ScalingRules, history: RuleHistory, now: float,
                     ) -> tuple[int, ScalingPolicy | None]:
    """The lowest count the policies allow now, and the policy that sets it (None when Disabled)."""
    return _select(current, rules, history, now, _down_to, direction=-1)


SATURATED = 2**63
"""Beyond any replica count (int32) and any period start: a limit this far allows every change."""
_FLOAT_PERCENT = 10**300
"""A larger Percent is as unlimited as this one, and `value / 100` of a larger int does not fit a float."""


def _saturate(x: float, rounding: Callable[[float], int]) -> int:
    if x >= SATURATED:
        return SATURATED
    if x <= -SATURATED:
        return -SATURATED
    return rounding(x)


def _up_to(start: int, policy: ScalingPolicy) -> int:
    if policy.type == "Pods":
        return start + policy.value
    return _saturate(start * (1 + min(policy.value, _FLOAT_PERCENT) / 100), math.ceil)


def _down_to(start: int, policy: ScalingPolicy) -> int:
    if policy.type == "Pods":
        return start - policy.value
    # Percent: truncation toward zero, as Go's int32(float64)
    return _saturate(start * (1 - min(policy.value, _FLOAT_PERCENT) / 100), int)


def _select(current: int, rules: ScalingRules, history: RuleHistory, now: float,
            limit_of: Callable[[int, ScalingPolicy], int], direction: int,
            ) -> tuple[int, ScalingPolicy | None]:
    """Each policy's limit from the count at the start of its period; Max keeps the one going furthest in
    `direction` (+1 up, -1 down), Min the least far, the first policy winning a tie."""
    if rules.select_policy == "Disabled":
        return current, None
    chosen: tuple[int, ScalingPolicy | None] | None = None
    for policy in rules.policies:
        proposed = limit_of(period_start_replicas(current, history, policy.period_seconds, now), policy)
        further = direction * (proposed - chosen[0]) if chosen is not None else 0
        if chosen is None or (further > 0 if rules.select_policy == "Max" else further < 0):
            chosen = (proposed, policy)
    return chosen if chosen is not None else (current, None)


def _policy_text(policy: ScalingPolicy) -> str:
    unit = "%" if policy.type == "Percent" else ""
    return f"policy {policy.type} {policy.value}{unit}/{policy.period_seconds}s"


def limit_rate(current: int, desired: int, scale_up: ScalingRules, scale_down: ScalingRules,
               history: RuleHistory, now: float) -> Stage:
    """`desired` limited by the policies of its direction (a limit never reverses the direction)."""
    if desired > current:
        limit, policy = scale_up_limit(current, scale_up, history, now)
        limit = max(limit, current)  # events still in the period: no further scale-up for now
        if desired <= limit:
            return Stage(desired, Reason.DesiredWithinRange,
                         f"scale up {current} -> {desired} within policies")
        if policy is None:
            return Stage(current, Reason.ScalingDisabled,
                         f"scale up {current} -> {desired} not done: scaleUp selectPolicy is Disabled")
        return Stage(limit, Reason.ScaleUpLimit,
                     f"scale up {current} -> {desired} limited to {limit} by {_policy_text(policy)}")
    if desired < current:
        limit, policy = scale_down_limit(current, scale_down, history, now)
        limit = min(limit, current)
        if desired >= limit:
            return Stage(desired, Reason.DesiredWithinRange,
                         f"scale down {current} -> {desired} within policies")
        if policy is None:
            return Stage(current, Reason.ScalingDisabled,
                         f"scale down {current} -> {desired} not done: scaleDown selectPolicy is Disabled")
        return Stage(limit, Reason.ScaleDownLimit,
                     f"scale down {current} -> {desired} limited to {limit} by {_policy_text(policy)}")
    return Stage(desired, Reason.DesiredWithinRange, f"stay at {current}")
