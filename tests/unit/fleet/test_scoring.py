"""The fleet's availability score is the exporter's (exporter/health/state.py), input for input."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from exporter.health.state import availability_score as exporter_score
from fleet.placing.scoring import availability_score

finite = st.floats(min_value=-1e12, max_value=1e12, allow_nan=False)


@given(free=st.integers(0, 10**12), total=st.integers(-10, 10**12), utilization=finite)
def test_the_same_number_as_the_exporter(free: int, total: int, utilization: float) -> None:
    assert availability_score(free, total, utilization) == exporter_score(free, total, utilization)


def test_the_published_weights() -> None:
    # 0.6 * free share + 0.4 * idle share: half the memory free, 25 % busy -> 0.3 + 0.3
    assert availability_score(40, 80, 0.25) == pytest.approx(0.6)
    assert availability_score(80, 80, 0.0) == 1.0
    assert availability_score(None, 80, 0.0) is None
    assert availability_score(1, 0, 0.0) is None
