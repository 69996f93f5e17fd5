"""`InMemoryScaleBackend`: the controller's ScaleBackend over simulated Deployments instead of Kubernetes.

The demo hands it to the real controller (autoscaler/controller/loop.py), which reads and patches it exactly
as it does the scale subresource: same calls, same errors (autoscaler.errors'), a resource version that
moves on every change, annotations (pause), a label selector, the Pending replicas a capacity guard asks about
(since when, on the controller's clock), the pods a `podDeletionCost` rule annotates (their deletion cost
ranks the simulated ReplicaSet's scale-down), and Events kept in memory for the demo to print.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Literal

from autoscaler.errors import KubeApiError, NotFoundError
from autoscaler.kube.backend import PodMeta, ScaleState
from autoscaler.kube.deletion_cost import COST_ANNOTATION
from autoscaler.policy import TargetRef
from demo.cluster import SimulatedDeployment


@dataclass(frozen=True)
class RecordedEvent:
    """A Kubernetes Event the controller posted on a target."""

    target: TargetRef
    type: str
    reason: str
    message: str


def merge_pod_annotations(held: dict[str, str], patch: Mapping[str, str | None]) -> int | None:
    """Merge a pod's annotations `patch` into `held` as the API server does (None removes one); the pod's
    deletion cost after it (None: none), for the simulated ReplicaSet."""
    for key, value in patch.items():
        if value is None:
            held.pop(key, None)
        else:
            held[key] = value
    cost = held.get(COST_ANNOTATION)
    return int(cost) if cost is not None else None


def selector_of(deployment: SimulatedDeployment) -> str:
    """status.selector of the simulated Deployment's scale: its pods carry `app=<name>`."""
    return f"app={deployment.name}"


class InMemoryScaleBackend:
    """Targets are simulated Deployments keyed by (kind, namespace, name); thread-safe."""

    def __init__(self, on_event: Callable[[RecordedEvent], None] | None = None,
                 to_controller_clock: Callable[[float], float] = lambda t: t) -> None:
        """`to_controller_clock` turns a reading of the Deployments' clock into one of the controller's (the
        demo shifts the controller's clock to a virtual weekday): Pending replicas' since-times are compared
        with the controller's `now`."""
        self._to_controller_clock = to_controller_clock
        self._lock = threading.Lock()
        self._targets: dict[tuple[str, str, str], SimulatedDeployment] = {}
        self._annotations: dict[tuple[str, str, str], dict[str, str]] = {}
        self._versions: dict[tuple[str, str, str], int] = {}
        self._events: list[RecordedEvent] = []
        self._pod_annotations: dict[tuple[str, str], dict[str, str]] = {}
        """(namespace, pod) -> the annotations `annotate_pod` gave it."""
        self._on_event = on_event
        self.patches: list[tuple[TargetRef, int]] = []
        """Every patch applied, in order (what a test asserts on)."""

    @staticmethod
    def _key(ref: TargetRef) -> tuple[str, str, str]:
        return (ref.kind, ref.namespace, ref.name)

    def add(self, ref: TargetRef, deployment: SimulatedDeployment,
            annotations: Mapping[str, str] | None = None) -> None:
        with self._lock:
            key = self._key(ref)
            self._targets[key] = deployment
            self._annotations[key] = dict(annotations or {})
            self._versions[key] = 1

    def set_annotations(self, ref: TargetRef, annotations: Mapping[str, str]) -> None:
        """Replace the target's annotations (e.g. gpu-autoscaler.io/paused), as `kubectl annotate` would."""
        with self._lock:
            key = self._existing(ref)
            self._annotations[key] = dict(annotations)
            self._versions[key] += 1

    def events(self) -> tuple[RecordedEvent, ...]:
        with self._lock:
            return tuple(self._events)

    def _existing(self, ref: TargetRef) -> tuple[str, str, str]:
        key = self._key(ref)
        if key not in self._targets:
            raise NotFoundError(f"{ref.kind.lower()}s.apps {ref.name!r} not found in namespace "
                                f"{ref.namespace!r}", status=404)
        return key

    # -- ScaleBackend ---------------------------------------------------------------------------------
    def read_scale(self, ref: TargetRef) -> ScaleState:
        with self._lock:
            key = self._existing(ref)
            deployment = self._targets[key]
            replicas = deployment.spec_replicas
            return ScaleState(spec_replicas=replicas, status_replicas=replicas,
                              annotations=dict(self._annotations[key]),
                              resource_version=str(self._versions[key]), selector=selector_of(deployment))

    def patch_scale(self, ref: TargetRef, replicas: int) -> None:
        if replicas < 0:  # the API server's validation answers 422
            raise KubeApiError(f"spec.replicas: Invalid value: {replicas}: must be >= 0", status=422)
        with self._lock:
            key = self._existing(ref)
            self._targets[key].scale_to(replicas)
            self._versions[key] += 1
            self.patches.append((ref, replicas))

    def unschedulable_since(self, ref: TargetRef, selector: str | None) -> tuple[float, ...]:
        """The simulated Deployment's Pending replicas (no free GPU in the pool), since their creation; ()
        for a selector that is not the Deployment's, as a list by another label would find none of them."""
        with self._lock:
            deployment = self._targets[self._existing(ref)]
        if selector != selector_of(deployment):
            return ()
        return tuple(self._to_controller_clock(t) for t in deployment.unschedulable_since())

    def list_pods(self, ref: TargetRef, selector: str) -> tuple[PodMeta, ...]:
        """The simulated Deployment's replicas with the annotations given them; () for another selector."""
        with self._lock:
            deployment = self._targets[self._existing(ref)]
            if selector != selector_of(deployment):
                return ()
            names = {r.name for r in deployment.replicas()}
            for gone in [k for k in self._pod_annotations if k[0] == ref.namespace and k[1] not in names
                         and k[1].startswith(f"{deployment.name}-")]:
                del self._pod_annotations[gone]  # removed by a scale-down since
            return tuple(PodMeta(name, dict(self._pod_annotations.get((ref.namespace, name), {})))
                         for name in sorted(names))

    def annotate_pod(self, namespace: str, name: str, annotations: Mapping[str, str | None]) -> None:
        """Merge `annotations` into the pod's (None removes one); its deletion cost goes to its Deployment.
        NotFoundError for a pod no Deployment of the namespace has, as the API server's 404."""
        with self._lock:
            owner = next((d for (_, ns, _), d in self._targets.items()
                          if ns == namespace and any(r.name == name for r in d.replicas())), None)
            if owner is None:
                raise NotFoundError(f'pods "{name}" not found in namespace {namespace!r}', status=404)
            held = self._pod_annotations.setdefault((namespace, name), {})
            owner.set_deletion_cost(name, merge_pod_annotations(held, annotations))

    def emit_event(self, ref: TargetRef, type_: Literal["Normal", "Warning"], reason: str,
                   message: str) -> None:
        event = RecordedEvent(ref, type_, reason, message)
        with self._lock:
            self._events.append(event)
        if self._on_event is not None:
            self._on_event(event)
