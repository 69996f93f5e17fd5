"""The float64 arithmetic of Percent policies, reproduced bit for bit (ceil up, truncation down)."""

from __future__ import annotations

import pytest

from autoscaler.policy import Reason, RuleHistory
from autoscaler.policy.rate import scale_down_limit, scale_up_limit
from autoscaler.policy.spec import DEFAULT_SCALE_DOWN, DEFAULT_SCALE_UP

from .support import T0, rules


@pytest.mark.parametrize(
    ("start", "limit"),
    [(100, 111), (50, 56), (90, 100), (110, 122), (170, 188), (180, 199), (190, 210), (200, 221)],
    ids=lambda v: str(v),
)
def test_up_10_percent_gets_the_extra_pod_float64_gives(start: int, limit: int) -> None:
    # 100 * 1.1 == 110.00000000000001 in float64, so ceil gives 111: the HPA really does this.
    value, _ = scale_up_limit(start, rules(DEFAULT_SCALE_UP, "Percent 10/60"), RuleHistory(), T0)
    assert value == limit


@pytest.mark.parametrize(
    ("start", "percent", "limit"),
    [(10, 80, 1), (10, 90, 0), (90, 30, 62), (10, 50, 5)],
    ids=["10-down-80", "10-down-90", "90-down-30", "10-down-50"],
)
def test_down_percent_truncates(start: int, percent: int, limit: int) -> None:
    value, _ = scale_down_limit(start, rules(DEFAULT_SCALE_DOWN, f"Percent {percent}/60"), RuleHistory(), T0)
    assert value == limit


def test_reason_names_the_limiting_policy() -> None:
    from autoscaler.policy.rate import limit_rate

    stage = limit_rate(
        3, 9, rules(DEFAULT_SCALE_UP, "Pods 2/60 + Percent 10/60"), DEFAULT_SCALE_DOWN, RuleHistory(), T0
    )
    assert stage.reason is Reason.ScaleUpLimit
    assert stage.replicas == 5
    assert "scale up 3 -> 9 limited to 5 by policy Pods 2/60s" in stage.message
