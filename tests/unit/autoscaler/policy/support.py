"""Builders for the engine tests: rules from short specs, events placed at ages before a fixed T0."""

from __future__ import annotations

from collections.abc import Sequence

from autoscaler.policy import Recommendation, RuleHistory
from autoscaler.policy.decision import ScaleEvent
from autoscaler.policy.spec import (
    DEFAULT_SCALE_DOWN,
    DEFAULT_SCALE_UP,
    Behavior,
    MetricSpec,
    Rule,
    ScalingPolicy,
    ScalingRules,
    TargetRef,
)

T0 = 1_700_000_000.0  # the fake clock's "now" (a realistic Unix time, so float resolution is exercised)
TARGET = TargetRef("Deployment", "ml", "embedding")
TOTAL = MetricSpec("load", "sum(load)", "Total", 1.0)  # with target 1, a value v proposes ceil(v) replicas


def policies(spec: str) -> tuple[ScalingPolicy, ...]:
    """'Pods 4/60 + Percent 100/60' -> policies."""
    result = []
    for part in spec.split("+"):
        type_, rest = part.split()
        value, period = rest.split("/")
        result.append(ScalingPolicy(type_, int(value), int(period)))  # type: ignore[arg-type]
    return tuple(result)


def rules(
    base: ScalingRules,
    spec: str | None = None,
    select: str | None = None,
    window: int | None = None,
    tolerance: float | None = None,
) -> ScalingRules:
    return ScalingRules(
        base.stabilization_window_seconds if window is None else window,
        base.select_policy if select is None else select,  # type: ignore[arg-type]
        base.tolerance if tolerance is None else tolerance,
        base.policies if spec is None else policies(spec),
    )


def make_rule(
    min_replicas: int = 1,
    max_replicas: int = 1000,
    up: ScalingRules = DEFAULT_SCALE_UP,
    down: ScalingRules = DEFAULT_SCALE_DOWN,
    metrics: Sequence[MetricSpec] = (TOTAL,),
) -> Rule:
    return Rule("r", TARGET, min_replicas, max_replicas, tuple(metrics), Behavior(up, down), None, 1)


def spread(changes: Sequence[int], period: float, now: float = T0) -> tuple[ScaleEvent, ...]:
    """Event i of n at age P - (P/n)(i+1) + (P/n)/2, as in the HPA's tests ('[1,5,9] over 120')."""
    step = period / len(changes)
    return tuple(ScaleEvent(now - (period - step * (i + 1) + step / 2), c) for i, c in enumerate(changes))


def at_age(change: int, age: float, now: float = T0) -> ScaleEvent:
    return ScaleEvent(now - age, change)


def recs(spec: str, now: float = T0) -> tuple[Recommendation, ...]:
    """'4@120, 5@60' -> recommendations of 4 replicas 120 s ago and 5 replicas 60 s ago."""
    if not spec or spec == "none":
        return ()
    result = []
    for item in spec.split(","):
        value, age = item.strip().split("@")
        result.append(Recommendation(now - float(age), int(value)))
    return tuple(result)


def history(
    up: Sequence[ScaleEvent] = (),
    down: Sequence[ScaleEvent] = (),
    recommendations: Sequence[Recommendation] = (),
) -> RuleHistory:
    return RuleHistory(tuple(recommendations), tuple(up), tuple(down))
