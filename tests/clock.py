"""The one clock tests move by hand: passed where production code takes `clock: Callable[[], float]`."""

from __future__ import annotations

T0 = 1_700_000_000.0
"""A fixed wall-clock instant (2023-11-14T22:13:20Z) where the controller's tests start their clocks."""


class ManualClock:
    """Returns `now` until the test moves it (`clock.advance(30)` or `clock.now = ...`); counts its reads, so
    a test can say how often the code under test asked for the time."""

    def __init__(self, start: float = 0.0) -> None:
        self.now = start
        self.reads = 0

    def __call__(self) -> float:
        self.reads += 1
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds

    @property
    def t(self) -> float:
        """`now` under the name the controller's tests use."""
        return self.now

    @t.setter
    def t(self, value: float) -> None:
        self.now = value
