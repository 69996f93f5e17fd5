"""The scale interface the controller acts through: `ScaleBackend`, the `ScaleState` it reads, and
`NamespaceScope`, which keeps any backend inside `--namespaces`.

`ScaleBackend` is all the controller needs: read a target's scale (replicas, annotations, version, selector),
patch its replica count, post an Event on it, and find its Pending unschedulable pods. A backend that can also
list a target's pods and annotate them is a `PodAnnotator` (the deletion costs before a scale-down). Its
implementations:
`autoscaler.kube.scale.KubernetesScaleBackend` (the official client), the assumed replicas of `status` and
`run` without a cluster, and the demo's in-memory cluster. This module imports no Kubernetes client (0.35 s to
import): the controller and the no-cluster commands load it only where a cluster is used.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from typing import Literal, Protocol, runtime_checkable

from autoscaler.errors import NamespaceNotAllowedError
from autoscaler.policy import TargetRef

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ScaleState:
    """A target's scale as read this sync: desired (spec) and running (status) replicas, its annotations."""

    spec_replicas: int
    status_replicas: int
    annotations: Mapping[str, str] = field(default_factory=dict)
    resource_version: str | None = None
    selector: str | None = None
    """status.selector of the scale: the label selector of the target's pods (None when it has none)."""


class ScaleBackend(Protocol):
    """Where replica counts are read and written; the controller's only view of the cluster."""

    def read_scale(self, ref: TargetRef) -> ScaleState:
        """Raises NotFoundError (KindNotFoundError: the API has no such kind), NotScalableError, KubeApiError
        (KubeTimeoutError when the server did not answer in time)."""
        ...

    def patch_scale(self, ref: TargetRef, replicas: int) -> None:
        """Raises ConflictError (the target changed since it was read), NotFoundError, KubeApiError."""
        ...

    def emit_event(
        self, ref: TargetRef, type_: Literal["Normal", "Warning"], reason: str, message: str
    ) -> None:
        """Best effort for the caller: raises KubeError, which the controller logs and goes on."""
        ...

    def unschedulable_since(self, ref: TargetRef, selector: str | None) -> tuple[float, ...]:
        """For each pod of the target (matching `selector`, the scale's status.selector) Pending as
        unschedulable (condition PodScheduled False, reason Unschedulable): the Unix time its condition turned
        so. Asked only for rules with a capacity guard; `selector` None (a scale without one): (). Raises
        KubeError like a read."""
        ...


@dataclass(frozen=True, slots=True)
class PodMeta:
    """A pod of a target as the deletion costs need it: its name and annotations."""

    name: str
    annotations: Mapping[str, str] = field(default_factory=dict)


@runtime_checkable
class PodAnnotator(Protocol):
    """A backend that can rank a target's pods for a scale-down (the Kubernetes one; `NamespaceScope` over
    one)."""

    def list_pods(self, ref: TargetRef, selector: str) -> tuple[PodMeta, ...]:
        """The target's pods (matching `selector`, the scale's status.selector) not already terminating.
        Raises KubeError like a read."""
        ...

    def annotate_pod(self, namespace: str, name: str, annotations: Mapping[str, str | None]) -> None:
        """Merge `annotations` into the pod's (None removes one). Raises NotFoundError (the pod is gone),
        ConflictError, KubeApiError."""
        ...


class NamespaceScope:
    """A `ScaleBackend` limited to some namespaces (`--namespaces`): outside them nothing reaches the API.

    A read or patch of a target elsewhere raises `NamespaceNotAllowedError` (the rule's sync reports
    FailedGetScale with reason NamespaceNotAllowed), logged as an ERROR once per target; an Event for it is
    dropped, since posting one there is an API call into that namespace too.
    """

    def __init__(self, inner: ScaleBackend, namespaces: Collection[str]) -> None:
        self.inner = inner
        self.namespaces = frozenset(namespaces)
        self._reported: set[TargetRef] = set()
        self._lock = threading.Lock()

    def _check(self, ref: TargetRef) -> None:
        if ref.namespace in self.namespaces:
            return
        message = (
            f"{ref.kind} {ref.namespace}/{ref.name}: namespace {ref.namespace!r} is not in --namespaces "
            f"({','.join(sorted(self.namespaces))}); the rule is refused: not read, not scaled"
        )
        with self._lock:
            first = ref not in self._reported
            self._reported.add(ref)
        if first:
            log.error("%s", message)
        raise NamespaceNotAllowedError(message)

    def read_scale(self, ref: TargetRef) -> ScaleState:
        self._check(ref)
        return self.inner.read_scale(ref)

    def patch_scale(self, ref: TargetRef, replicas: int) -> None:
        self._check(ref)
        self.inner.patch_scale(ref, replicas)

    def emit_event(
        self, ref: TargetRef, type_: Literal["Normal", "Warning"], reason: str, message: str
    ) -> None:
        if ref.namespace in self.namespaces:
            self.inner.emit_event(ref, type_, reason, message)

    def unschedulable_since(self, ref: TargetRef, selector: str | None) -> tuple[float, ...]:
        self._check(ref)
        return self.inner.unschedulable_since(ref, selector)

    def list_pods(self, ref: TargetRef, selector: str) -> tuple[PodMeta, ...]:
        """The inner backend's, inside --namespaces; none when it cannot list pods."""
        self._check(ref)
        return self.inner.list_pods(ref, selector) if isinstance(self.inner, PodAnnotator) else ()

    def annotate_pod(self, namespace: str, name: str, annotations: Mapping[str, str | None]) -> None:
        if namespace not in self.namespaces:
            raise NamespaceNotAllowedError(f"pod {namespace}/{name}: namespace {namespace!r} is not in "
                                           f"--namespaces ({','.join(sorted(self.namespaces))})")
        if isinstance(self.inner, PodAnnotator):
            self.inner.annotate_pod(namespace, name, annotations)
