"""manifests/overlays/{openshift,mimir}: each renders, validates strictly, holds a connections file the
controller accepts, and its Deployment runs with --prometheus-config reading that file where it is mounted
(and no longer with --prometheus or $PROMETHEUS_URL)."""

from __future__ import annotations

from pathlib import Path

import pytest

from plumbing.prometheus.config import load_prometheus_config
from tests.unit.shipping.kustomize import render
from tests.unit.shipping.promql_names import ROOT
from tests.unit.shipping.strict_validation import validate_strictly

OVERLAYS = ROOT / "manifests" / "overlays"


@pytest.mark.parametrize("name", ["openshift", "mimir"])
def test_overlay_renders_validates_and_its_config_loads(name: str, tmp_path: Path) -> None:
    objects = render(OVERLAYS / name)
    validate_strictly(objects)
    (configmap,) = [o for o in objects if o["kind"] == "ConfigMap" and o["metadata"]["name"] ==
                    "gpu-autoscaler-prometheus"]
    path = tmp_path / "prometheus.yaml"
    path.write_text(configmap["data"]["prometheus.yaml"])
    endpoint = load_prometheus_config(path).endpoints["default"]
    if name == "openshift":
        assert endpoint.authorization is not None
        secrets = "/var/run/secrets/kubernetes.io/serviceaccount"
        assert endpoint.authorization.credentials.file == f"{secrets}/token"
        assert endpoint.tls.ca_file == f"{secrets}/service-ca.crt"
        (binding,) = [o for o in objects if o["kind"] == "ClusterRoleBinding"
                      and o["roleRef"]["name"] == "cluster-monitoring-view"]
        assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "gpu-autoscaler",
                                        "namespace": "gpu-autoscaler"}]
    else:
        assert endpoint.url.endswith("/prometheus") and endpoint.headers[0].name == "X-Scope-OrgID"
    (deployment,) = [o for o in objects if o["kind"] == "Deployment"]
    spec = deployment["spec"]["template"]["spec"]
    (container,) = spec["containers"]
    (flag,) = [a for a in container["args"] if a.startswith("--prometheus")]
    (mount,) = [m for m in container["volumeMounts"]
                if flag.startswith(f"--prometheus-config={m['mountPath']}/")]
    assert flag == f"--prometheus-config={mount['mountPath']}/prometheus.yaml"
    (volume,) = [v for v in spec["volumes"] if v["name"] == mount["name"]]
    assert volume["configMap"] == {"name": "gpu-autoscaler-prometheus"}
    assert all(e["name"] != "PROMETHEUS_URL" for e in container.get("env", []))
    others = [m["mountPath"] for m in container["volumeMounts"] if m is not mount]
    assert not any(mount["mountPath"].startswith(p + "/") for p in others)  # never inside a read-only mount
