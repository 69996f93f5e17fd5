"""InMemoryScaleBackend: the contract's ScaleBackend over simulated Deployments, under the real controller."""

from __future__ import annotations

from collections.abc import Collection, Mapping

import pytest

from autoscaler.config.rules import RuleSet, parse_rules
from autoscaler.controller.loop import Controller
from autoscaler.kube.scale import KubeApiError, NotFoundError, ScaleBackend
from autoscaler.policy import TargetRef
from demo.cluster import ClusterSettings, SimulatedDeployment
from demo.scale_backend import InMemoryScaleBackend, RecordedEvent
from plumbing.prometheus.runner import QueryResult
from tests.clock import ManualClock

REF = TargetRef("Deployment", "demo", "inference")
T0 = 1_700_000_000.0


def backend_with(replicas: int = 2) -> tuple[InMemoryScaleBackend, SimulatedDeployment, ManualClock]:
    clock = ManualClock(T0)
    deployment = SimulatedDeployment("demo", "inference", replicas, clock,
                                     ClusterSettings(startup_delay_seconds=30))
    backend = InMemoryScaleBackend()
    backend.add(REF, deployment)
    return backend, deployment, clock


def test_it_satisfies_the_scale_backend_protocol() -> None:
    backend: ScaleBackend = InMemoryScaleBackend()
    assert callable(backend.read_scale) and callable(backend.patch_scale) and callable(backend.emit_event)


def test_read_then_patch_scales_the_deployment_and_moves_the_version() -> None:
    backend, deployment, _ = backend_with(2)
    before = backend.read_scale(REF)
    assert (before.spec_replicas, before.status_replicas) == (2, 2)
    backend.patch_scale(REF, 5)
    after = backend.read_scale(REF)
    assert after.spec_replicas == deployment.spec_replicas == 5
    assert after.resource_version != before.resource_version
    assert backend.patches == [(REF, 5)]


def test_unknown_target_is_not_found_like_the_api() -> None:
    backend, _, _ = backend_with()
    other = TargetRef("Deployment", "demo", "missing")
    with pytest.raises(NotFoundError, match="missing"):
        backend.read_scale(other)
    with pytest.raises(NotFoundError):
        backend.patch_scale(other, 3)
    with pytest.raises(NotFoundError):
        backend.read_scale(TargetRef("StatefulSet", "demo", "inference"))  # same name, other kind


def test_negative_replicas_are_rejected_as_the_api_server_would() -> None:
    backend, deployment, _ = backend_with(2)
    with pytest.raises(KubeApiError) as info:
        backend.patch_scale(REF, -1)
    assert info.value.status == 422
    assert deployment.spec_replicas == 2


def test_events_are_kept_and_passed_on() -> None:
    seen: list[RecordedEvent] = []
    backend = InMemoryScaleBackend(on_event=seen.append)
    backend.emit_event(REF, "Normal", "ScaledUp", "2 -> 4")
    assert backend.events() == (RecordedEvent(REF, "Normal", "ScaledUp", "2 -> 4"),)
    assert seen == list(backend.events())


def test_annotations_are_read_back() -> None:
    backend, _, _ = backend_with()
    backend.set_annotations(REF, {"gpu-autoscaler.io/paused": "true"})
    assert backend.read_scale(REF).annotations == {"gpu-autoscaler.io/paused": "true"}


class FixedMetrics:
    """A MetricsSource answering every query with one value."""

    def __init__(self, value: float | None) -> None:
        self.value = value

    def run_queries(self, queries: Collection[str]) -> Mapping[str, QueryResult]:
        if self.value is None:
            return {q: QueryResult(None, "NoSeries", "no series") for q in queries}
        return {q: QueryResult(self.value) for q in queries}


RULES = """
rules:
  - name: inference
    target: {kind: Deployment, namespace: demo, name: inference}
    minReplicas: 2
    maxReplicas: 10
    metrics:
      - {name: requests_per_second, query: 'sum(rate(service_requests_total[10s]))', type: Total, target: 9}
"""


def test_the_real_controller_scales_the_simulated_deployment() -> None:
    backend, deployment, clock = backend_with(2)
    metrics = FixedMetrics(45.0)  # 45 req/s at 9 per replica: 5 replicas
    controller = Controller(backend, metrics, parse_rules(RULES, "rules.yaml"), clock)
    try:
        report = controller.sync_once()
        assert report.outcomes[0].patched
        assert deployment.spec_replicas == 5
        assert deployment.snapshot(4.5).loading == 3  # the new replicas load their model first
        assert [e.reason for e in backend.events()] == ["ScaledUp"]
        clock.now += 15
        metrics.value = None  # every metric failed: the controller holds, the Deployment keeps its count
        controller.sync_once()
        assert deployment.spec_replicas == 5
    finally:
        controller.close()


def test_paused_annotation_freezes_the_simulated_deployment() -> None:
    backend, deployment, clock = backend_with(2)
    backend.set_annotations(REF, {"gpu-autoscaler.io/paused": "true"})
    controller = Controller(backend, FixedMetrics(90.0), RuleSet("r", parse_rules(RULES, "r").rules), clock)
    try:
        controller.sync_once()
        assert deployment.spec_replicas == 2
        assert backend.patches == []
    finally:
        controller.close()


def test_the_scale_has_a_selector_and_lists_the_pending_replicas_on_the_controllers_clock() -> None:
    clock = ManualClock(T0)
    deployment = SimulatedDeployment("demo", "inference", 2, clock, ClusterSettings(nodes=1, gpus_per_node=3))
    backend = InMemoryScaleBackend(to_controller_clock=lambda t: t + 1_000.0)
    backend.add(REF, deployment)
    selector = backend.read_scale(REF).selector
    assert selector == "app=inference"
    assert backend.unschedulable_since(REF, selector) == ()
    clock.now += 5
    backend.patch_scale(REF, 5)  # 3 GPUs: two replicas Pending
    assert backend.unschedulable_since(REF, selector) == (T0 + 1_005.0, T0 + 1_005.0)
    assert backend.unschedulable_since(REF, None) == ()  # a scale without a selector lists nothing
    assert backend.unschedulable_since(REF, "app=other") == ()
    with pytest.raises(NotFoundError):
        backend.unschedulable_since(TargetRef("Deployment", "demo", "missing"), selector)


class ByQuery:
    """A MetricsSource answering each query with the value of the first key it contains."""

    def __init__(self, answers: dict[str, float]) -> None:
        self.answers = answers

    def run_queries(self, queries: Collection[str]) -> Mapping[str, QueryResult]:
        return {q: QueryResult(next(v for k, v in self.answers.items() if k in q)) for q in queries}


GUARDED = RULES + """\
    capacity: {query: 'cluster:gpus_unallocated:sum', gpusPerReplica: 1,
               pendingGraceSeconds: 30}
"""


def test_the_real_controller_limits_a_scale_up_to_the_free_gpus_and_holds_while_pending() -> None:
    clock = ManualClock(T0)
    deployment = SimulatedDeployment("demo", "inference", 2, clock, ClusterSettings(nodes=1, gpus_per_node=5))
    backend = InMemoryScaleBackend()
    backend.add(REF, deployment)
    source = ByQuery({"service_requests_total": 90.0, "gpus_unallocated": 2.0})  # wants 10, 2 free
    controller = Controller(backend, source, parse_rules(GUARDED, "rules.yaml"), clock)
    try:
        [outcome] = controller.sync_once().outcomes
        assert (outcome.current, outcome.desired, outcome.reason) == (2, 4, "CapacityLimited")
        assert "2 free GPU(s), 1 per replica: 2 more replica(s) fit: 2 -> 4 (not 6)" in outcome.message
        source.answers["gpus_unallocated"] = 3.0  # a stale read: one GPU less is really free
        clock.now += 15
        controller.sync_once()
        assert deployment.spec_replicas == 7 and deployment.snapshot(1.0).pending == 2
        clock.now += 31  # the Pending replicas pass the grace period: no scale-up, whatever the query says
        [outcome] = controller.sync_once().outcomes
        assert (outcome.desired, outcome.reason) == (7, "CapacityLimited")
        assert "2 replica(s) Pending as unschedulable for more than 30s" in outcome.message
        assert "CapacityLimited" in [e.reason for e in backend.events()]
    finally:
        controller.close()
