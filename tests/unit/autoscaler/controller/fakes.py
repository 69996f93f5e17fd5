"""In-memory stand-ins for the controller's two outside worlds: a ScaleBackend and a MetricsSource.

Plain objects implementing the protocols (no patching): each records what was done to it and can be told to
fail, so unit tests assert on patches, events and failures without any network.
"""

from __future__ import annotations

import threading
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from typing import Literal

from autoscaler.controller.loop import Controller
from autoscaler.errors import ConflictError, KubeApiError, NotFoundError
from autoscaler.kube.scale import ScaleState
from autoscaler.policy import TargetRef
from plumbing.prometheus.runner import QueryResult


@dataclass
class Workload:
    replicas: int
    annotations: dict[str, str] = field(default_factory=dict)
    version: int = 1


@dataclass
class FakeBackend:
    """A cluster of workloads keyed by TargetRef; `conflicts[ref]` answers that many patches with 409."""

    workloads: dict[TargetRef, Workload] = field(default_factory=dict)
    patches: list[tuple[TargetRef, int]] = field(default_factory=list)
    events: list[tuple[TargetRef, str, str, str]] = field(default_factory=list)
    conflicts: dict[TargetRef, int] = field(default_factory=dict)
    read_errors: dict[TargetRef, Exception] = field(default_factory=dict)
    patch_errors: dict[TargetRef, Exception] = field(default_factory=dict)
    concurrent_writer: dict[TargetRef, int] = field(default_factory=dict)
    """On the next patch of ref, first set its replicas to this (as a user's kubectl scale would) -> 409."""
    reads: int = 0
    pending: dict[TargetRef, tuple[float, ...]] = field(default_factory=dict)
    """Per target, since when each of its Pending-unschedulable replicas has been so."""
    pending_errors: dict[TargetRef, Exception] = field(default_factory=dict)
    pending_calls: list[tuple[TargetRef, str | None]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, ref: TargetRef, replicas: int, **annotations: str) -> None:
        self.workloads[ref] = Workload(replicas, dict(annotations))

    def read_scale(self, ref: TargetRef) -> ScaleState:
        with self.lock:
            self.reads += 1
            if ref in self.read_errors:
                raise self.read_errors[ref]
            w = self.workloads.get(ref)
            if w is None:
                raise NotFoundError(f"{ref.kind} {ref.namespace}/{ref.name} not found", status=404)
            return ScaleState(
                spec_replicas=w.replicas,
                status_replicas=w.replicas,
                annotations=dict(w.annotations),
                resource_version=str(w.version),
                selector=f"app={ref.name}",
            )

    def unschedulable_since(self, ref: TargetRef, selector: str | None) -> tuple[float, ...]:
        with self.lock:
            self.pending_calls.append((ref, selector))
            if ref in self.pending_errors:
                raise self.pending_errors[ref]
            return self.pending.get(ref, ())

    def patch_scale(self, ref: TargetRef, replicas: int) -> None:
        with self.lock:
            if ref in self.patch_errors:
                raise self.patch_errors[ref]
            if ref in self.concurrent_writer:
                other = self.workloads[ref]
                other.replicas, other.version = self.concurrent_writer.pop(ref), other.version + 1
                raise ConflictError("the object has been modified", status=409)
            if self.conflicts.get(ref, 0) > 0:
                self.conflicts[ref] -= 1
                raise ConflictError("the object has been modified", status=409)
            w = self.workloads.get(ref)
            if w is None:
                raise NotFoundError("not found", status=404)
            w.replicas, w.version = replicas, w.version + 1
            self.patches.append((ref, replicas))

    def emit_event(
        self, ref: TargetRef, type_: Literal["Normal", "Warning"], reason: str, message: str
    ) -> None:
        with self.lock:
            self.events.append((ref, type_, reason, message))

    def reasons(self) -> list[str]:
        return [e[2] for e in self.events]


def api_error(status: int = 500) -> KubeApiError:
    return KubeApiError(f"HTTP {status} InternalError", status=status)


@dataclass
class FakeMetrics:
    """Answers queries from `values` (query -> value or a QueryResult); unknown queries have no series."""

    values: dict[str, float | QueryResult] = field(default_factory=dict)
    calls: list[tuple[str, ...]] = field(default_factory=list)

    def run_queries(self, queries: Collection[str]) -> Mapping[str, QueryResult]:
        self.calls.append(tuple(sorted(queries)))
        out: dict[str, QueryResult] = {}
        for q in queries:
            v = self.values.get(q)
            if isinstance(v, QueryResult):
                out[q] = v
            elif v is None:
                out[q] = QueryResult(None, "NoSeries", "query returned no series")
            else:
                out[q] = QueryResult(float(v))
        return out


def sample(c: Controller, family: str, **labels: str) -> float | None:
    """The value of the first sample of `family` with these labels on the controller's /metrics, or None."""
    for metric in c.metrics.registry.collect():
        for s in metric.samples:
            if s.name == family and all(s.labels.get(k) == v for k, v in labels.items()):
                return s.value
    return None
