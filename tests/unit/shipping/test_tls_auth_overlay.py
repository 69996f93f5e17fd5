"""manifests/overlays/tls-auth: both processes serve with --web-config-file from the mounted Secret, probes
keep working over HTTPS, the ServiceMonitors scrape with TLS and basic auth for the names the certificate
must carry, the plain scrape jobs are the plain-prometheus ones plus exactly the TLS/auth fields, and the
shipped web.yml.example is a valid web config once a hash is pasted in (and refused before)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from plumbing.web import load_web_config
from plumbing.web.webconfig import WebConfigError
from tests.pki import TestCA, bcrypt_hash
from tests.unit.shipping.kustomize import render
from tests.unit.shipping.promql_names import ROOT
from tests.unit.shipping.scrape_jobs import SNIPPET, TLS_SNIPPET, shipped_jobs

OVERLAY = ROOT / "manifests" / "overlays" / "tls-auth"
MOUNT = "/etc/gpu-autoscaler-web"
WORKLOADS = (("DaemonSet", "gpu-exporter"), ("Deployment", "gpu-autoscaler"))


def rendered(kind: str, name: str) -> dict[str, Any]:
    (obj,) = [o for o in render(OVERLAY) if o["kind"] == kind and o["metadata"]["name"] == name]
    return obj


@pytest.mark.parametrize(("kind", "name"), WORKLOADS)
def test_workloads_serve_with_the_mounted_web_config_and_probe_over_https(kind: str, name: str) -> None:
    pod = rendered(kind, name)["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    assert f"--web-config-file={MOUNT}/web.yml" in container["args"]
    (mount,) = [m for m in container["volumeMounts"] if m["mountPath"] == MOUNT]
    (volume,) = [v for v in pod["volumes"] if v["name"] == mount["name"]]
    assert volume["secret"]["secretName"] == "gpu-autoscaler-web" and mount["readOnly"] is True
    for probe, path in (("livenessProbe", "/healthz"), ("readinessProbe", "/readyz")):
        assert container[probe]["httpGet"] == {"path": path, "port": "metrics", "scheme": "HTTPS"}
    user = pod["securityContext"].get("runAsUser", 0)
    mode = volume["secret"]["defaultMode"]
    assert user == 0 or (mode & 0o040 and pod["securityContext"]["fsGroup"] == pod["securityContext"][
        "runAsGroup"]), "the process must be able to read the Secret's files"


@pytest.mark.parametrize("name", ["gpu-exporter", "gpu-autoscaler"])
def test_service_monitors_scrape_https_with_basic_auth_for_the_service_name(name: str) -> None:
    (endpoint,) = rendered("ServiceMonitor", name)["spec"]["endpoints"]
    assert endpoint["scheme"] == "https"
    assert endpoint["tlsConfig"]["ca"] == {"secret": {"name": "gpu-autoscaler-web", "key": "ca.crt"}}
    service = rendered("Service", name)
    assert endpoint["tlsConfig"]["serverName"] == f"{name}.{service['metadata']['namespace']}.svc"
    auth = endpoint["basicAuth"]
    assert {auth["username"]["name"], auth["password"]["name"]} == {"gpu-autoscaler-scrape-auth"}


def test_plain_jobs_are_the_plain_prometheus_ones_plus_tls_and_auth() -> None:
    plain, tls = shipped_jobs(SNIPPET), shipped_jobs(TLS_SNIPPET)
    assert set(plain) == set(tls)
    for name, job in tls.items():
        extra = {k: v for k, v in job.items() if k not in plain[name]}
        assert {k: v for k, v in job.items() if k in plain[name]} == plain[name]
        assert set(extra) == {"scheme", "tls_config", "basic_auth"} and extra["scheme"] == "https"
        assert extra["tls_config"]["server_name"] == f"{name}.gpu-autoscaler.svc"
        assert set(extra["basic_auth"]) == {"username", "password_file"}  # never an inline password


def test_the_example_web_config_loads_once_a_hash_is_pasted(tmp_path: Path) -> None:
    names = ("gpu-exporter.gpu-autoscaler.svc", "gpu-autoscaler.gpu-autoscaler.svc")
    issued = TestCA(tmp_path).issue("services", stem="tls", names=names)
    assert (issued.cert.name, issued.key.name) == ("tls.crt", "tls.key")  # kubernetes.io/tls Secret keys
    example = (OVERLAY / "web.yml.example").read_text()
    path = tmp_path / "web.yml"
    path.write_text(example)
    with pytest.raises(WebConfigError, match=r"basic_auth_users\.prometheus"):
        load_web_config(path)  # shipped as is, it is refused: no default password can go live
    path.write_text(example.replace("PASTE_THE_BCRYPT_HASH_HERE", f"'{bcrypt_hash('x')}'"))
    config = load_web_config(path)
    assert config.tls is not None and set(config.users) == {"prometheus"}
