"""Byte sizes and parameter counts as users write them, and one clear error otherwise."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fleet.errors import UsageError
from fleet.reporting.timeline import LATEST_UNIX_SECONDS, parse_time
from fleet.units import format_bytes, parse_bytes, parse_count

SIZES = {
    "40GiB": 40 * 1024**3, "80G": 80 * 10**9, "80GB": 80 * 10**9, "512MiB": 512 * 1024**2,
    "1.5TiB": int(1.5 * 1024**4), "40Gi": 40 * 1024**3, "1024": 1024, "7B": 7, " 2 GiB ": 2 * 1024**3,
    "10gib": 10 * 1024**3,
}


@pytest.mark.parametrize(("text", "expected"), SIZES.items(), ids=SIZES.keys())
def test_sizes(text: str, expected: int) -> None:
    assert parse_bytes(text) == expected


@pytest.mark.parametrize("text", ["", "-1GiB", "GiB", "40XB", "1e3GiB", "40 GiB GiB", "nan", "2PiB"])
def test_bad_sizes_are_one_message(text: str) -> None:
    with pytest.raises(ValueError, match="expected a size"):
        parse_bytes(text)


COUNTS = {"70B": 70e9, "6.7B": 6.7e9, "350M": 350e6, "1.5T": 1.5e12, "405b": 405e9, "1000": 1000.0}


@pytest.mark.parametrize(("text", "expected"), COUNTS.items(), ids=COUNTS.keys())
def test_counts(text: str, expected: float) -> None:
    assert parse_count(text) == pytest.approx(expected)


@pytest.mark.parametrize("text", ["", "0B", "70X", "B", "-7B", "inf"])
def test_bad_counts(text: str) -> None:
    with pytest.raises(ValueError, match="expected a parameter count"):
        parse_count(text)


def test_format_bytes() -> None:
    assert format_bytes(40 * 1024**3) == "40.0GiB"
    assert format_bytes(512 * 1024**2) == "512.0MiB"
    assert format_bytes(12) == "12B"


@given(text=st.one_of(st.floats(allow_nan=True, allow_infinity=True).map(repr),
                      st.integers(min_value=-(10**30), max_value=10**30).map(str),
                      st.text(max_size=40),
                      st.integers(min_value=1, max_value=99999).map(lambda y: f"{y:04d}-01-01T00:00:00Z")))
@settings(max_examples=300, deadline=None)
def test_until_is_a_time_from_1970_to_9999_or_one_usage_error(text: str) -> None:
    """--until of any text: a time Prometheus and datetime can name, or UsageError; never OverflowError."""
    try:
        when = parse_time(text, now=1_700_000_000.0)
    except UsageError as exc:
        assert str(exc).startswith("--until: expected unix seconds")
    else:
        assert 0 <= when <= LATEST_UNIX_SECONDS
