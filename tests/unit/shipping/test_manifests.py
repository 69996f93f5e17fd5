"""manifests/: the kustomize base and overlays render with the real `kubectl kustomize`, every object
validates strictly against the oldest and the newest Kubernetes we support, and the exporter / autoscaler pods
have the properties the project promises (GPU nodes only, least privilege, probes, leader election, ...)."""

from __future__ import annotations

import copy
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate
import pytest

from autoscaler.config.rules import parse_rules
from demo.processes import promtool
from tests.unit.shipping.crd_schemas import SCHEMAS
from tests.unit.shipping.kustomize import KustomizeError, key, render
from tests.unit.shipping.promql_names import ROOT
from tests.unit.shipping.scrape_jobs import as_static_job, pod_meta_labels, shipped_jobs, write_check_config
from tests.unit.shipping.strict_validation import K8S_VERSIONS, validate_strictly

MANIFESTS = ROOT / "manifests"
RENDERINGS = {"base": MANIFESTS, "prometheus-operator": MANIFESTS / "overlays" / "prometheus-operator",
              "plain-prometheus": MANIFESTS / "overlays" / "plain-prometheus",
              "namespaced-rbac": MANIFESTS / "overlays" / "namespaced-rbac",
              "tls-auth": MANIFESTS / "overlays" / "tls-auth",
              "openshift": MANIFESTS / "overlays" / "openshift", "mimir": MANIFESTS / "overlays" / "mimir",
              "mig-monitor": MANIFESTS / "overlays" / "mig-monitor"}
K8S_VERSION = K8S_VERSIONS[-1]
PROMETHEUS_POD = {"app.kubernetes.io/name": "prometheus"}


def objects(name: str = "prometheus-operator") -> list[dict[str, Any]]:
    return render(RENDERINGS[name])


def one(kind: str, name: str, rendering: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    (obj,) = [o for o in rendering or objects() if o["kind"] == kind and o["metadata"]["name"] == name]
    return obj


def container(workload: dict[str, Any]) -> dict[str, Any]:
    (c,) = workload["spec"]["template"]["spec"]["containers"]
    return c


def test_a_patch_whose_test_fails_stops_the_build(tmp_path: Path) -> None:
    """The overlays' JSON 6902 `test` operations refuse a base whose args moved, instead of replacing the
    wrong item."""
    shutil.copytree(MANIFESTS, tmp_path / "manifests")
    deployment = tmp_path / "manifests" / "base" / "autoscaler-deployment.yaml"
    text = deployment.read_text()
    assert "- --prometheus=$(PROMETHEUS_URL)\n" in text
    deployment.write_text(text.replace("- --prometheus=$(PROMETHEUS_URL)\n", "", 1))
    with pytest.raises(KustomizeError, match="containers/0/args/2"):
        render(tmp_path / "manifests" / "overlays" / "mimir")


@pytest.mark.parametrize("name", RENDERINGS)
def test_every_object_validates_strictly(name: str) -> None:
    validate_strictly(render(RENDERINGS[name]))


def test_strict_validation_rejects_an_unknown_field() -> None:
    daemonset = copy.deepcopy(one("DaemonSet", "gpu-exporter"))
    container(daemonset)["securityContxt"] = {"privileged": False}
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(daemonset, K8S_VERSION, strict=True)
    monitor = copy.deepcopy(one("ServiceMonitor", "gpu-exporter"))
    monitor["spec"]["endpoints"][0]["honorLabel"] = True
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(monitor, SCHEMAS["ServiceMonitor"])


def test_a_field_newer_than_the_oldest_supported_kubernetes_is_refused() -> None:
    daemonset = copy.deepcopy(one("DaemonSet", "gpu-exporter"))
    daemonset["spec"]["template"]["spec"]["hostnameOverride"] = "gpu-node"  # a pod field since 1.34
    kubernetes_validate.validate(daemonset, K8S_VERSION, strict=True)
    with pytest.raises(kubernetes_validate.ValidationError):
        validate_strictly([daemonset])


def test_base_and_overlays_share_the_namespace_and_labels() -> None:
    for name in RENDERINGS:
        for obj in render(RENDERINGS[name]):
            assert obj["metadata"]["labels"]["app.kubernetes.io/part-of"] == "gpu-autoscaler"
            granted_elsewhere = name == "namespaced-rbac" and obj["kind"] == "RoleBinding" and obj[
                "roleRef"]["kind"] == "ClusterRole"  # the per-namespace grants live in the target namespaces
            if obj["kind"] not in ("Namespace", "PriorityClass", "ClusterRole", "ClusterRoleBinding"):
                assert granted_elsewhere or obj["metadata"]["namespace"] == "gpu-autoscaler", key(obj)


def test_exporter_runs_on_gpu_nodes_only_and_tolerates_their_taint() -> None:
    pod = one("DaemonSet", "gpu-exporter")["spec"]["template"]["spec"]
    required = pod["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    terms = required["nodeSelectorTerms"]
    assert terms and all(t["matchExpressions"] for t in terms)
    assert any(e["key"] == "nvidia.com/gpu.present" for t in terms for e in t["matchExpressions"])
    assert {"key": "nvidia.com/gpu", "operator": "Exists"} in pod["tolerations"]


def test_exporter_has_least_privilege() -> None:
    daemonset = one("DaemonSet", "gpu-exporter")
    pod = daemonset["spec"]["template"]["spec"]
    c = container(daemonset)
    security = c["securityContext"]
    assert security["privileged"] is False and security["allowPrivilegeEscalation"] is False
    assert security["readOnlyRootFilesystem"] is True and security["capabilities"] == {"drop": ["ALL"]}
    assert not any(pod.get(f) for f in ("hostNetwork", "hostPID", "hostIPC"))
    assert pod["automountServiceAccountToken"] is False
    assert "nvidia.com/gpu" not in c["resources"]["limits"], "must not take a GPU away from workloads"
    env = {e["name"]: e for e in c["env"]}
    assert env["NVIDIA_VISIBLE_DEVICES"]["value"] == "all"
    assert env["NVIDIA_DRIVER_CAPABILITIES"]["value"] == "utility"
    assert env["NODE_NAME"]["valueFrom"] == {"fieldRef": {"fieldPath": "spec.nodeName"}}
    host_paths = {v["name"]: v["hostPath"]["path"] for v in pod["volumes"] if "hostPath" in v}
    assert host_paths == {"pod-resources": "/var/lib/kubelet/pod-resources", "host-proc": "/proc"}
    mounts = {m["name"]: m for m in c["volumeMounts"]}
    assert all(mounts[name].get("readOnly") is True for name in host_paths)


def test_exporter_probes_resources_and_priority() -> None:
    rendering = objects()
    daemonset = one("DaemonSet", "gpu-exporter", rendering)
    c = container(daemonset)
    assert c["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert c["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert set(c["resources"]) == {"requests", "limits"}
    assert {"cpu", "memory"} <= set(c["resources"]["requests"]) & set(c["resources"]["limits"])
    priority = daemonset["spec"]["template"]["spec"]["priorityClassName"]
    assert priority.startswith("system-") or one("PriorityClass", priority, rendering)["value"] >= 1_000_000


def test_autoscaler_deployment() -> None:
    rendering = objects()
    deployment = one("Deployment", "gpu-autoscaler", rendering)
    pod = deployment["spec"]["template"]["spec"]
    c = container(deployment)
    assert deployment["spec"]["replicas"] == 2 and "--leader-elect" in c["args"]
    assert pod["securityContext"]["runAsNonRoot"] is True and pod["securityContext"]["runAsUser"] != 0
    assert c["securityContext"]["readOnlyRootFilesystem"] is True
    assert c["securityContext"]["capabilities"] == {"drop": ["ALL"]}
    assert c["livenessProbe"]["httpGet"]["path"] == "/healthz" and "readinessProbe" in c
    assert {e["name"] for e in c["env"]} >= {"POD_NAMESPACE", "POD_NAME"}
    (rules_volume,) = [v for v in pod["volumes"] if "configMap" in v]
    configmap = one("ConfigMap", rules_volume["configMap"]["name"], rendering)
    mount = next(m for m in c["volumeMounts"] if m["name"] == rules_volume["name"])
    (rules_arg,) = [a for a in c["args"] if a.startswith("--rules=")]
    assert rules_arg == f"--rules={mount['mountPath']}/rules.yaml" and "rules.yaml" in configmap["data"]


def test_shipped_example_rules_are_valid() -> None:
    configmap = one("ConfigMap", "gpu-autoscaler-rules")
    ruleset = parse_rules(configmap["data"]["rules.yaml"], "configmap:gpu-autoscaler-rules/rules.yaml")
    assert ruleset.rules


def _help(*argv: str) -> str:
    binary = shutil.which(argv[0], path=str(Path(sys.executable).parent)) or shutil.which(argv[0])
    assert binary, f"{argv[0]} not installed next to {sys.executable}"
    result = subprocess.run([binary, *argv[1:], "--help"], capture_output=True, text=True, timeout=60,
                            check=False)
    assert result.returncode == 0, result.stderr
    return result.stdout


@pytest.mark.parametrize(("workload", "help_argv"), [
    (("DaemonSet", "gpu-exporter"), ("gpu-exporter",)),
    (("Deployment", "gpu-autoscaler"), ("gpu-autoscaler", "run")),
], ids=["exporter", "autoscaler"])
def test_every_flag_in_the_manifests_exists(workload: tuple[str, str], help_argv: tuple[str, ...]) -> None:
    c = container(one(*workload))
    assert c["command"] == [help_argv[0]]
    text = _help(*help_argv)
    for arg in c["args"]:
        flag = arg.split("=", 1)[0]
        if flag.startswith("--"):
            pattern = rf"(?<![\w-]){re.escape(flag)}(?![\w-])"
            assert re.search(pattern, text), f"{help_argv[0]}: no flag {flag}"


def test_pdb_keeps_one_autoscaler() -> None:
    pdb = one("PodDisruptionBudget", "gpu-autoscaler")
    assert pdb["spec"]["minAvailable"] == 1
    template_labels = one("Deployment", "gpu-autoscaler")["spec"]["template"]["metadata"]["labels"]
    assert pdb["spec"]["selector"]["matchLabels"].items() <= template_labels.items()


@pytest.mark.parametrize("workload", [("DaemonSet", "gpu-exporter"), ("Deployment", "gpu-autoscaler")])
def test_only_prometheus_reaches_the_metrics_port(workload: tuple[str, str]) -> None:
    rendering = objects()
    pod_labels = one(*workload, rendering)["spec"]["template"]["metadata"]["labels"]
    (port,) = container(one(*workload, rendering))["ports"]
    policies = [p for p in rendering if p["kind"] == "NetworkPolicy"
                and p["spec"]["podSelector"]["matchLabels"].items() <= pod_labels.items()
                and "Ingress" in p["spec"]["policyTypes"]]
    assert policies, "no NetworkPolicy selects the pods"
    for policy in policies:
        assert policy["spec"]["policyTypes"] == ["Ingress"]
        for rule in policy["spec"]["ingress"]:
            assert rule["ports"] == [{"port": port["containerPort"], "protocol": "TCP"}]
            assert rule["from"] == [{"namespaceSelector": {}, "podSelector": {"matchLabels": PROMETHEUS_POD}}]


@pytest.mark.parametrize("name", ["gpu-exporter", "gpu-autoscaler"])
def test_services_and_servicemonitors_keep_the_exporters_labels(name: str) -> None:
    rendering = objects()
    service = one("Service", name, rendering)
    monitor = one("ServiceMonitor", name, rendering)
    assert monitor["spec"]["selector"]["matchLabels"].items() <= service["metadata"]["labels"].items()
    (endpoint,) = monitor["spec"]["endpoints"]
    assert endpoint["port"] == service["spec"]["ports"][0]["name"] and endpoint["honorLabels"] is True
    relabelings = endpoint["relabelings"]
    moved = {r["sourceLabels"][0]: r["targetLabel"] for r in relabelings if r.get("targetLabel")}
    assert moved["namespace"] == "exporter_namespace" and moved["pod"] == "exporter_pod"
    assert relabelings[-1] == {"action": "labeldrop", "regex": "namespace|pod|container"}


def test_plain_prometheus_snippet_passes_promtool(tmp_path: Path) -> None:
    """Debian's promtool lacks Kubernetes discovery: the jobs are checked with static targets instead (same
    relabelling and honor_labels), see tests/unit/shipping/scrape_jobs.py."""
    jobs = shipped_jobs()
    assert list(jobs) == ["gpu-exporter", "gpu-autoscaler"]
    for job in jobs.values():
        assert job["honor_labels"] is True
        assert job["kubernetes_sd_configs"][0]["role"] == "pod"
        assert not {r.get("target_label") for r in job["relabel_configs"]} & {"namespace", "pod", "container"}
    meta = pod_meta_labels("gpu-exporter", "gpu-exporter-abcde", "gpu-autoscaler", "gpu-node-1")
    static = [as_static_job(job, [("127.0.0.1:9400", meta)]) for job in jobs.values()]
    result = promtool("check", "config", "--syntax-only", str(write_check_config(tmp_path / "p.yml", static)))
    assert result.returncode == 0, result.stdout + result.stderr


def egress_of(workload: tuple[str, str]) -> list[dict[str, Any]]:
    """The egress rules of every NetworkPolicy with policyType Egress that selects the workload's pods."""
    rendering = objects("base")
    pod_labels = one(*workload, rendering)["spec"]["template"]["metadata"]["labels"]
    policies = [p for p in rendering if p["kind"] == "NetworkPolicy" and "Egress" in p["spec"]["policyTypes"]
                and p["spec"]["podSelector"]["matchLabels"].items() <= pod_labels.items()]
    assert policies, f"no egress NetworkPolicy selects {workload}"
    return [rule for p in policies for rule in p["spec"].get("egress", [])]


def test_the_exporter_has_no_egress_at_all() -> None:
    assert egress_of(("DaemonSet", "gpu-exporter")) == []


def test_the_controller_reaches_only_dns_the_api_server_and_prometheus() -> None:
    allowed = {(p["protocol"], p["port"]) for rule in egress_of(("Deployment", "gpu-autoscaler"))
               for p in rule["ports"]}
    assert allowed == {("UDP", 53), ("TCP", 53), ("TCP", 443), ("TCP", 6443), ("TCP", 9090), ("TCP", 9091),
                       ("TCP", 8080)}
    for rule in egress_of(("Deployment", "gpu-autoscaler")):
        assert rule["ports"], "an egress rule without ports opens every port"
