"""The base of every error a command reports as one line and exit 2: bad input, or a peer answering nonsense.

Each package raises its own subclasses (`autoscaler.errors.AutoscalerError`, the Prometheus client's
`PrometheusClientError`, `fleet.errors.FleetError`); a command catches this one base, so an error raised by
shared code reaches the user the same way as the command's own.
"""

from __future__ import annotations

__all__ = ["ReportedError"]


class ReportedError(Exception):
    """An error meant for the user: its message names the file, flag or peer and what is wrong."""
