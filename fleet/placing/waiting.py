"""The wait of `wait` and `estimate --then-wait`: a choice of GPUs every `--interval` until it succeeds (exit
0, the choice printed as `select` prints it) or `--timeout` passes (exit 1). One progress line per attempt on
stderr: rewritten in place on a terminal, a plain line otherwise (logs). SIGTERM and SIGINT end the wait at
once (exit 128 + the signal's number).

A Prometheus that cannot be reached is an attempt that failed (shown, then retried): a restart of
Prometheus should not end a half-hour wait. A Prometheus that answers an error (401, a bad answer) ends it.
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from fleet.errors import EXIT_NOT_FOUND
from fleet.output import JSON, failure_json
from fleet.placing.choosing import print_report
from fleet.placing.inventory import gather
from fleet.placing.selection import Request, Selection, select
from fleet.querying.connection import connect
from fleet.querying.polling import Stop, attempts
from plumbing.cli import duration
from plumbing.display import visible


def add_wait_arguments(parser: argparse.ArgumentParser) -> None:
    """`--timeout` and `--interval`, shared with `estimate --then-wait`."""
    parser.add_argument("--timeout", type=duration(0.0, 7 * 86400.0, above=True), default=1800.0,
                        metavar="DURATION", help="give up after this long, e.g. 30m, 2h (default 30m)")
    parser.add_argument("--interval", type=duration(0.1, 3600.0), default=15.0, metavar="DURATION",
                        help="time between attempts, e.g. 15s (default 15s)")


@dataclass
class Outcome:
    selection: Selection | None
    attempts: int
    stopped_by: int | None = None
    """The signal that ended the wait, if one did."""


def wait_for(attempt: Callable[[], Selection], *, timeout: float, interval: float, stop: threading.Event,
             progress: Callable[[int, str], None],
             monotonic: Callable[[], float] = time.monotonic) -> Outcome:
    """Call `attempt` until it succeeds, `timeout` seconds pass or `stop` is set; `progress(n, line)` after
    each failed attempt. An Unreachable Prometheus is a failed attempt."""
    tries = 0
    for tried in attempts(attempt, interval=interval, stop=stop, timeout=timeout, monotonic=monotonic):
        tries, selection = tried.number, tried.value
        if selection is not None and selection.ok:
            return Outcome(selection, tries)
        line = selection.summary() if selection is not None else str(tried.error)
        progress(tries, f"{line}; {max(tried.left, 0.0):.0f}s left")
    return Outcome(None, tries)


def _progress_writer(tty: bool) -> Callable[[int, str], None]:
    def write(attempt: int, line: str) -> None:
        text = f"attempt {attempt}: {visible(line)}"
        if tty:
            sys.stderr.write("\r\033[K" + text)
        else:
            sys.stderr.write(text + "\n")
        sys.stderr.flush()

    return write


def wait_and_report(args: argparse.Namespace, request: Request) -> int:
    """The wait for `request` with the flags of `args`, its outcome printed; the exit status."""
    stop = Stop.on_signals()
    received = stop.received
    tty = sys.stderr.isatty()
    with connect(args, cancel=stop.cancel) as client:
        outcome = wait_for(lambda: select(gather(client), request), timeout=args.timeout,
                           interval=args.interval, stop=stop.event, progress=_progress_writer(tty))
    if tty and (outcome.attempts > 1 or outcome.selection is None):
        sys.stderr.write("\n")
    if received:
        return _failed(f"stopped by {signal.Signals(received[0]).name} after {outcome.attempts} attempt(s)",
                       128 + received[0], args.output)
    if outcome.selection is None:
        return _failed(f"timed out after {outcome.attempts} attempt(s)", EXIT_NOT_FOUND, args.output)
    return print_report(outcome.selection, args.output, not args.no_headers)


def _failed(message: str, code: int, output: str) -> int:
    if output == JSON:
        print(failure_json(message, code))
    print(message, file=sys.stderr)
    return code
