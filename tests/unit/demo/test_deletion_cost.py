"""The demo's side of `podDeletionCost`: the in-memory backend lists and annotates the simulated replicas, the
simulated ReplicaSet removes the lowest cost first among ready replicas (newest first without costs), and
`on_removed` tells which replicas a scale-down took, and which the order without costs would have taken:
under the real controller."""

from __future__ import annotations

from collections.abc import Collection, Mapping

import pytest

from autoscaler.config.rules import parse_rules
from autoscaler.controller.loop import Controller
from autoscaler.errors import NotFoundError
from autoscaler.kube.deletion_cost import COST_ANNOTATION, OURS_ANNOTATION
from autoscaler.policy import TargetRef
from demo.cluster import ClusterSettings, ScaleDown, SimulatedDeployment
from demo.scale_backend import InMemoryScaleBackend, selector_of
from plumbing.prometheus.runner import QueryResult
from plumbing.prometheus.series import SeriesValues
from tests.clock import ManualClock

REF = TargetRef("Deployment", "demo", "inference")
T0 = 1_700_000_000.0
RULES = """
rules:
  - name: inference
    target: {kind: Deployment, namespace: demo, name: inference}
    minReplicas: 1
    maxReplicas: 10
    metrics:
      - {name: requests_per_second, query: 'sum(rate(service_requests_total[10s]))', type: Total, target: 9}
    behavior: {scaleDown: {stabilizationWindowSeconds: 0}}
"""
WITH_COSTS = RULES + "    podDeletionCost: {query: 'sum by (pod) (vllm:num_requests_running)'}\n"


class LoadAndRunning:
    """The rule's load, and each replica's running requests by `pod` (a metrics source that reads series)."""

    def __init__(self, load: float, running: Mapping[str, float]) -> None:
        self.load, self.running = load, dict(running)

    def run_queries(self, queries: Collection[str]) -> Mapping[str, QueryResult]:
        return {q: QueryResult(self.load) for q in queries}

    def run_series(self, query: str, label: str) -> SeriesValues:
        assert label == "pod"
        return SeriesValues(self.running)


def deployment_of(replicas: int) -> tuple[InMemoryScaleBackend, SimulatedDeployment, ManualClock]:
    clock = ManualClock(T0)
    deployment = SimulatedDeployment("demo", "inference", replicas, clock, ClusterSettings())
    backend = InMemoryScaleBackend()
    backend.add(REF, deployment)
    return backend, deployment, clock


@pytest.mark.parametrize(("rules", "kept"), [
    (RULES, {"inference-0001", "inference-0002"}),  # newest go: the busy ones 3 and 4 are cut
    (WITH_COSTS, {"inference-0003", "inference-0004"}),  # idlest go: the busy ones stay
])
def test_a_scale_down_keeps_the_busy_replicas_only_with_the_costs(rules: str, kept: set[str]) -> None:
    backend, deployment, clock = deployment_of(4)
    removed: list[ScaleDown] = []
    deployment.on_removed = removed.append
    running = {"inference-0001": 0, "inference-0002": 1, "inference-0003": 6, "inference-0004": 3}
    controller = Controller(backend, LoadAndRunning(18.0, running), parse_rules(rules, "r.yaml"), clock)
    try:
        assert controller.sync_once().outcomes[0].patched  # 18 req/s at 9 per replica: 2
    finally:
        controller.close()
    assert {r.name for r in deployment.replicas()} == kept
    [event] = removed
    assert set(event.removed) == {f"inference-000{i}" for i in range(1, 5)} - kept
    assert set(event.without_costs) == {"inference-0003", "inference-0004"}  # newest first, costs or not
    assert event.costs_set == (rules == WITH_COSTS)


def test_the_backend_lists_and_annotates_the_replicas() -> None:
    backend, deployment, _ = deployment_of(2)
    backend.annotate_pod("demo", "inference-0002", {COST_ANNOTATION: "7", OURS_ANNOTATION: "7"})
    listed = backend.list_pods(REF, selector_of(deployment))
    assert [(p.name, dict(p.annotations)) for p in listed] == [
        ("inference-0001", {}), ("inference-0002", {COST_ANNOTATION: "7", OURS_ANNOTATION: "7"})]
    assert backend.list_pods(REF, "app=other") == ()
    backend.annotate_pod("demo", "inference-0002", {COST_ANNOTATION: None, OURS_ANNOTATION: None})
    assert [dict(p.annotations) for p in backend.list_pods(REF, selector_of(deployment))] == [{}, {}]
    with pytest.raises(NotFoundError):
        backend.annotate_pod("demo", "inference-0009", {COST_ANNOTATION: "1"})
