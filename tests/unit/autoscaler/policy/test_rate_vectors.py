"""Every rate-limit vector of data/hpa-behavior-vectors.md (from the HPA controller's own tests; the rows are
checked against that file by test_vectors_data.py).

Each row is checked twice: on the bounds+policies stage alone (the stabilized desired count given), and
through `decide()` with stabilization windows of 0 so the metric's proposal reaches that stage unchanged.
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from autoscaler.policy import MetricObservation, Reason, RuleHistory, decide
from autoscaler.policy.engine import bound_and_limit
from autoscaler.policy.spec import DEFAULT_SCALE_DOWN, DEFAULT_SCALE_UP, ScalingRules

from .support import T0, at_age, history, make_rule, rules, spread

R = Reason
UP_1_5_9 = spread([1, 5, 9], 120)
DOWN_1_5_9 = spread([-1, -5, -9], 120)


@dataclass(frozen=True)
class Row:
    id: str
    current: int
    desired: int
    min: int
    max: int
    up: ScalingRules
    down: ScalingRules
    events: RuleHistory
    replicas: int
    reason: Reason
    decide_reason: Reason | None = None  # when decide() legitimately reports another reason


U, D = DEFAULT_SCALE_UP, DEFAULT_SCALE_DOWN
ROWS = [
    Row("up-within-defaults", 5, 7, 3, 8, U, D, history(), 7, R.DesiredWithinRange),
    Row("down-below-min", 3, 1, 2, 8, U, D, history(), 2, R.TooFewReplicas),
    Row("down-to-zero-min-zero", 1, 0, 0, 10, U, D, history(), 0, R.DesiredWithinRange),
    Row("current-above-max", 20, 1000, 1, 10, U, D, history(), 10, R.TooManyReplicas, R.AboveMaxReplicas),
    Row("up-to-max", 100, 1000, 100, 150, U, D, history(), 150, R.TooManyReplicas),
    Row(
        "up-percent-1-rounds-up", 3, 1000, 1, 2000, rules(U, "Percent 1/60"), D, history(), 4, R.ScaleUpLimit
    ),
    Row("up-defaults-double", 10, 50, 1, 1000, U, D, history(), 20, R.ScaleUpLimit),
    Row(
        "up-max-of-pods-100-percent-100",
        10,
        500,
        1,
        1000,
        rules(U, "Pods 100/60 + Percent 100/60"),
        D,
        history(),
        110,
        R.ScaleUpLimit,
    ),
    Row(
        "up-max-of-pods-2-percent-100",
        10,
        500,
        1,
        1000,
        rules(U, "Pods 2/60 + Percent 100/60"),
        D,
        history(),
        20,
        R.ScaleUpLimit,
    ),
    Row("up-pods-30", 10, 50, 1, 1000, rules(U, "Pods 30/60"), D, history(), 40, R.ScaleUpLimit),
    Row("up-percent-200", 10, 50, 1, 1000, rules(U, "Percent 200/60"), D, history(), 30, R.ScaleUpLimit),
    Row(
        "up-pods-100-not-limiting",
        10,
        50,
        1,
        1000,
        rules(U, "Pods 100/60"),
        D,
        history(),
        50,
        R.DesiredWithinRange,
    ),
    Row(
        "down-max-of-pods-20-percent-1",
        100,
        2,
        1,
        1000,
        U,
        rules(D, "Pods 20/60 + Percent 1/60"),
        history(),
        80,
        R.ScaleDownLimit,
    ),
    Row(
        "down-max-of-pods-2-percent-1",
        100,
        2,
        1,
        1000,
        U,
        rules(D, "Pods 2/60 + Percent 1/60"),
        history(),
        98,
        R.ScaleDownLimit,
    ),
    Row("down-pods-100-to-min", 10, 0, 1, 1000, U, rules(D, "Pods 100/60"), history(), 1, R.TooFewReplicas),
    Row(
        "down-percent-100-to-min-5",
        10,
        2,
        5,
        1000,
        U,
        rules(D, "Percent 100/60"),
        history(),
        5,
        R.TooFewReplicas,
    ),
    Row("down-pods-5", 10, 2, 1, 1000, U, rules(D, "Pods 5/60"), history(), 5, R.ScaleDownLimit),
    Row(
        "down-percent-50-exact",
        10,
        5,
        1,
        1000,
        U,
        rules(D, "Percent 50/60"),
        history(),
        5,
        R.DesiredWithinRange,
    ),
    Row(
        "up-events-pods-5-no-room",
        100,
        500,
        1,
        1000,
        rules(U, "Pods 5/120"),
        D,
        history(up=UP_1_5_9),
        100,
        R.ScaleUpLimit,
    ),
    Row(
        "up-events-pods-150",
        100,
        500,
        1,
        1000,
        rules(U, "Pods 150/120"),
        D,
        history(up=UP_1_5_9),
        235,
        R.ScaleUpLimit,
    ),
    Row(
        "up-events-percent-200",
        100,
        500,
        1,
        1000,
        rules(U, "Percent 200/120"),
        D,
        history(up=UP_1_5_9),
        255,
        R.ScaleUpLimit,
    ),
    Row(
        "up-events-short-period-max-200",
        100,
        500,
        1,
        200,
        rules(U, "Pods 300/60"),
        D,
        history(up=UP_1_5_9),
        200,
        R.TooManyReplicas,
    ),
    Row(
        "up-with-up-and-down-events",
        6,
        24,
        1,
        1000,
        rules(U, "Percent 300/300"),
        D,
        history(up=[at_age(4, 60)], down=[at_age(-2, 60)]),
        16,
        R.ScaleUpLimit,
    ),
    Row(
        "down-events-outside-default-period",
        10,
        5,
        1,
        1000,
        U,
        D,
        history(down=DOWN_1_5_9),
        5,
        R.DesiredWithinRange,
    ),
    Row(
        "down-events-pods-115",
        100,
        0,
        1,
        1000,
        U,
        rules(D, "Pods 115/120"),
        history(down=DOWN_1_5_9),
        1,
        R.TooFewReplicas,
    ),
    Row(
        "down-events-pods-130-min-5",
        100,
        0,
        5,
        1000,
        U,
        rules(D, "Pods 130/120"),
        history(down=DOWN_1_5_9),
        5,
        R.TooFewReplicas,
    ),
    Row(
        "down-events-percent-100-min-5",
        100,
        2,
        5,
        1000,
        U,
        rules(D, "Percent 100/120"),
        history(down=DOWN_1_5_9),
        5,
        R.TooFewReplicas,
    ),
    Row(
        "down-events-pods-5-no-room",
        100,
        2,
        1,
        1000,
        U,
        rules(D, "Pods 5/120"),
        history(down=DOWN_1_5_9),
        100,
        R.ScaleDownLimit,
    ),
    Row(
        "down-events-percent-50",
        100,
        0,
        1,
        1000,
        U,
        rules(D, "Percent 50/120"),
        history(down=spread([-2, -4, -6], 120)),
        56,
        R.ScaleDownLimit,
    ),
    Row(
        "down-with-up-and-down-events",
        10,
        1,
        1,
        1000,
        U,
        rules(D, "Percent 50/180"),
        history(up=[at_age(2, 60)], down=[at_age(-4, 60)]),
        6,
        R.ScaleDownLimit,
    ),
    Row(
        "down-events-percent-10-no-room",
        100,
        0,
        1,
        1000,
        U,
        rules(D, "Percent 10/120"),
        history(down=spread([-10, -10, -10], 120)),
        100,
        R.ScaleDownLimit,
    ),
    Row(
        "down-events-percent-1000",
        10,
        5,
        1,
        1000,
        U,
        rules(D, "Percent 1000/120"),
        history(down=spread([-10, -10, -10], 120)),
        5,
        R.DesiredWithinRange,
    ),
    Row(
        "up-events-percent-1000",
        100,
        200,
        1,
        1000,
        rules(U, "Percent 1000/60"),
        D,
        history(up=spread([8, 12, 9, 11], 120)),
        200,
        R.DesiredWithinRange,
    ),
    Row(
        "up-select-min",
        1,
        5,
        1,
        1000,
        rules(U, "Pods 2/60 + Percent 50/60", select="Min"),
        D,
        history(),
        2,
        R.ScaleUpLimit,
    ),
    Row(
        "down-select-min",
        5,
        1,
        1,
        1000,
        U,
        rules(D, "Pods 2/60 + Percent 50/60", select="Min"),
        history(),
        3,
        R.ScaleDownLimit,
    ),
]


@pytest.mark.parametrize("row", ROWS, ids=[r.id for r in ROWS])
def test_bounds_and_policies_stage(row: Row) -> None:
    rule = make_rule(row.min, row.max, row.up, row.down)
    stage = bound_and_limit(rule, row.current, row.desired, row.events, T0)
    assert (stage.replicas, stage.reason) == (row.replicas, row.reason), stage.message


@pytest.mark.parametrize("row", ROWS, ids=[r.id for r in ROWS])
def test_through_decide(row: Row) -> None:
    """Windows 0 and tolerance 0: the Total metric's proposal (ceil(value/1)) is the stabilized desired."""
    up = rules(row.up, window=0, tolerance=0)
    down = rules(row.down, window=0, tolerance=0)
    rule = make_rule(row.min, row.max, up, down)
    decision = decide(rule, row.current, [MetricObservation("load", float(row.desired))], row.events, T0)
    assert decision.replicas == row.replicas, decision.message
    assert decision.reason == (row.decide_reason or row.reason), decision.message
    if row.decide_reason is None:
        assert decision.desired_raw == row.desired
