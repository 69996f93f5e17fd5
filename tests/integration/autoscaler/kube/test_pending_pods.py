"""The Pending check of the capacity guard: a target's pods Pending as unschedulable, and since when.

The backend lists the pods matching the scale's status.selector (label selector, status.phase=Pending, pages
of 500) from the fake API server; a malformed pod is skipped, a malformed list is a failed read.
"""

from __future__ import annotations

import logging
import time
from typing import Any

import pytest

from autoscaler.config.rules import parse_rules
from autoscaler.controller.loop import Controller, ControllerSettings
from autoscaler.errors import KubeApiError, MalformedAnswerError, NamespaceNotAllowedError
from autoscaler.kube.scale import MAX_POD_PAGES, KubernetesScaleBackend, NamespaceScope
from autoscaler.policy import TargetRef
from tests.fake_kube.apiserver import ANSWER_TIMEOUT, FakeApiServer
from tests.fake_kube.resources import LEADER_WORKER_SET, pod_json
from tests.unit.autoscaler.controller.fakes import FakeMetrics

pytestmark = pytest.mark.integration

LWS = TargetRef("LeaderWorkerSet", "ml", "llm", "leaderworkerset.x-k8s.io/v1")
T1, T2 = "2026-03-01T10:00:00Z", "2026-03-01T10:00:30.5+01:00"
UNIX_T1, UNIX_T2 = 1772359200.0, 1772355630.5
PODS_PATH = "^/api/v1/namespaces/ml/pods$"


def backend(api: FakeApiServer) -> KubernetesScaleBackend:
    return KubernetesScaleBackend(api.api_client(), request_timeout=ANSWER_TIMEOUT)


def pod_lists(api: FakeApiServer) -> list[dict[str, str]]:
    with api.lock:
        return [r.query for r in api.requests if r.method == "GET" and r.path.endswith("/pods")]


def test_the_pending_unschedulable_pods_of_the_target_and_since_when(apiserver: FakeApiServer) -> None:
    llm = {"app": "llm", "role": "worker"}
    apiserver.add_pod("llm-0", llm, unschedulable_since=T1)
    apiserver.add_pod("llm-1", llm, unschedulable_since=T2)
    apiserver.add_pod("llm-2", llm)  # Pending but scheduled: pulling its image
    apiserver.add_pod("llm-3", llm, phase="Running")
    apiserver.add_pod("other-0", {"app": "other"}, unschedulable_since=T1)
    apiserver.add_pod("llm-x", llm, namespace="research", unschedulable_since=T1)
    since = backend(apiserver).unschedulable_since(LWS, "app=llm,role in (worker)")
    assert sorted(since) == sorted([UNIX_T1, UNIX_T2])
    assert pod_lists(apiserver) == [{"labelSelector": "app=llm,role in (worker)",
                                     "fieldSelector": "status.phase=Pending", "limit": "500"}]


def test_no_selector_lists_nothing(apiserver: FakeApiServer) -> None:
    apiserver.add_pod("llm-0", {"app": "llm"}, unschedulable_since=T1)
    assert backend(apiserver).unschedulable_since(LWS, None) == ()
    assert apiserver.requests == []


def test_pages_are_followed(apiserver: FakeApiServer) -> None:
    for i in range(1203):
        apiserver.add_pod(f"llm-{i:04}", {"app": "llm"}, unschedulable_since=T1)
    assert backend(apiserver).unschedulable_since(LWS, "app=llm") == (UNIX_T1,) * 1203
    lists = pod_lists(apiserver)
    assert len(lists) == 3 and "continue" not in lists[0] and lists[1]["continue"] != lists[2]["continue"]


def unschedulable(time_: object = T1, **changes: Any) -> dict[str, Any]:
    pod = pod_json("p", "ml", {"app": "llm"}, "Pending", T1)
    pod["status"]["conditions"][0]["lastTransitionTime"] = time_
    pod["status"] |= changes
    return pod


def test_a_malformed_pod_is_skipped_never_a_failure(apiserver: FakeApiServer) -> None:
    condition = unschedulable()["status"]["conditions"][0]
    items = [
        unschedulable(),
        "a pod",
        None,
        {"metadata": {}},
        {"status": "Pending"},
        unschedulable(phase="Running"),
        unschedulable(phase=["Pending"]),
        unschedulable(conditions="PodScheduled"),
        unschedulable(conditions=["PodScheduled", None, 3]),
        unschedulable(conditions=[condition | {"status": False}]),
        unschedulable(conditions=[condition | {"reason": "SchedulingGated"}]),
        unschedulable(None),
        unschedulable(1772359200),
        unschedulable("2026-03-01 10:00:00"),  # no T, no offset
        unschedulable("2026-03-01T10:00:00"),  # no offset: whose clock?
        unschedulable("2026-02-30T10:00:00Z"),
        unschedulable("2" * 10_000),
        unschedulable(T2),
    ]
    apiserver.answer("GET", PODS_PATH, {"kind": "PodList", "metadata": {}, "items": items})
    assert backend(apiserver).unschedulable_since(LWS, "app=llm") == (UNIX_T1, UNIX_T2)


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        (b"<html>", "not valid JSON"),
        ({"kind": "Pod", "metadata": {}}, r'expected kind PodList \(got "Pod"\)'),
        ({"kind": "PodList", "metadata": {}, "items": {"p": {}}}, r"items is not a list \(got an object\)"),
        ({"kind": "PodList", "items": []}, "without a metadata object"),
        ({"kind": "PodList", "metadata": {"continue": 7}, "items": []}, r"continue is not a token \(got 7\)"),
        ([], r"expected a PodList object \(got a list\)"),
    ],
    ids=["html", "kind", "items-object", "no-metadata", "continue-int", "list"],
)
def test_a_malformed_list_is_a_failed_read(apiserver: FakeApiServer, body: object, expected: str) -> None:
    apiserver.answer("GET", PODS_PATH, body)
    with pytest.raises(MalformedAnswerError, match=expected) as info:
        backend(apiserver).unschedulable_since(LWS, "app=llm")
    assert str(info.value).startswith("list Pending pods of LeaderWorkerSet ml/llm")


def test_a_server_repeating_its_continue_token_is_bounded(
    apiserver: FakeApiServer, caplog: pytest.LogCaptureFixture
) -> None:
    page = {"kind": "PodList", "metadata": {"continue": "again"}, "items": [unschedulable()]}
    apiserver.answer("GET", PODS_PATH, page)
    with caplog.at_level(logging.WARNING, logger="autoscaler.kube.scale"):
        since = backend(apiserver).unschedulable_since(LWS, "app=llm")
    assert since == (UNIX_T1,) * MAX_POD_PAGES and len(pod_lists(apiserver)) == MAX_POD_PAGES
    assert "more than 20 pages" in caplog.text


def test_a_refused_list_is_our_error(apiserver: FakeApiServer) -> None:
    apiserver.fail("GET", PODS_PATH, 403)
    with pytest.raises(KubeApiError, match="HTTP 403") as info:
        backend(apiserver).unschedulable_since(LWS, "app=llm")
    assert type(info.value.__cause__).__module__.startswith("kubernetes")


def test_outside_the_namespaces_nothing_is_listed(apiserver: FakeApiServer) -> None:
    scoped = NamespaceScope(backend(apiserver), {"research"})
    with pytest.raises(NamespaceNotAllowedError, match="not in --namespaces"):
        scoped.unschedulable_since(LWS, "app=llm")
    assert apiserver.requests == []


def test_the_controller_holds_a_scale_up_while_replicas_are_pending(apiserver: FakeApiServer) -> None:
    """End to end: the LeaderWorkerSet's selector lists its pods; two stuck for long hold the scale-up."""
    apiserver.install(LEADER_WORKER_SET)
    apiserver.add("llm", 2, kind="leaderworkersets")
    apiserver.add_pod("llm-0", {"app": "llm"}, unschedulable_since=T1)
    apiserver.add_pod("llm-1", {"app": "llm"}, unschedulable_since=T1)
    rules = parse_rules(
        "rules:\n  - name: llm\n"
        "    target: {apiVersion: leaderworkerset.x-k8s.io/v1, kind: LeaderWorkerSet, namespace: ml,"
        " name: llm}\n"
        "    maxReplicas: 20\n"
        "    metrics: [{name: load, query: 'sum(load)', type: Total, target: 10}]\n"
        "    capacity: {query: 'sum(free_gpus)', gpusPerReplica: 1}\n",
        "rules.yaml",
    )
    controller = Controller(backend(apiserver), FakeMetrics({"sum(load)": 60.0, "sum(free_gpus)": 100.0}),
                            rules, time.time, settings=ControllerSettings())
    try:
        (outcome,) = controller.sync_once().outcomes
    finally:
        controller.close()
    assert outcome.reason == "CapacityLimited" and outcome.desired == 2
    assert apiserver.patches("llm") == []
    assert pod_lists(apiserver)[0]["labelSelector"] == "app=llm"
