"""KubernetesScaleBackend through the official client against the fake API server."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import requests
from kubernetes import client

from autoscaler.errors import ConflictError, KubeApiError, KubeConfigError, KubeTimeoutError, NotFoundError
from autoscaler.kube.scale import KubernetesScaleBackend, ScaleState, load_api_client
from autoscaler.policy import TargetRef
from demo.processes import free_port
from tests.fake_kube.apiserver import FakeApiServer

pytestmark = pytest.mark.integration

DEPLOY = TargetRef("Deployment", "ml", "embed")
STS = TargetRef("StatefulSet", "ml", "vector-db")


def backend(api: FakeApiServer, timeout: float = 2.0) -> KubernetesScaleBackend:
    return KubernetesScaleBackend(api.api_client(), request_timeout=timeout)


def test_read_deployment_and_statefulset_scale_with_annotations(apiserver: FakeApiServer) -> None:
    apiserver.add("embed", 3, **{"gpu-autoscaler.io/paused": "true"})
    apiserver.add("vector-db", 2, kind="statefulsets")
    b = backend(apiserver)
    assert b.read_scale(DEPLOY) == ScaleState(
        spec_replicas=3,
        status_replicas=3,
        annotations={"gpu-autoscaler.io/paused": "true"},
        resource_version="1",
        selector="app=embed",
    )
    assert b.read_scale(STS) == ScaleState(
        spec_replicas=2, status_replicas=2, annotations={}, resource_version="1", selector="app=vector-db"
    )
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


def test_scale_status_replicas_are_the_running_ones_not_the_spec(apiserver: FakeApiServer) -> None:
    w = apiserver.add("embed", 3)
    w.status_replicas = 2  # a rollout under way: 3 wanted, 2 running
    b = backend(apiserver)
    assert b.read_scale(DEPLOY) == ScaleState(
        spec_replicas=3, status_replicas=2, annotations={}, resource_version="1", selector="app=embed"
    )
    b.patch_scale(DEPLOY, 5)
    assert b.read_scale(DEPLOY) == ScaleState(
        spec_replicas=5, status_replicas=2, annotations={}, resource_version="2", selector="app=embed"
    )  # status moves when the pods do


def answer(e: client.ApiException) -> dict[str, str]:
    """The v1 Status the server sent with an error."""
    return dict(json.loads(e.body))


def test_created_event_gets_server_metadata_and_its_name_is_unique(apiserver: FakeApiServer) -> None:
    apiserver.add("embed", 3)
    backend(apiserver).emit_event(DEPLOY, "Warning", "FailedScale", "HTTP 500")
    (event,) = apiserver.events
    assert {"uid", "resourceVersion", "creationTimestamp"} <= set(event["metadata"])
    core = client.CoreV1Api(apiserver.api_client())
    body = {k: v for k, v in event.items() if k != "metadata"}
    body["metadata"] = {"name": event["metadata"]["name"], "namespace": "ml"}
    with pytest.raises(client.ApiException) as info:
        core.create_namespaced_event("ml", body)
    assert info.value.status == 409 and answer(info.value)["reason"] == "AlreadyExists"
    body["metadata"]["name"] = "another"
    with pytest.raises(client.ApiException) as info:
        core.create_namespaced_event("other", body)  # the body says namespace ml
    assert info.value.status == 400 and "does not match the namespace" in answer(info.value)["message"]
    assert len(apiserver.events) == 1


def lease_body(name: str = "lock", version: str | None = None) -> client.V1Lease:
    return client.V1Lease(
        metadata=client.V1ObjectMeta(name=name, namespace="gpu-autoscaler", resource_version=version),
        spec=client.V1LeaseSpec(holder_identity="a", lease_duration_seconds=15),
    )


def test_lease_create_update_semantics(apiserver: FakeApiServer) -> None:
    leases = client.CoordinationV1Api(apiserver.api_client())
    created = leases.create_namespaced_lease("gpu-autoscaler", lease_body())
    assert created.metadata.uid and created.metadata.resource_version
    with pytest.raises(client.ApiException) as info:
        leases.create_namespaced_lease("gpu-autoscaler", lease_body())
    assert info.value.status == 409 and answer(info.value)["reason"] == "AlreadyExists"
    with pytest.raises(client.ApiException) as info:  # leases allow no unconditional update
        leases.replace_namespaced_lease("lock", "gpu-autoscaler", lease_body())
    assert info.value.status == 422 and "must be specified for an update" in answer(info.value)["message"]
    with pytest.raises(client.ApiException) as info:
        leases.replace_namespaced_lease("lock", "gpu-autoscaler", lease_body(version="0"))
    assert info.value.status == 409 and answer(info.value)["reason"] == "Conflict"
    updated = leases.replace_namespaced_lease(
        "lock", "gpu-autoscaler", lease_body(version=created.metadata.resource_version)
    )
    assert updated.metadata.uid == created.metadata.uid
    assert updated.metadata.resource_version != created.metadata.resource_version
    made = leases.replace_namespaced_lease("fresh", "gpu-autoscaler", lease_body("fresh"))  # create on update
    assert made.metadata.name == "fresh" and apiserver.lease_holder(name="fresh") == "a"


@pytest.mark.parametrize(
    ("content_type", "status"),
    [("application/json", 415), ("text/plain", 415), ("application/json-patch+json", 501)],
)
def test_patch_content_types(apiserver: FakeApiServer, content_type: str, status: int) -> None:
    """Sent as raw HTTP: the official client refuses text/plain itself and turns a JSON patch whose body is
    not a list into a strategic merge patch."""
    apiserver.add("embed", 3)
    url = f"{apiserver.url}/apis/apps/v1/namespaces/ml/deployments/embed/scale"
    body = json.dumps({"spec": {"replicas": 4}})
    refused = requests.patch(url, data=body, headers={"Content-Type": content_type}, timeout=5)
    assert refused.status_code == status and apiserver.replicas("embed") == 3
    if status == 415:
        assert refused.json()["reason"] == "UnsupportedMediaType"
    ok = requests.patch(
        url, data=body, headers={"Content-Type": "application/strategic-merge-patch+json"}, timeout=5
    )
    assert ok.status_code == 200 and apiserver.replicas("embed") == 4
