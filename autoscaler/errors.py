"""The autoscaler's own exception hierarchy: every failure a user can cause or meet is one of these types.

Adapters (rules file, trace CSV, Prometheus, Kubernetes) re-raise ours `from` the original exception, so no
third-party exception leaks past them and the CLI can print one clear line and exit 2.
"""

from __future__ import annotations

from collections.abc import Iterable
from enum import StrEnum

from plumbing.errors import ReportedError
from plumbing.problems import Problem

__all__ = [
    "AutoscalerError",
    "ConflictError",
    "KindNotFoundError",
    "KubeApiError",
    "KubeConfigError",
    "KubeError",
    "KubeTimeoutError",
    "MalformedAnswerError",
    "NamespaceNotAllowedError",
    "NotFoundError",
    "NotScalableError",
    "Problem",
    "RulesError",
    "ScaleErrorReason",
    "TraceError",
    "UsageError",
]


class ScaleErrorReason(StrEnum):
    """The `reason` label of gpu_autoscaler_scale_errors_total: how a read or patch of a scale failed. Here,
    not in `reasons`, so importing the errors loads neither the engine nor any client (a test says so)."""

    ApiError = "ApiError"
    NotFound = "NotFound"
    Conflict = "Conflict"
    Timeout = "Timeout"
    MalformedAnswer = "MalformedAnswer"
    NamespaceNotAllowed = "NamespaceNotAllowed"


class AutoscalerError(ReportedError):
    """Base class of every error the autoscaler raises on purpose (the Prometheus client's errors share its
    base, `plumbing.errors.ReportedError`, which the commands catch)."""


class RulesError(AutoscalerError):
    """The rules file is unreadable or invalid; carries every problem found, not just the first."""

    def __init__(self, problems: Iterable[Problem]) -> None:
        self.problems: tuple[Problem, ...] = tuple(problems)
        super().__init__("\n".join(str(p) for p in self.problems))


class TraceError(AutoscalerError):
    """A simulate trace (CSV) is unreadable or invalid; names the file, line and column."""

    def __init__(self, problem: Problem) -> None:
        self.problem = problem
        super().__init__(str(problem))


class UsageError(AutoscalerError):
    """A command-line argument is wrong in a way argparse cannot see (e.g. --rule names no rule)."""


# --- the controller's adapters: raised by every ScaleBackend, handled by the controller ---


class KubeConfigError(AutoscalerError):
    """No usable in-cluster config or kubeconfig."""


class KubeError(AutoscalerError):
    """A Kubernetes API call failed; `status` is the HTTP status when the server answered."""

    reason_label: ScaleErrorReason = ScaleErrorReason.ApiError
    """Value of the `reason` label of gpu_autoscaler_scale_errors_total."""

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


class KubeApiError(KubeError):
    """Any API error other than the ones below (5xx, 403, unreachable server, ...): retried next sync."""


class NotFoundError(KubeApiError):
    """The target (or its namespace) does not exist: 404."""

    reason_label = ScaleErrorReason.NotFound


class KindNotFoundError(NotFoundError):
    """API discovery has no such kind: its apiVersion is not served, or serves no resource of that kind (a CRD
    not installed, a typo in `kind`). Retried next sync, as the CRD may be installed any time."""


class NotScalableError(KubeApiError):
    """The kind exists but cannot be a target: no `<plural>/scale` subresource, or not namespaced."""


class ConflictError(KubeApiError):
    """The object changed since it was read (409): re-read and retry."""

    reason_label = ScaleErrorReason.Conflict


class KubeTimeoutError(KubeApiError):
    """The API server did not answer in time (client timeout or 504)."""

    reason_label = ScaleErrorReason.Timeout


class MalformedAnswerError(KubeApiError):
    """The API server's answer is not the object the call returns (bad JSON, wrong kind, wrong types)."""

    reason_label = ScaleErrorReason.MalformedAnswer


class NamespaceNotAllowedError(KubeError):
    """The target's namespace is outside --namespaces: refused before any API call."""

    reason_label = ScaleErrorReason.NamespaceNotAllowed
