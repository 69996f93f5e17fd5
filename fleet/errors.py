"""The errors of `gpu-fleet`: each is one message on stderr and an exit status, never a traceback."""

from __future__ import annotations

EXIT_OK = 0
EXIT_NOT_FOUND = 1
"""Not found, not enough GPUs, a wait that timed out: the command ran, the answer is no."""
EXIT_USAGE = 2
"""Bad input (a flag, a file) and an unreachable or misbehaving Prometheus, as `gpu-autoscaler check`."""
EXIT_STALE = 3
"""`status` answered, but some GPUs are stale: their exporter is down (or no longer reports them)."""

EXIT_CODES = f"""\
exit status:
  {EXIT_OK}        done: GPUs shown, a selection found, the estimate fits
  {EXIT_NOT_FOUND}        the answer is no: no GPU matches, not enough GPUs, the wait timed out,
           the model does not fit
  {EXIT_USAGE}        bad input (one line naming the flag), or Prometheus unreachable or answering
           an error or nonsense
  {EXIT_STALE}        status: GPUs shown, but some are stale (their exporter is down)
  130/143  wait (or estimate --then-wait) stopped by SIGINT / SIGTERM"""
"""Shown at the end of every `--help`."""


class FleetError(Exception):
    """Anything that stops a `gpu-fleet` command: its message is printed as is, then `exit_code`."""

    exit_code = EXIT_USAGE


class UsageError(FleetError):
    """A flag or file that cannot be used; the message names the flag."""


class PrometheusError(FleetError):
    """Prometheus cannot be reached, refused the query, or answered something that is not a valid answer."""


class Unreachable(PrometheusError):
    """No answer at all: refused, unresolvable, TLS, proxy, timeout."""


class Stopped(Unreachable):
    """The query was cut by a stop signal (SIGINT, SIGTERM): the command is ending, not failing."""
