"""Any kind with a scale subresource is a target, its resource found through API discovery.

The official client talks to the fake API server, which serves discovery documents (/api, /apis,
/apis/{group}/{version}) and kinds installed by each test: custom resources with /scale (InferenceService,
an Argo Rollout, a LeaderWorkerSet), a custom kind without one, and the built-in ones.
"""

from __future__ import annotations

import re
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from autoscaler.config.rules import RuleSet
from autoscaler.controller.loop import Controller, ControllerSettings
from autoscaler.errors import (
    ConflictError,
    KindNotFoundError,
    MalformedAnswerError,
    NotFoundError,
    NotScalableError,
)
from autoscaler.kube.scale import KubernetesScaleBackend, ScaleState
from autoscaler.policy import TargetRef
from tests.clock import ManualClock
from tests.fake_kube.apiserver import ANSWER_TIMEOUT, FakeApiServer, Workload
from tests.fake_kube.resources import (
    INFERENCE_SERVICE,
    LEADER_WORKER_SET,
    MODEL_CACHE,
    ROLLOUT,
    Resource,
    resource_list,
)
from tests.rules import rule, ruleset
from tests.unit.autoscaler.controller.fakes import FakeMetrics
from tests.unit.shipping.kustomize import render
from tests.unit.shipping.promql_names import ROOT
from tests.unit.shipping.test_rbac import bound_roles, granted

pytestmark = pytest.mark.integration

LLM = TargetRef("InferenceService", "ml", "llm", "example.com/v1")
PAUSED = {"gpu-autoscaler.io/paused-replicas": "4"}


def backend(api: FakeApiServer, clock: ManualClock | None = None) -> KubernetesScaleBackend:
    return KubernetesScaleBackend(
        api.api_client(), request_timeout=ANSWER_TIMEOUT, monotonic=clock or ManualClock(1000.0)
    )


def paths(api: FakeApiServer, method: str = "GET") -> list[str]:
    with api.lock:
        return [r.path for r in api.requests if r.method == method]


def test_a_custom_resource_is_read_through_discovery_with_its_annotations(apiserver: FakeApiServer) -> None:
    apiserver.install(INFERENCE_SERVICE)
    apiserver.add("llm", 2, kind="inferenceservices", **PAUSED)
    assert backend(apiserver).read_scale(LLM) == ScaleState(
        spec_replicas=2, status_replicas=2, annotations=PAUSED, resource_version="1", selector="app=llm"
    )
    assert paths(apiserver) == [
        "/apis/example.com/v1",
        "/apis/example.com/v1/namespaces/ml/inferenceservices/llm/scale",
        "/apis/example.com/v1/namespaces/ml/inferenceservices/llm",
    ]


def test_a_custom_resource_is_patched_by_a_merge_patch_with_its_version(apiserver: FakeApiServer) -> None:
    apiserver.install(INFERENCE_SERVICE)
    apiserver.add("llm", 2, kind="inferenceservices")
    b = backend(apiserver)
    b.read_scale(LLM)
    b.patch_scale(LLM, 5)
    with apiserver.lock:
        (patch,) = [r for r in apiserver.requests if r.method == "PATCH"]
    assert patch.path == "/apis/example.com/v1/namespaces/ml/inferenceservices/llm/scale"
    assert patch.content_type == "application/merge-patch+json"
    assert patch.body["spec"] == {"replicas": 5} and patch.body["metadata"] == {"resourceVersion": "1"}
    assert patch.query == {"fieldManager": "gpu-autoscaler"}
    assert apiserver.replicas("llm", kind="inferenceservices") == 5
    assert b.read_scale(LLM).resource_version == "2"


def test_a_concurrent_change_of_a_custom_resource_is_a_conflict(apiserver: FakeApiServer) -> None:
    apiserver.install(INFERENCE_SERVICE)
    w = apiserver.add("llm", 2, kind="inferenceservices")
    b = backend(apiserver)
    b.read_scale(LLM)
    w.version += 1  # someone else wrote in between
    modified = r'inferenceservices\.example\.com "llm": the object has been modified'
    with pytest.raises(ConflictError, match=modified):
        b.patch_scale(LLM, 5)
    assert apiserver.replicas("llm", kind="inferenceservices") == 2


@pytest.mark.parametrize(
    ("resource", "target", "path"),
    [
        (ROLLOUT, TargetRef("Rollout", "ml", "w", "argoproj.io/v1alpha1"),
         "/apis/argoproj.io/v1alpha1/namespaces/ml/rollouts/w"),
        (LEADER_WORKER_SET, TargetRef("LeaderWorkerSet", "ml", "w", "leaderworkerset.x-k8s.io/v1"),
         "/apis/leaderworkerset.x-k8s.io/v1/namespaces/ml/leaderworkersets/w"),
        (None, TargetRef("ReplicaSet", "ml", "w"), "/apis/apps/v1/namespaces/ml/replicasets/w"),
        (None, TargetRef("ReplicationController", "ml", "w", "v1"),
         "/api/v1/namespaces/ml/replicationcontrollers/w"),
    ],
    ids=["rollout", "leaderworkerset", "replicaset", "core-v1"],
)
def test_every_kind_with_a_scale_is_read_and_patched(
    apiserver: FakeApiServer, resource: Resource | None, target: TargetRef, path: str
) -> None:
    if resource is not None:
        apiserver.install(resource)
    plural = path.rsplit("/", 2)[1]
    apiserver.add("w", 3, kind=plural)
    b = backend(apiserver)
    assert b.read_scale(target) == ScaleState(
        spec_replicas=3, status_replicas=3, annotations={}, resource_version="1", selector="app=w"
    )
    b.patch_scale(target, 4)
    assert apiserver.replicas("w", kind=plural) == 4
    assert paths(apiserver, "PATCH") == [path + "/scale"]
    assert paths(apiserver)[0] == path.split("/namespaces/")[0]  # its discovery document


@pytest.mark.parametrize(
    ("installed", "target", "error", "message"),
    [
        ((), TargetRef("Rollout", "ml", "w", "argoproj.io/v1alpha1"), KindNotFoundError,
         r"the API server does not serve apiVersion argoproj\.io/v1alpha1 \(is the CRD of "
         r"Rollout installed, and does it serve v1alpha1\?\)"),
        ((INFERENCE_SERVICE,), TargetRef("Predictor", "ml", "w", "example.com/v1"), KindNotFoundError,
         r"the API has no kind Predictor in example\.com/v1 \(is the CRD installed\?\)"),
        ((INFERENCE_SERVICE,), TargetRef("InferenceService", "ml", "w", "example.com/v2"), KindNotFoundError,
         r"does not serve apiVersion example\.com/v2"),
        ((MODEL_CACHE,), TargetRef("ModelCache", "ml", "w", "example.com/v1"), NotScalableError,
         r"kind ModelCache \(modelcaches\.example\.com\) has no scale subresource"),
        ((), TargetRef("DaemonSet", "ml", "w"), NotScalableError,
         r"kind DaemonSet \(daemonsets\.apps\) has no scale subresource"),
        ((Resource("example.com/v1", "pools", "Pool", namespaced=False),),
         TargetRef("Pool", "ml", "w", "example.com/v1"),
         NotScalableError, r"kind Pool \(pools\.example\.com\) is cluster-scoped"),
        ((Resource("example.com/v1", "pools", "Pool", scale_verbs=("get",)),),
         TargetRef("Pool", "ml", "w", "example.com/v1"), NotScalableError,
         r"the scale subresource of kind Pool \(pools\.example\.com\) does not allow get and patch "
         r"\(verbs: get\)"),
    ],
    ids=["crd-not-installed", "unknown-kind", "version-not-served", "no-scale", "daemonset", "cluster-scoped",
         "scale-without-patch"],
)
def test_a_kind_that_cannot_be_scaled_is_one_clear_error(
    apiserver: FakeApiServer, installed: tuple[Resource, ...], target: TargetRef, error: type[Exception],
    message: str,
) -> None:
    apiserver.install(*installed)
    b = backend(apiserver)
    with pytest.raises(error, match=message) as read:
        b.read_scale(target)
    with pytest.raises(error, match=message) as patch:
        b.patch_scale(target, 2)
    assert str(read.value).startswith(f"get {target.kind} ml/w: ")  # one message naming the target
    assert str(patch.value).startswith(f"patch {target.kind} ml/w scale to 2: ")
    assert not [p for p in [*paths(apiserver), *paths(apiserver, "PATCH")] if "/namespaces/" in p]  # no guess


def test_discovery_is_asked_once_per_api_version(apiserver: FakeApiServer) -> None:
    apiserver.install(INFERENCE_SERVICE, ROLLOUT)
    names = [f"s{i}" for i in range(6)]
    for name in names:
        apiserver.add(name, 1, kind="inferenceservices")
    apiserver.add("r", 1, kind="rollouts")
    b = backend(apiserver)
    targets = [TargetRef("InferenceService", "ml", n, "example.com/v1") for n in names]
    with ThreadPoolExecutor(16) as pool:  # as the controller reads: concurrently
        for _ in range(3):
            list(pool.map(b.read_scale, [*targets, TargetRef("Rollout", "ml", "r", "argoproj.io/v1alpha1")]))
    b.patch_scale(targets[0], 2)
    assert sorted(apiserver.discovery_requests()) == ["/apis/argoproj.io/v1alpha1", "/apis/example.com/v1"]


def test_a_crd_installed_later_is_found_after_the_refresh_period(apiserver: FakeApiServer) -> None:
    clock = ManualClock(1000.0)
    b = backend(apiserver, clock)
    for _ in range(3):  # a rule syncing every interval: one discovery request per period, not per sync
        with pytest.raises(KindNotFoundError):
            b.read_scale(LLM)
    apiserver.install(INFERENCE_SERVICE)
    apiserver.add("llm", 2, kind="inferenceservices")
    clock.now += b.discovery.refresh_after - 1
    with pytest.raises(KindNotFoundError):
        b.read_scale(LLM)
    assert apiserver.discovery_requests() == ["/apis/example.com/v1"]
    clock.now += 1
    assert b.read_scale(LLM).spec_replicas == 2
    assert apiserver.discovery_requests() == ["/apis/example.com/v1"] * 2


def test_a_404_of_the_scale_refreshes_discovery_at_most_once_per_period(apiserver: FakeApiServer) -> None:
    clock = ManualClock(1000.0)
    apiserver.install(INFERENCE_SERVICE)
    b = backend(apiserver, clock)
    for _ in range(3):  # the object does not exist (yet): a 404 each time, discovery asked once
        with pytest.raises(NotFoundError, match=r'inferenceservices\.example\.com "llm" not found'):
            b.read_scale(LLM)
    assert len(apiserver.discovery_requests()) == 1
    clock.now += b.discovery.refresh_after
    with pytest.raises(NotFoundError, match="not found"):
        b.read_scale(LLM)
    assert len(apiserver.discovery_requests()) == 2  # asked again, same answer: the 404 stands


def test_a_crd_reinstalled_under_another_plural_is_followed(apiserver: FakeApiServer) -> None:
    clock = ManualClock(1000.0)
    apiserver.install(INFERENCE_SERVICE)
    apiserver.add("llm", 2, kind="inferenceservices")
    b = backend(apiserver, clock)
    assert b.read_scale(LLM).spec_replicas == 2
    apiserver.uninstall(INFERENCE_SERVICE)
    apiserver.install(Resource("example.com/v1", "isvcs", "InferenceService"))
    apiserver.add("llm", 3, kind="isvcs")
    clock.now += b.discovery.refresh_after
    assert b.read_scale(LLM).spec_replicas == 3  # the 404 on the old plural, discovery, the new plural
    b.patch_scale(LLM, 4)
    assert apiserver.replicas("llm", kind="isvcs") == 4
    apiserver.uninstall(Resource("example.com/v1", "isvcs", "InferenceService"))
    clock.now += b.discovery.refresh_after
    with pytest.raises(KindNotFoundError, match="is the CRD"):  # the CRD deleted: said so, not a bare 404
        b.read_scale(LLM)


def _entries(*changes: dict[str, object]) -> dict[str, object]:
    body = resource_list("example.com/v1", [INFERENCE_SERVICE])
    assert body is not None
    for change in changes:
        body = body | change
    return body


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        (b"<html>502 Bad Gateway</html>", "not valid JSON"),
        (_entries({"kind": "Status"}), r'expected kind APIResourceList \(got "Status"\)'),
        (_entries({"groupVersion": "apps/v1"}), "the APIResourceList is for 'apps/v1'"),
        (_entries({"resources": {"inferenceservices": {}}}), "resources is not a list"),
        (_entries({"resources": [{"name": "../../secrets", "kind": "InferenceService", "namespaced": True,
                                  "verbs": ["get"]}]}), "is not a resource name"),
        (_entries({"resources": [{"name": "inferenceservices", "kind": "InferenceService",
                                  "namespaced": "yes", "verbs": ["get"]}]}), "boolean namespaced"),
        (_entries({"resources": [{"name": "inferenceservices", "kind": "InferenceService", "namespaced": True,
                                  "verbs": "get"}]}), "not a list of strings"),
        (_entries({"resources": ["inferenceservices"]}), "entry is not an object"),
    ],
    ids=["html", "kind", "group-version", "resources-object", "path-in-name", "namespaced-string",
         "verbs-string", "entry-string"],
)
def test_a_malformed_discovery_document_fails_the_read_and_is_not_cached(
    apiserver: FakeApiServer, body: object, expected: str
) -> None:
    apiserver.install(INFERENCE_SERVICE)
    apiserver.add("llm", 2, kind="inferenceservices")
    apiserver.answer("GET", r"^/apis/example\.com/v1$", body, times=1)
    b = backend(apiserver)
    with pytest.raises(MalformedAnswerError, match=expected) as info:
        b.read_scale(LLM)
    assert str(info.value).startswith("get InferenceService ml/llm: discovery GET /apis/example.com/v1")
    assert b.read_scale(LLM).spec_replicas == 2  # the next read asks again


@pytest.mark.parametrize(("selector", "expected"), [("", None), (7, None), ("a" * 5000, None), ("x\ny", None),
                                                    ("app in (llm),tier!=cpu", "app in (llm),tier!=cpu")])
def test_the_scale_selector_is_a_short_string_or_none(
    apiserver: FakeApiServer, selector: object, expected: str | None
) -> None:
    """A CRD without labelSelectorPath serves "" (no selector); anything odd is no selector, not a failure."""
    apiserver.install(INFERENCE_SERVICE)
    w = apiserver.add("llm", 2, kind="inferenceservices")
    w.selector = selector  # type: ignore[assignment]
    assert backend(apiserver).read_scale(LLM).selector == expected


def test_events_name_the_targets_api_version(apiserver: FakeApiServer) -> None:
    b = backend(apiserver)
    b.emit_event(TargetRef("Rollout", "ml", "w", "argoproj.io/v1alpha1"), "Warning", "FailedGetScale", "no")
    b.emit_event(TargetRef("StatefulSet", "ml", "db"), "Normal", "ScaledUp", "New size: 2")
    assert [e["involvedObject"] for e in apiserver.events] == [
        {"apiVersion": "argoproj.io/v1alpha1", "kind": "Rollout", "name": "w", "namespace": "ml"},
        {"apiVersion": "apps/v1", "kind": "StatefulSet", "name": "db", "namespace": "ml"},
    ]


def rules_for(*workloads: str) -> RuleSet:
    """One rule per workload (r0, r1, ...), each scaled on sum(load) at 10 per replica."""
    return ruleset(*(rule(f"r{i}", max_replicas=20, workload=workload,
                          metrics="metrics: [{name: load, query: 'sum(load)', type: Total, target: 10}]")
                     for i, workload in enumerate(workloads)))


def test_the_controller_scales_a_crd_and_reports_an_uninstalled_one_on_its_rule_only(
    apiserver: FakeApiServer,
) -> None:
    apiserver.install(INFERENCE_SERVICE)
    apiserver.add("llm", 2, kind="inferenceservices")
    apiserver.add("web", 2)

    def kubectl_scale(w: Workload) -> None:  # a user scales llm to 3 between our read and our patch
        if w.name != "llm":
            apiserver.before_patch = kubectl_scale  # not this one: wait for llm's patch
            return
        w.replicas, w.version = 3, w.version + 1

    apiserver.before_patch = kubectl_scale
    rules = rules_for(
        "{apiVersion: example.com/v1, kind: InferenceService, namespace: ml, name: llm}",
        "{apiVersion: argoproj.io/v1alpha1, kind: Rollout, namespace: ml, name: gone}",
        "{kind: Deployment, namespace: ml, name: web}",
    )
    controller = Controller(backend(apiserver), FakeMetrics({"sum(load)": 60.0}), rules, time.time,
                            settings=ControllerSettings())
    try:
        by_rule = {o.rule.name: o for o in controller.sync_once().outcomes}
        errors = [line for line in controller.metrics.exposition().decode().splitlines()
                  if line.startswith("gpu_autoscaler_scale_errors_total{")]
    finally:
        controller.close()
    assert (by_rule["r0"].current, by_rule["r0"].desired, by_rule["r0"].ok) == (3, 6, True)  # after the 409
    assert apiserver.patches("llm") == [6] and apiserver.replicas("llm", kind="inferenceservices") == 6
    assert by_rule["r1"].reason == "FailedGetScale"
    assert "is the CRD of Rollout installed" in by_rule["r1"].message
    assert apiserver.patches("web") == [6]
    (failed,) = [e for e in apiserver.events if e["reason"] == "FailedGetScale"]
    assert failed["involvedObject"]["apiVersion"] == "argoproj.io/v1alpha1"
    assert "does not serve apiVersion argoproj.io/v1alpha1" in failed["message"]
    scaled = [e for e in apiserver.events if e["reason"] == "ScaledUp"]
    assert {e["involvedObject"]["apiVersion"] for e in scaled} == {"example.com/v1", "apps/v1"}
    (r1,) = [line for line in errors if 'rule="r1"' in line]
    assert 'reason="NotFound"' in r1 and r1.endswith(" 1.0")
    assert not [line for line in errors if 'rule="r1"' not in line and 'reason="Conflict"' not in line]


_RESOURCE_PATH = re.compile(r"^/(?:api/v1|apis/([^/]+)/[^/]+)/namespaces/[^/]+/([^/]+)"
                            r"(?:/([^/]+)(?:/([^/]+))?)?$")
_VERB = {"GET": "get", "PATCH": "patch", "POST": "create", "PUT": "update", "DELETE": "delete"}


def rbac_calls(api: FakeApiServer) -> set[tuple[str, str, str]]:
    """(group, resource, verb) of every resource request sent; discovery is a non-resource URL."""
    calls = set()
    with api.lock:
        requests = list(api.requests)
    for r in requests:
        if re.match(r"^/apis?(/[^/]+){0,2}$", r.path):  # /api, /apis, /api/v1, /apis/{group}/{version}
            continue
        m = _RESOURCE_PATH.match(r.path)
        assert m is not None, r.path
        group, plural, name, sub = m.groups()
        verb = "list" if r.method == "GET" and name is None else _VERB[r.method]
        calls.add((group or "", plural + (f"/{sub}" if sub else ""), verb))
    return calls


def test_the_base_rbac_grants_exactly_what_the_backend_sends_for_its_kinds(apiserver: FakeApiServer) -> None:
    """The unit test of the RBAC derives the client's calls from the code; the calls on a target's resource
    go to paths found by discovery, so here they are what the backend really sends, mapped to RBAC."""
    apiserver.add("web", 2)
    apiserver.add("db", 2, kind="statefulsets")
    apiserver.add_pod("web-a", {"app": "web"}, phase="Running")
    b = backend(apiserver)
    for target in (TargetRef("Deployment", "ml", "web"), TargetRef("StatefulSet", "ml", "db")):
        scale = b.read_scale(target)
        b.patch_scale(target, 3)
        b.emit_event(target, "Normal", "ScaledUp", "New size: 3")
        b.unschedulable_since(target, scale.selector)
    web = TargetRef("Deployment", "ml", "web")
    for pod in b.list_pods(web, "app=web"):  # podDeletionCost, before a Deployment's scale-down
        b.annotate_pod("ml", pod.name, {"controller.kubernetes.io/pod-deletion-cost": "1"})
    granted_by_base = {call for call in granted(bound_roles(render(ROOT / "manifests")))
                       if call[0] != "coordination.k8s.io"}  # leader election: leader.py, not a target
    assert rbac_calls(apiserver) == granted_by_base
