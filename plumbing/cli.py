"""What every command line of the project needs, once: argparse types, stop signals, quiet exits.

`gpu-exporter`, `gpu-autoscaler` and the demo take ports and durations the same way (`15s`, `2m`, `500ms`,
bare numbers as seconds), stop on the same signals without deadlocking, and treat a reader that closed the
pipe (`| head`) as the end of the output, not as an error.
"""

from __future__ import annotations

import argparse
import logging
import math
import os
import re
import signal
import sys
import threading
from collections.abc import Callable, Iterable
from types import FrameType

from plumbing.display import visible

__all__ = [
    "EXIT_USAGE", "duration", "fail", "install_stop_handlers", "parse_duration", "port_number",
    "silence_stdout",
]

log = logging.getLogger(__name__)

EXIT_USAGE = 2
"""Bad input (flags, files, a port that cannot be served): argparse's own status for a usage error."""

_DURATION = re.compile(r"\s*([0-9]+(?:\.[0-9]+)?)\s*(ms|s|m|h)?\s*")
_UNIT = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, None: 1.0}


MAX_INTERVAL_SECONDS = 86400.0
"""A day: longer than any sync interval means, and far below what Event.wait and time_t can hold."""


def parse_duration(text: str) -> float:
    """'15s', '500ms', '1m', '2h' or bare seconds -> seconds in (0, a day]; argparse shows the message on bad
    input (an interval of 10^17 hours would crash the loop's first wait)."""
    match = _DURATION.fullmatch(text)
    seconds = float(match.group(1)) * _UNIT[match.group(2)] if match is not None else 0.0
    if not 0 < seconds <= MAX_INTERVAL_SECONDS:
        raise argparse.ArgumentTypeError(
            f"expected a positive duration like 15s, 500ms or 1m, at most 24h (got {text!r})")
    return seconds


def duration(low: float = 0.0, high: float | None = None, *, above: bool = False) -> Callable[[str], float]:
    """An argparse type: a duration (syntax of `parse_duration`, 0 allowed) in [low, high], (low, high]
    with `above`; the bounds are in the message, in seconds."""
    opening = "(" if above else "["
    span = f"{opening}{low:g}s, {high:g}s]" if high is not None else f"{'>' if above else '>='} {low:g}s"
    expected = f"expected a duration like 15s, 500ms or 1m, {'in ' if high is not None else ''}{span}"

    def convert(text: str) -> float:
        match = _DURATION.fullmatch(text)
        if match is None:
            raise argparse.ArgumentTypeError(f"{expected} (got {text!r})")
        seconds = float(match.group(1)) * _UNIT[match.group(2)]
        if (not math.isfinite(seconds) or seconds < low or (above and seconds == low)
                or (high is not None and seconds > high)):
            raise argparse.ArgumentTypeError(f"{expected} (got {text!r})")
        return seconds

    return convert


def port_number(text: str) -> int:
    """A TCP port, 0-65535 (0: no server); a typo is one argparse message, not a traceback."""
    try:
        port = int(text)
    except ValueError:
        port = -1
    if not 0 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"expected a port number from 0 to 65535 (got {text!r})")
    return port


def install_stop_handlers(
    stop: threading.Event,
    on_signal: Callable[[int], None] | None = None,
    signals: Iterable[signal.Signals] = (signal.SIGTERM, signal.SIGINT),
) -> None:
    """Each of `signals` calls `on_signal(signum)`, then sets `stop`, from a thread: the handler runs in the
    main thread, which may hold the Event's lock at that instant (inside `stop.wait()`), and `set()` there
    would wait for it forever."""

    def stop_now(signum: int) -> None:
        if on_signal is not None:
            on_signal(signum)
        stop.set()

    def handle(signum: int, frame: FrameType | None) -> None:
        threading.Thread(target=stop_now, args=(signum,), name="signal", daemon=True).start()

    for signum in signals:
        signal.signal(signum, handle)


def silence_stdout() -> None:
    """After a BrokenPipeError on stdout (`... | head`): point stdout at /dev/null, so the interpreter's final
    flush does not fail a second time and print a traceback."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, sys.stdout.fileno())
    finally:
        os.close(devnull)


def fail(prog: str | None, message: str) -> int:
    """Print `prog: message` (the message alone when `prog` is None: it already says where it comes from) as
    the one error line(s) on stderr, and return EXIT_USAGE for the caller to exit with, so every command
    reports bad input the same way."""
    shown = "\n".join(visible(line) for line in message.split("\n"))  # a server's words may hold escapes
    print(shown if prog is None else f"{prog}: {shown}", file=sys.stderr)
    return EXIT_USAGE
