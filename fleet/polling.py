"""The loop under `status --watch` and `wait`: one attempt after another, `interval` apart, until the caller
has what it wants, `stop` is set (SIGINT, SIGTERM) or the timeout passes.

A Prometheus that cannot be reached is an attempt that failed, handed to the caller to show, and the loop
goes on: a restart of Prometheus should not end a watch or a half-hour wait. A Prometheus that answers an
error (401, a bad answer) raises through the loop and ends it.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Generic, TypeVar

from fleet.errors import Unreachable

T = TypeVar("T")


@dataclass(frozen=True)
class Attempt(Generic[T]):
    """One attempt's outcome: its value, or the Unreachable it raised."""

    number: int
    """1 for the first attempt."""
    value: T | None
    error: Unreachable | None
    left: float
    """Seconds left before the timeout when the attempt returned (inf without a timeout)."""


def attempts(attempt: Callable[[], T], *, interval: float, stop: threading.Event, timeout: float = math.inf,
             monotonic: Callable[[], float] = time.monotonic) -> Iterator[Attempt[T]]:
    """`attempt()` again and again, each outcome yielded; the pause (`interval`, at most what is left of the
    timeout, cut short by `stop`) comes after the caller has handled it. A caller done with it stops
    iterating; the loop ends by itself once `stop` is set or the timeout has passed."""
    deadline = monotonic() + timeout
    number = 0
    while not stop.is_set():
        number += 1
        try:
            value, error = attempt(), None
        except Unreachable as exc:
            value, error = None, exc
        left = deadline - monotonic()
        yield Attempt(number, value, error, left)
        if left <= 0 or stop.wait(min(interval, left)):
            return
