"""A target's pods listed and annotated through the official client against the fake API server: the
selector's pods not terminating, a merge patch that sets and removes annotations, 404 for a pod that is gone
and 409 for an outdated resourceVersion, as the API server answers."""

from __future__ import annotations

import pytest

from autoscaler.errors import ConflictError, NamespaceNotAllowedError, NotFoundError
from autoscaler.kube.backend import PodMeta
from autoscaler.kube.scale import KubernetesScaleBackend, NamespaceScope
from autoscaler.policy import TargetRef
from tests.fake_kube.apiserver import ANSWER_TIMEOUT, FakeApiServer

pytestmark = pytest.mark.integration

WEB = TargetRef("Deployment", "ml", "web")
COST = "controller.kubernetes.io/pod-deletion-cost"


def backend(api: FakeApiServer) -> KubernetesScaleBackend:
    return KubernetesScaleBackend(api.api_client(), request_timeout=ANSWER_TIMEOUT)


def test_the_pods_of_the_selector_that_are_not_terminating(apiserver: FakeApiServer) -> None:
    apiserver.add_pod("web-a", {"app": "web"}, phase="Running", annotations={"team": "ml"})
    apiserver.add_pod("web-b", {"app": "web"}, phase="Running")
    leaving = apiserver.add_pod("web-c", {"app": "web"}, phase="Running")
    leaving["metadata"]["deletionTimestamp"] = "2026-03-01T10:00:00Z"
    apiserver.add_pod("db-a", {"app": "db"}, phase="Running")
    apiserver.add_pod("web-x", {"app": "web"}, namespace="research", phase="Running")
    assert backend(apiserver).list_pods(WEB, "app=web") == (
        PodMeta("web-a", {"team": "ml"}), PodMeta("web-b", {}))


def test_a_merge_patch_sets_and_removes_annotations_and_keeps_the_others(apiserver: FakeApiServer) -> None:
    apiserver.add_pod("web-a", {"app": "web"}, phase="Running", annotations={"team": "ml", COST: "3"})
    kube = backend(apiserver)
    kube.annotate_pod("ml", "web-a", {COST: "9"})
    assert apiserver.pod_annotations("web-a") == {"team": "ml", COST: "9"}
    kube.annotate_pod("ml", "web-a", {COST: None})
    assert apiserver.pod_annotations("web-a") == {"team": "ml"}
    (request,) = [r for r in apiserver.requests if r.method == "PATCH"][-1:]
    assert request.content_type.startswith("application/merge-patch+json")
    assert request.query.get("fieldManager") == "gpu-autoscaler"


def test_a_pod_gone_is_not_found(apiserver: FakeApiServer) -> None:
    with pytest.raises(NotFoundError):
        backend(apiserver).annotate_pod("ml", "web-gone", {COST: "1"})


def test_the_fake_answers_an_outdated_resource_version_with_a_conflict(apiserver: FakeApiServer) -> None:
    """The backend sends no resourceVersion (a pod's status changes often; its annotations are ours to
    merge), but the fake answers one as the API server would, for tests that need a conflict."""
    apiserver.add_pod("web-a", {"app": "web"}, phase="Running")
    status, _ = apiserver.handle("PATCH", "/api/v1/namespaces/ml/pods/web-a",
                                 {"metadata": {"resourceVersion": "0", "annotations": {COST: "1"}}},
                                 "application/merge-patch+json")
    assert status == 409 and apiserver.pod_annotations("web-a") == {}
    apiserver.fail("PATCH", "/pods/web-a$", 409)
    with pytest.raises(ConflictError):
        backend(apiserver).annotate_pod("ml", "web-a", {COST: "1"})


def test_outside_the_namespaces_nothing_is_listed_nor_patched(apiserver: FakeApiServer) -> None:
    scoped = NamespaceScope(backend(apiserver), ["research"])
    with pytest.raises(NamespaceNotAllowedError):
        scoped.list_pods(WEB, "app=web")
    with pytest.raises(NamespaceNotAllowedError):
        scoped.annotate_pod("ml", "web-a", {COST: "1"})
    assert [r for r in apiserver.requests if "/pods" in r.path] == []
