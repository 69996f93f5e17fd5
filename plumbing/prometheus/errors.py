"""The Prometheus client's errors: what a connection file, a credential or a query can do wrong."""

from __future__ import annotations

from plumbing.errors import ReportedError

__all__ = ["PrometheusClientError"]


class PrometheusClientError(ReportedError):
    """Base of the client's own errors (a bad connection file, an unreadable credential, a failed range
    query)."""
