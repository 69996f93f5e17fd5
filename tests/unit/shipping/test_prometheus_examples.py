"""manifests/examples/{openshift,mimir}: each renders, validates strictly, holds a connections file the
controller accepts, and its Deployment patch mounts that file where --prometheus-config reads it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

from autoscaler.promconfig import load_prometheus_config
from tests.unit.shipping.kustomize import render
from tests.unit.shipping.promql_names import ROOT

EXAMPLES = ROOT / "manifests" / "examples"
K8S_VERSION = kubernetes_validate.latest_version()


@pytest.mark.parametrize("name", ["openshift", "mimir"])
def test_example_renders_validates_and_its_config_loads(name: str, tmp_path: Path) -> None:
    objects = render(EXAMPLES / name)
    for obj in objects:
        kubernetes_validate.validate(obj, K8S_VERSION, strict=True)
    (configmap,) = [o for o in objects if o["kind"] == "ConfigMap"]
    path = tmp_path / "prometheus.yaml"
    path.write_text(configmap["data"]["prometheus.yaml"])
    endpoint = load_prometheus_config(path).endpoints["default"]
    if name == "openshift":
        assert endpoint.authorization is not None
        secrets = "/var/run/secrets/kubernetes.io/serviceaccount"
        assert endpoint.authorization.credentials.file == f"{secrets}/token"
        assert endpoint.tls.ca_file == f"{secrets}/service-ca.crt"
        (binding,) = [o for o in objects if o["kind"] == "ClusterRoleBinding"]
        assert binding["roleRef"]["name"] == "cluster-monitoring-view"
        assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "gpu-autoscaler",
                                        "namespace": "gpu-autoscaler"}]
    else:
        assert endpoint.url.endswith("/prometheus") and endpoint.headers[0].name == "X-Scope-OrgID"
    patch: dict[str, Any] = yaml.safe_load((EXAMPLES / name / "deployment-patch.yaml").read_text())
    spec = patch["spec"]["template"]["spec"]
    (container,) = spec["containers"]
    (flag,) = [a for a in container["args"] if a.startswith("--prometheus")]
    mount = container["volumeMounts"][0]
    assert flag == f"--prometheus-config={mount['mountPath']}/prometheus.yaml"
    assert spec["volumes"][0] == {"name": mount["name"], "configMap": {"name": configmap["metadata"]["name"]}}
