"""KubernetesScaleBackend through the official client against the fake API server."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from kubernetes import client

from autoscaler.errors import ConflictError, KubeApiError, KubeConfigError, KubeTimeoutError, NotFoundError
from autoscaler.kube import KubernetesScaleBackend, ScaleState, load_api_client
from autoscaler.rules import TargetRef
from demo.processes import free_port
from tests.integration.controller.fake_apiserver import FakeApiServer

pytestmark = pytest.mark.integration

DEPLOY = TargetRef("Deployment", "ml", "embed")
STS = TargetRef("StatefulSet", "ml", "vector-db")


def backend(api: FakeApiServer, timeout: float = 2.0) -> KubernetesScaleBackend:
    return KubernetesScaleBackend(api.api_client(), request_timeout=timeout)


def test_read_deployment_and_statefulset_scale_with_annotations(apiserver: FakeApiServer) -> None:
    apiserver.add("embed", 3, **{"gpu-autoscaler.io/paused": "true"})
    apiserver.add("vector-db", 2, kind="statefulsets")
    b = backend(apiserver)
    assert b.read_scale(DEPLOY) == ScaleState(3, 3, {"gpu-autoscaler.io/paused": "true"}, "1")
    assert b.read_scale(STS) == ScaleState(2, 2, {}, "1")
    paths = [(r.method, r.path) for r in apiserver.requests]
    assert ("GET", "/apis/apps/v1/namespaces/ml/deployments/embed/scale") in paths
    assert ("GET", "/apis/apps/v1/namespaces/ml/deployments/embed") in paths
    assert ("GET", "/apis/apps/v1/namespaces/ml/statefulsets/vector-db/scale") in paths


def test_patch_is_a_merge_patch_carrying_the_read_version(apiserver: FakeApiServer) -> None:
    apiserver.add("embed", 3)
    b = backend(apiserver)
    b.read_scale(DEPLOY)
    b.patch_scale(DEPLOY, 5)
    patch = next(r for r in apiserver.requests if r.method == "PATCH")
    assert patch.content_type == "application/merge-patch+json"
    assert patch.body["spec"] == {"replicas": 5} and patch.body["metadata"] == {"resourceVersion": "1"}
    assert apiserver.replicas("embed") == 5


def test_concurrent_change_is_a_conflict(apiserver: FakeApiServer) -> None:
    w = apiserver.add("embed", 3)
    b = backend(apiserver)
    b.read_scale(DEPLOY)
    w.version += 1  # someone else wrote in between
    with pytest.raises(ConflictError) as info:
        b.patch_scale(DEPLOY, 5)
    assert info.value.status == 409 and "has been modified" in str(info.value)
    assert info.value.__cause__ is not None and apiserver.replicas("embed") == 3


def test_not_found(apiserver: FakeApiServer) -> None:
    with pytest.raises(NotFoundError, match=r'deployments\.apps "embed" not found'):
        backend(apiserver).read_scale(DEPLOY)


@pytest.mark.parametrize(
    ("status", "error"), [(500, KubeApiError), (403, KubeApiError), (504, KubeTimeoutError)]
)
def test_server_errors_are_ours_and_chained(
    apiserver: FakeApiServer, status: int, error: type[Exception]
) -> None:
    apiserver.add("embed", 3)
    apiserver.fail("GET", "/scale$", status)
    with pytest.raises(error) as info:
        backend(apiserver).read_scale(DEPLOY)
    assert type(info.value.__cause__).__module__.startswith("kubernetes")
    assert f"HTTP {status}" in str(info.value)


def test_slow_server_is_a_timeout(apiserver: FakeApiServer) -> None:
    apiserver.add("embed", 3)
    apiserver.delay("GET", "/scale$", 1.0, times=1)
    with pytest.raises(KubeTimeoutError):
        backend(apiserver, timeout=0.2).read_scale(DEPLOY)


def test_unreachable_server_is_an_api_error() -> None:
    configuration = client.Configuration(host=f"http://127.0.0.1:{free_port()}")  # nothing listens there
    configuration.retries = 0
    with client.ApiClient(configuration) as api_client, pytest.raises(KubeApiError, match="get Deployment"):
        KubernetesScaleBackend(api_client, request_timeout=1).read_scale(DEPLOY)


def test_event_shape(apiserver: FakeApiServer) -> None:
    apiserver.add("embed", 3)
    backend(apiserver).emit_event(DEPLOY, "Normal", "ScaledUp", "New size: 5 (was 3)")
    event = apiserver.events[0]
    assert event["involvedObject"] == {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "name": "embed",
        "namespace": "ml",
    }
    assert (event["type"], event["reason"], event["message"]) == ("Normal", "ScaledUp", "New size: 5 (was 3)")
    assert event["source"] == {"component": "gpu-autoscaler"} and event["count"] == 1
    assert event["metadata"]["name"].startswith("embed.") and json.dumps(event["firstTimestamp"])


def test_statefulset_patch_goes_to_its_scale_subresource(apiserver: FakeApiServer) -> None:
    apiserver.add("vector-db", 2, kind="statefulsets")
    b = backend(apiserver)
    b.read_scale(STS)
    b.patch_scale(STS, 3)
    assert apiserver.replicas("vector-db", kind="statefulsets") == 3
    patch = next(r for r in apiserver.requests if r.method == "PATCH")
    assert patch.path == "/apis/apps/v1/namespaces/ml/statefulsets/vector-db/scale"


def test_patch_without_a_prior_read_sends_no_version(apiserver: FakeApiServer) -> None:
    apiserver.add("embed", 3)
    backend(apiserver).patch_scale(DEPLOY, 4)
    patch = next(r for r in apiserver.requests if r.method == "PATCH")
    assert "metadata" not in patch.body and apiserver.replicas("embed") == 4


def test_kubeconfig_loading(apiserver: FakeApiServer, tmp_path: Path) -> None:
    path = tmp_path / "kubeconfig"
    path.write_text(apiserver.kubeconfig())
    apiserver.add("embed", 3)
    with load_api_client(str(path)) as api_client:
        assert KubernetesScaleBackend(api_client).read_scale(DEPLOY).spec_replicas == 3
    (tmp_path / "bad").write_text("not: [a kubeconfig")
    with pytest.raises(KubeConfigError, match=r"cannot load Kubernetes configuration from .*bad"):
        load_api_client(str(tmp_path / "bad"))
