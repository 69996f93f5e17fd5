"""charts/gpu-autoscaler, rendered and linted by Helm's own library: with default values it renders the
objects of `kubectl kustomize manifests/`, with each examples/ file those of the overlay of that name (so the
chart and kustomize cannot drift apart); every rendering validates strictly against the oldest and the newest
Kubernetes we support; values.schema.json refuses a mistyped or wrong value; the values reach the objects they
promise."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import helm_python as helm
import pytest
import yaml

from tests.unit.shipping.helm_chart import (
    CHART,
    NAMESPACE,
    NOTES,
    Object,
    chart,
    example,
    example_names,
    kind_names,
    lint,
    render,
    validate,
    without_helm_labels,
)
from tests.unit.shipping.kustomize import key
from tests.unit.shipping.kustomize import render as kustomize
from tests.unit.shipping.promql_names import ROOT
from tests.unit.shipping.scrape_jobs import shipped_jobs
from tests.unit.shipping.strict_validation import K8S_VERSIONS, OLDEST_KUBERNETES, validate_strictly

OVERLAYS = ROOT / "manifests" / "overlays"
EXPORTER_OBJECTS = {("DaemonSet", "gpu-exporter"), ("ServiceAccount", "gpu-exporter"),
                    ("Service", "gpu-exporter"), ("NetworkPolicy", "gpu-exporter"),
                    ("NetworkPolicy", "gpu-exporter-egress"),
                    ("PriorityClass", "gpu-autoscaler-node-critical")}


def comparable(obj: Object) -> Object:
    """A ConfigMap's YAML files as data: the chart writes the values' YAML, kustomize the file's text."""
    if obj["kind"] == "ConfigMap":
        obj["data"] = {name: yaml.safe_load(text) if name.endswith(".yaml") else text
                       for name, text in obj["data"].items()}
    return obj


def by_key(objects: list[Object]) -> dict[tuple[str, str, str], Object]:
    return {key(o): comparable(o) for o in objects}


def test_every_overlay_has_its_values_example() -> None:
    assert example_names() == sorted(p.name for p in OVERLAYS.iterdir() if p.is_dir())


@pytest.mark.parametrize("overlay", ["base", *example_names()])
def test_the_chart_renders_what_kustomize_renders(overlay: str) -> None:
    """The namespace aside: `helm install` needs it to exist first, so the chart makes it only on request."""
    values = {} if overlay == "base" else example(overlay)
    theirs = by_key(kustomize(ROOT / "manifests" if overlay == "base" else OVERLAYS / overlay))
    ours = by_key([without_helm_labels(o) for o in render(values | {"namespace": {"create": True}}).objects])
    assert sorted(ours) == sorted(theirs)
    for name, obj in ours.items():
        assert obj == theirs[name], name
    assert ("Namespace", NAMESPACE) not in kind_names(render(values).objects)


@pytest.mark.parametrize("name", ["defaults", *example_names()])
def test_every_values_example_renders_and_validates_strictly(name: str) -> None:
    values = {} if name == "defaults" else example(name)
    validate(values)
    validate_strictly(render(values | {"namespace": {"create": True}}).objects)


@pytest.mark.parametrize("version", K8S_VERSIONS)
def test_helm_lint_is_clean_at_the_oldest_and_newest_kubernetes(version: str) -> None:
    for name in ["defaults", *example_names()]:
        assert lint({} if name == "defaults" else example(name), f"v{version}.0") == [], name


def test_the_chart_states_the_oldest_kubernetes_we_validate() -> None:
    assert chart().metadata["kubeVersion"] == f">={OLDEST_KUBERNETES}.0-0"


@pytest.mark.parametrize(("values", "named"), [
    ({"exporter": {"enabeld": False}}, "enabeld"),
    ({"contoller": {"replicas": 3}}, "contoller"),
    ({"controller": {"replicas": "two"}}, "replicas"),
    ({"controller": {"replicas": 0}}, "replicas"),
    ({"image": {"pullPolicy": "Sometimes"}}, "pullPolicy"),
    ({"controller": {"rbac": {"namespaces": ["ML_Serving"]}}}, "namespaces"),
    ({"controller": {"prometheus": {"url": "prometheus:9090"}}}, "url"),
    ({"controller": {"prometheus": {"connections": {"endpoint": {}}}}}, "endpoint"),
    ({"controller": {"rules": {"rulez": []}}}, "rulez"),
    ({"exporter": {"tolerations": [{"key": "nvidia.com/gpu", "operater": "Exists"}]}}, "operater"),
    ({"commonLabels": {"team": 7}}, "team"),
    ({"prometheusOperator": {"serviceMonitors": "yes"}}, "serviceMonitors"),
], ids=["nested-typo", "top-level-typo", "replicas-string", "replicas-zero", "pull-policy", "namespace-name",
        "url-without-scheme", "connections-typo", "rules-typo", "toleration-typo", "label-not-string",
        "switch-not-boolean"])
def test_the_schema_refuses_a_wrong_value_naming_it(values: dict[str, Any], named: str) -> None:
    with pytest.raises(helm.HelmValuesError, match=named):
        validate(values)
    with pytest.raises(helm.HelmValuesError, match=named):
        render(values)


def test_the_packaged_chart_carries_the_linked_files(tmp_path: Path) -> None:
    """files/ links to manifests/: `helm package` must store their content, which the release then renders."""
    values = example("prometheus-operator")
    with helm.Chart.load(helm.package(CHART, destination=tmp_path)) as packaged:
        manifests = packaged.render(values, name="gpu-autoscaler", namespace=NAMESPACE)
    objects = [o for path, text in manifests.items() if path != NOTES for o in yaml.safe_load_all(text) if o]
    assert by_key(objects) == by_key(render(values).objects)


def test_a_priority_class_to_create_needs_its_name() -> None:
    with pytest.raises(helm.HelmRenderError, match=r"exporter\.priorityClassName"):
        render({"exporter": {"priorityClassName": ""}})


def test_each_process_can_be_left_out() -> None:
    everything = kind_names(render({"prometheusOperator": {"serviceMonitors": True, "prometheusRule": True}})
                            .objects)
    no_exporter = kind_names(render({"exporter": {"enabled": False}, "prometheusOperator": {
        "serviceMonitors": True, "prometheusRule": True}}).objects)
    assert everything - no_exporter == EXPORTER_OBJECTS | {("ServiceMonitor", "gpu-exporter")}
    no_controller = kind_names(render({"controller": {"enabled": False}, "prometheusOperator": {
        "serviceMonitors": True, "prometheusRule": True}}).objects)
    assert no_controller == EXPORTER_OBJECTS | {("ServiceMonitor", "gpu-exporter"),
                                                ("PrometheusRule", "gpu-autoscaler")}


def workload(objects: list[Object], kind: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """(pod spec, its one container) of the one object of this kind."""
    (obj,) = [o for o in objects if o["kind"] == kind]
    pod = obj["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    return pod, container


def test_image_resources_and_scheduling_come_from_values() -> None:
    toleration = {"key": "dedicated", "operator": "Equal", "value": "gpu", "effect": "NoSchedule"}
    objects = render({
        "image": {"repository": "registry.example/gpu-autoscaler", "tag": "9.9.9", "pullPolicy": "Always"},
        "exporter": {"nodeSelector": {"pool": "gpu"}, "tolerations": [toleration],
                     "createPriorityClass": False, "priorityClassName": "system-node-critical",
                     "runtimeClassName": "",
                     "resources": {"requests": {"cpu": "10m", "memory": "32Mi"}}},
        "controller": {"replicas": 1, "priorityClassName": "platform", "nodeSelector": {"pool": "system"},
                       "resources": {"limits": {"memory": "1Gi"}}},
    }).objects
    exporter_pod, exporter = workload(objects, "DaemonSet")
    controller_pod, controller = workload(objects, "Deployment")
    for c in (exporter, controller):
        assert c["image"] == "registry.example/gpu-autoscaler:9.9.9" and c["imagePullPolicy"] == "Always"
    assert exporter["resources"] == {"requests": {"cpu": "10m", "memory": "32Mi"},
                                     "limits": {"cpu": "500m", "memory": "192Mi"}}  # Helm merges maps
    assert controller["resources"] == {"requests": {"cpu": "100m", "memory": "128Mi"},
                                       "limits": {"cpu": "1", "memory": "1Gi"}}
    assert exporter_pod["nodeSelector"] == {"pool": "gpu"} and exporter_pod["tolerations"] == [toleration]
    assert exporter_pod["priorityClassName"] == "system-node-critical"
    assert "runtimeClassName" not in exporter_pod
    assert controller_pod["priorityClassName"] == "platform"
    assert controller_pod["nodeSelector"] == {"pool": "system"} and "tolerations" not in controller_pod
    kinds = {o["kind"] for o in objects}
    assert "PriorityClass" not in kinds and "PodDisruptionBudget" not in kinds  # one replica: no PDB to block


def test_labels_and_annotations_reach_every_object_and_the_pods() -> None:
    objects = render({
        "commonLabels": {"team": "ml-platform", "app.kubernetes.io/name": "not-ours"},
        "commonAnnotations": {"owner": "ml-platform@example.com"},
        "exporter": {"podLabels": {"scrape": "gpu"}, "podAnnotations": {"sidecar.istio.io/inject": "false"}},
        "controller": {"podLabels": {"tier": "control"}},
        "prometheusOperator": {"serviceMonitors": True, "prometheusRule": True,
                               "labels": {"release": "kube-prometheus-stack"}},
    }).objects
    for obj in objects:
        meta = obj["metadata"]
        assert meta["labels"]["team"] == "ml-platform", key(obj)
        assert meta["annotations"] == {"owner": "ml-platform@example.com"}, key(obj)
        is_operator_kind = obj["kind"] in ("ServiceMonitor", "PrometheusRule")
        assert (meta["labels"].get("release") == "kube-prometheus-stack") == is_operator_kind, key(obj)
    (daemonset,) = [o for o in objects if o["kind"] == "DaemonSet"]
    assert daemonset["metadata"]["labels"]["app.kubernetes.io/name"] == "gpu-exporter"  # ours win
    template = daemonset["spec"]["template"]["metadata"]
    assert template["labels"]["scrape"] == "gpu"
    assert template["annotations"] == {"sidecar.istio.io/inject": "false"}
    assert daemonset["spec"]["selector"]["matchLabels"].items() <= template["labels"].items()
    (deployment,) = [o for o in objects if o["kind"] == "Deployment"]
    assert deployment["spec"]["template"]["metadata"]["labels"]["tier"] == "control"


def test_another_namespace_is_used_everywhere_the_namespace_is_named() -> None:
    values = example("tls-auth") | {"controller": {"rbac": {"namespaces": ["ml-a", "ml-b"]}}}
    objects = render(values, namespace="gpu-monitoring").objects
    for obj in objects:
        namespace = obj["metadata"].get("namespace")
        granted_elsewhere = obj["kind"] == "RoleBinding" and obj["roleRef"]["kind"] == "ClusterRole"
        assert namespace in (None, *(["ml-a", "ml-b"] if granted_elsewhere else ["gpu-monitoring"])), key(obj)
        for subject in obj.get("subjects", []):
            assert subject["namespace"] == "gpu-monitoring", key(obj)
    for monitor in [o for o in objects if o["kind"] == "ServiceMonitor"]:
        assert monitor["spec"]["namespaceSelector"] == {"matchNames": ["gpu-monitoring"]}
        (endpoint,) = monitor["spec"]["endpoints"]
        assert endpoint["tlsConfig"]["serverName"] == f"{monitor['metadata']['name']}.gpu-monitoring.svc"
    assert {o["metadata"]["namespace"] for o in objects if o["kind"] == "RoleBinding"
            and o["roleRef"]["kind"] == "ClusterRole"} == {"ml-a", "ml-b"}
    _, controller = workload(objects, "Deployment")
    assert "--namespaces=ml-a,ml-b" in controller["args"]


def test_rules_given_as_text_are_mounted_as_written() -> None:
    text = "# ours\nrules: []\n"
    (configmap,) = [o for o in render({"controller": {"rules": text}}).objects
                    if o["metadata"]["name"] == "gpu-autoscaler-rules"]
    assert configmap["data"] == {"rules.yaml": text}


def jobs_in(notes: str) -> list[dict[str, Any]]:
    """The scrape jobs the notes print, from the line `scrape_configs:` on."""
    jobs: list[dict[str, Any]] = yaml.safe_load(notes[notes.index("\nscrape_configs:"):])["scrape_configs"]
    return jobs


def test_notes_say_how_to_check_it_works_and_hold_the_scrape_jobs_without_the_operator() -> None:
    notes = render().notes
    for command in ("rollout status daemonset/gpu-exporter", "rollout status deployment/gpu-autoscaler",
                    "get lease gpu-autoscaler"):
        assert f"kubectl -n {NAMESPACE} {command}" in notes
    assert {job["job_name"]: job for job in jobs_in(notes)} == shipped_jobs()
    operator_notes = render(example("prometheus-operator")).notes
    assert "scrape_configs:" not in operator_notes and "prometheusOperator.labels" in operator_notes
    tls_jobs = yaml.safe_load((OVERLAYS / "tls-auth" / "scrape-config.yaml").read_text())["scrape_configs"]
    assert jobs_in(render({"webConfig": {"enabled": True}}).notes) == tls_jobs
