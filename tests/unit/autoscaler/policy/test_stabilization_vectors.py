"""Every stabilization vector of data/hpa-behavior-vectors.md, on the stage and through `decide()` (the rows
are checked against that file by test_vectors_data.py)."""

from __future__ import annotations

import pytest

from autoscaler.policy import MetricObservation, Reason, decide
from autoscaler.policy.spec import DEFAULT_SCALE_DOWN, DEFAULT_SCALE_UP
from autoscaler.policy.stabilization import stabilize

from .support import T0, history, make_rule, recs, rules

R = Reason
# id, history (value@age), current, desired, up window, down window, result, reason
VECTORS = [
    ("no-history", "none", 100, 5, 0, 0, 5, R.DesiredWithinRange),
    ("down-held-by-highest-in-window", "4@120, 5@60", 100, 3, 0, 180, 5, R.ScaleDownStabilized),
    ("up-held-by-lowest-in-window", "4@120, 5@60", 1, 7, 300, 0, 4, R.ScaleUpStabilized),
    ("down-up-window-irrelevant", "1@120, 2@60", 100, 3, 300, 0, 3, R.DesiredWithinRange),
    ("up-down-window-irrelevant", "4@120, 5@60", 1, 3, 0, 300, 3, R.DesiredWithinRange),
    ("old-entries-ignored-down", "10@600, 9@540", 100, 3, 0, 0, 3, R.DesiredWithinRange),
    ("old-entries-ignored-up", "10@600, 9@540", 1, 100, 0, 0, 100, R.DesiredWithinRange),
    ("mixed-ages-down", "10@600, 4@60, 5@120, 9@540", 100, 3, 0, 180, 5, R.ScaleDownStabilized),
    ("mixed-ages-up", "10@6000, 6@60, 5@120, 9@180", 1, 100, 300, 0, 5, R.ScaleUpStabilized),
    ("both-windows-hold-down", "2@6000, 3@180", 2, 1, 300, 300, 2, R.ScaleDownStabilized),
    ("both-windows-hold-up", "2@6000, 1@180", 2, 3, 300, 300, 2, R.ScaleUpStabilized),
]
IDS = [v[0] for v in VECTORS]


@pytest.mark.parametrize(
    ("id_", "hist", "current", "desired", "up", "down", "result", "reason"), VECTORS, ids=IDS
)
def test_stage(
    id_: str, hist: str, current: int, desired: int, up: int, down: int, result: int, reason: Reason
) -> None:
    stage = stabilize(current, desired, recs(hist), up, down, T0)
    assert (stage.replicas, stage.reason) == (result, reason), stage.message


@pytest.mark.parametrize(
    ("id_", "hist", "current", "desired", "up", "down", "result", "reason"), VECTORS, ids=IDS
)
def test_through_decide(
    id_: str, hist: str, current: int, desired: int, up: int, down: int, result: int, reason: Reason
) -> None:
    rule = make_rule(
        1,
        1000,
        rules(DEFAULT_SCALE_UP, "Pods 1000/15", window=up, tolerance=0),
        rules(DEFAULT_SCALE_DOWN, window=down, tolerance=0),
    )
    given = history(recommendations=recs(hist))
    decision = decide(rule, current, [MetricObservation("load", float(desired))], given, T0)
    assert (decision.replicas, decision.reason) == (result, reason), decision.message
    assert decision.desired_raw == desired
    # This sync's raw desired count is recorded, stamped now.
    assert decision.history.recommendations[-1].timestamp == T0
    assert decision.history.recommendations[-1].replicas == desired


@pytest.mark.parametrize(
    ("age", "counts"),
    [(179.0, True), (179.999, True), (180.0, False), (180.001, False)],
    ids=["well-inside", "just-inside", "exactly-window", "just-outside"],
)
def test_recommendation_counts_while_age_strictly_less_than_window(age: float, counts: bool) -> None:
    stage = stabilize(10, 3, recs(f"8@{age}"), 0, 180, T0)
    assert stage.replicas == (8 if counts else 3)
