"""Malformed answers from the API server are a failed read of that target, never a number, never a patch.

The fake API server serves each malformed Scale or workload on the real paths with a 200, as a broken
aggregated API, a proxy or a buggy server would; the backend reads through the official client.
"""

from __future__ import annotations

import copy
import time
from typing import Any

import pytest
from kubernetes import client

from autoscaler.config.rules import parse_rules
from autoscaler.controller.loop import Controller, ControllerSettings
from autoscaler.errors import MalformedAnswerError
from autoscaler.kube.scale import KubernetesScaleBackend, ScaleState
from autoscaler.policy import TargetRef
from tests.fake_kube.apiserver import ANSWER_TIMEOUT, FakeApiServer, scale_json, workload_json
from tests.unit.autoscaler.controller.fakes import FakeMetrics

pytestmark = pytest.mark.integration

DEPLOY = TargetRef("Deployment", "ml", "embed")
SCALE_PATH = "/deployments/embed/scale$"
WORKLOAD_PATH = "/deployments/embed$"


def backend(api: FakeApiServer) -> KubernetesScaleBackend:
    return KubernetesScaleBackend(api.api_client(), request_timeout=ANSWER_TIMEOUT)


def changed(body: dict[str, Any], path: str, value: object) -> dict[str, Any]:
    """A copy of `body` with the dotted `path` set to `value` (or removed when value is ...)."""
    body = copy.deepcopy(body)
    *parents, last = path.split(".")
    node = body
    for part in parents:
        node = node[part]
    if value is ...:
        del node[last]
    else:
        node[last] = value
    return body


@pytest.mark.parametrize(
    ("path", "value", "expected"),
    [
        ("spec.replicas", "5", r'spec\.replicas is not a replica count .*got "5"'),
        ("spec.replicas", 3.7, r"spec\.replicas .*got 3\.7"),
        ("spec.replicas", 3.0, r"spec\.replicas .*got 3\.0"),
        ("spec.replicas", True, r"spec\.replicas .*got true"),
        ("spec.replicas", -1, r"spec\.replicas .*got -1"),
        ("spec.replicas", 2**31, r"spec\.replicas .*got 2147483648"),
        ("spec.replicas", None, r"spec\.replicas .*got null"),
        ("spec.replicas", {"value": 3}, r"spec\.replicas .*got an object"),
        ("status.replicas", ..., r"without status\.replicas"),
        ("status.replicas", "3", r"status\.replicas .*got \"3\""),
        ("status", ..., r"without a status object"),
        ("spec", [], r"without a spec object \(got a list\)"),
        ("kind", "Status", r'expected kind Scale \(got "Status"\)'),
        ("metadata", None, r"Scale without a metadata object"),
        ("metadata.resourceVersion", 7, r"resourceVersion is not a version \(got 7\)"),
        ("metadata.resourceVersion", ..., r"resourceVersion is not a version \(got null\)"),
    ],
    ids=lambda v: v if isinstance(v, str) and not v.startswith(("spec.replicas ", "(")) else None,
)
def test_malformed_scale_is_a_failed_read(
    apiserver: FakeApiServer, path: str, value: object, expected: str
) -> None:
    w = apiserver.add("embed", 3)
    apiserver.answer("GET", SCALE_PATH, changed(scale_json(w), path, value))
    with pytest.raises(MalformedAnswerError, match=expected) as info:
        backend(apiserver).read_scale(DEPLOY)
    assert "get Deployment ml/embed scale" in str(info.value)


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        (b"<html>502 Bad Gateway</html>", "not valid JSON"),
        (b'{"kind": "Scale", "spec": {"replicas": 3', "not valid JSON"),
        (b'{"kind":"Scale","metadata":{"resourceVersion":"1"},"spec":{"replicas":NaN},"status":{"replicas":1}}',
         "not valid JSON"),
        (b'{"kind":"Scale","metadata":{"resourceVersion":"1"},"spec":{"replicas":1e400},"status":{"replicas":1}}',
         r"spec\.replicas .*got Infinity"),
        (b'{"kind":"Scale","metadata":{"resourceVersion":"1"},"spec":{"replicas":' + b"9" * 5000
         + b'},"status":{"replicas":1}}', "not valid JSON"),
        (b"[1, 2, 3]", r"expected a Scale object \(got a list\)"),
        (b'"3"', r"expected a Scale object \(got a string\)"),
        (b"", "not valid JSON"),
    ],
    ids=["html", "truncated", "nan", "1e400", "5000-digits", "list", "string", "empty"],
)
def test_unparseable_scale_is_a_failed_read(apiserver: FakeApiServer, raw: bytes, expected: str) -> None:
    apiserver.add("embed", 3)
    apiserver.answer("GET", SCALE_PATH, raw)
    with pytest.raises(MalformedAnswerError, match=expected) as info:
        backend(apiserver).read_scale(DEPLOY)
    assert len(str(info.value)) < 400  # a 5000-digit number is not copied into logs and Events


def test_zero_replicas_omitted_by_the_api_is_zero(apiserver: FakeApiServer) -> None:
    """autoscaling/v1 ScaleSpec.replicas is `omitempty`: the API server leaves it out when it is 0."""
    w = apiserver.add("embed", 0)
    apiserver.answer("GET", SCALE_PATH, changed(scale_json(w), "spec.replicas", ...))
    assert backend(apiserver).read_scale(DEPLOY) == ScaleState(
        spec_replicas=0, status_replicas=0, annotations={}, resource_version="1", selector="app=embed"
    )


@pytest.mark.parametrize(
    ("path", "value", "expected"),
    [
        ("metadata.annotations", ["gpu-autoscaler.io/paused"], r"not a mapping \(got a list\)"),
        ("metadata.annotations", {"gpu-autoscaler.io/paused": 3}, r"not a string \(got an integer\)"),
        ("kind", "StatefulSet", r'expected kind Deployment \(got "StatefulSet"\)'),
    ],
    ids=["annotations-list", "annotation-int", "wrong-kind"],
)
def test_malformed_workload_is_a_failed_read(
    apiserver: FakeApiServer, path: str, value: object, expected: str
) -> None:
    w = apiserver.add("embed", 3)
    apiserver.answer("GET", WORKLOAD_PATH, changed(workload_json(w), path, value))
    with pytest.raises(MalformedAnswerError, match=expected):
        backend(apiserver).read_scale(DEPLOY)


def test_the_official_clients_models_would_have_read_a_number(apiserver: FakeApiServer) -> None:
    """Why the backend reads raw JSON: the client's model takes -1, 2**31 and null (which `or 0` made 0) as
    replicas, and refuses a string with the validation library's multi-line text instead of ours."""
    w = apiserver.add("embed", 3)
    apps = client.AppsV1Api(apiserver.api_client())
    for value in (-1, 2**31, None):
        apiserver.answer("GET", SCALE_PATH, changed(scale_json(w), "spec.replicas", value), times=1)
        assert apps.read_namespaced_deployment_scale("embed", "ml").spec.replicas == value
    apiserver.answer("GET", SCALE_PATH, changed(scale_json(w), "spec.replicas", "5"), times=1)
    with pytest.raises(ValueError, match=r"(?s)validation error.*replicas"):
        apps.read_namespaced_deployment_scale("embed", "ml")


def test_a_malformed_target_fails_its_rule_only(apiserver: FakeApiServer) -> None:
    """In one sync: the malformed target is FailedGetScale (not patched), the other rule scales as usual."""
    broken = apiserver.add("embed", 3)
    apiserver.add("other", 2)
    apiserver.answer("GET", SCALE_PATH, changed(scale_json(broken), "spec.replicas", "300"))
    rules = parse_rules(
        "rules:\n"
        + "".join(
            f"  - name: {name}\n    target: {{kind: Deployment, namespace: ml, name: {name}}}\n"
            "    maxReplicas: 20\n"
            "    metrics: [{name: load, query: 'sum(load)', type: Total, target: 10}]\n"
            for name in ("embed", "other")
        ),
        "rules.yaml",
    )
    controller = Controller(
        backend(apiserver), FakeMetrics({"sum(load)": 60.0}), rules, time.time, settings=ControllerSettings()
    )
    try:
        by_rule = {o.rule.name: o for o in controller.sync_once().outcomes}
    finally:
        controller.close()
    assert by_rule["embed"].reason == "FailedGetScale" and by_rule["embed"].current is None
    assert "spec.replicas is not a replica count" in by_rule["embed"].message
    assert (by_rule["other"].current, by_rule["other"].desired, by_rule["other"].ok) == (2, 6, True)
    assert apiserver.patches("embed") == [] and apiserver.patches("other") == [6]
    assert apiserver.event_reasons("embed") == ["FailedGetScale"]
    errors = [line for line in controller.metrics.exposition().decode().splitlines()
              if line.startswith("gpu_autoscaler_scale_errors_total{") and 'rule="embed"' in line]
    assert len(errors) == 1 and 'reason="MalformedAnswer"' in errors[0] and errors[0].endswith(" 1.0")
