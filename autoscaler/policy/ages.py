"""Comparing an entry's age with a window or period exactly, as the HPA does on Go's integer nanoseconds.

Timestamps are float seconds, and the difference of two decimals is not exact: 16.4 - 1.4 is
14.999999999999998, which would put an entry recorded 15 s ago inside a 15 s period. Timestamps are taken to
be exact to the microsecond (simulate's decimal `t`, a clock reading), so a true age is a whole number of
microseconds and the float difference `now - timestamp` is within half a microsecond of it (up to 2**32 s, the
year 2106). Comparing that difference with the period moved by half a microsecond is therefore exact, and
costs one subtraction per entry: the stages compute the bound once per sync and compare raw differences.
"""

from __future__ import annotations

HALF_MICROSECOND = 0.5e-6


def younger_than(period: float) -> float:
    """The bound B with `now - timestamp < B` exactly when the age is strictly less than `period` (the HPA's
    `timestamp.After(now - period)`: a recommendation or event that counts)."""
    return period - HALF_MICROSECOND


def older_than(period: float) -> float:
    """The bound B with `now - timestamp > B` exactly when the age is strictly more than `period` (the HPA's
    `timestamp.Before(now - period)`: an outdated scale event)."""
    return period + HALF_MICROSECOND
