"""The loop under `status --watch` and `wait`: one attempt after another, `interval` apart, until the caller
has what it wants, `stop` is set (SIGINT, SIGTERM) or the timeout passes.

A Prometheus that cannot be reached is an attempt that failed, handed to the caller to show, and the loop
goes on: a restart of Prometheus should not end a watch or a half-hour wait. A Prometheus that answers an
error (401, a bad answer) raises through the loop and ends it.

`Stop.on_signals()` sets the stop on SIGINT and SIGTERM and cancels the queries in flight (its `cancel` is
given to `connect`): a Prometheus that hangs or drips never holds a stopping command for `--query-timeout`.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Generic, TypeVar

from fleet.errors import Unreachable
from plumbing.cli import install_stop_handlers
from plumbing.deadline import Cancel

T = TypeVar("T")


@dataclass(frozen=True)
class Stop:
    """What a stop signal sets: the event the loop waits on, the cancel of the queries in flight, and the
    signals received (the first decides the exit status)."""

    event: threading.Event
    cancel: Cancel
    received: list[int]

    @classmethod
    def on_signals(cls) -> Stop:
        """A Stop set by SIGINT and SIGTERM (handlers installed now)."""
        stop = cls(threading.Event(), Cancel(), [])

        def received(signum: int) -> None:
            stop.received.append(signum)
            stop.event.set()  # before the cut: a query failing from it finds the loop already stopping
            stop.cancel.cancel()

        install_stop_handlers(stop.event, received)
        return stop


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
            if stop.is_set():  # cut by the stop signal: nothing to show
                return
            value, error = None, exc
        left = deadline - monotonic()
        yield Attempt(number, value, error, left)
        if left <= 0 or stop.wait(min(interval, left)):
            return
