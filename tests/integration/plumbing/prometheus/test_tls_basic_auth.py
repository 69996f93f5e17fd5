"""A real Prometheus behind TLS, a client certificate and basic auth (its --web.config.file): the runner and
`check` succeed with the right connections file, and each wrong one fails with its one-line reason."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from demo.processes import ManagedProcess
from plumbing.prometheus.config import load_prometheus_config
from plumbing.prometheus.runner import PromQLRunner, PromQLSettings, QueryResult
from tests.integration.plumbing.prometheus.conftest import PASSWORD, USER, Pki

pytestmark = pytest.mark.integration

CLI = str(Path(sys.executable).parent / "gpu-autoscaler")
RULES = """\
rules:
  - name: svc
    target: {kind: Deployment, namespace: ml, name: svc}
    maxReplicas: 4
    metrics:
      - {name: one, query: 'vector(1)', type: Average, target: 1}
"""


def endpoint(pki: Pki, url: str, **changes: object) -> dict[str, object]:
    """The right settings for the TLS Prometheus, with `changes` applied (None removes a key)."""
    tls: dict[str, object] = {"ca_file": pki.path("ca.crt"), "cert_file": pki.path("client.crt"),
                              "key_file": pki.path("client.key")}
    config: dict[str, object] = {"url": url, "basic_auth": {"username": USER, "password": PASSWORD},
                                 "tls_config": tls}
    for key, value in changes.items():
        target = tls if key in ("ca_file", "cert_file", "key_file", "server_name", "min_version") else config
        if value is None:
            target.pop(key, None)
        else:
            target[key] = value
    return config


def write(tmp_path: Path, settings: dict[str, object]) -> Path:
    path = tmp_path / "prometheus.yaml"
    path.write_text(yaml.safe_dump({"endpoints": {"default": settings}}))
    return path


def query(path: Path) -> QueryResult:
    config = load_prometheus_config(path)
    endpoint = config.endpoints["default"]
    runner = PromQLRunner(PromQLSettings(endpoint.url, query_timeout=3, budget=4, max_attempts=1), endpoint)
    try:
        return runner.run_queries(["vector(1)"])["vector(1)"]
    finally:
        runner.close()


@pytest.fixture
def url(tls_prometheus: ManagedProcess) -> Iterator[str]:
    yield tls_prometheus.url.replace("127.0.0.1", "localhost")


def test_the_right_settings_query_and_check_succeeds(pki: Pki, url: str, tmp_path: Path) -> None:
    path = write(tmp_path, endpoint(pki, url))
    assert query(path) == QueryResult(1.0)
    (tmp_path / "rules.yaml").write_text(RULES)
    result = subprocess.run([CLI, "check", "rules.yaml", "--prometheus-config", str(path)], cwd=tmp_path,
                            capture_output=True, text=True, timeout=60, check=False)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "ok: svc/one = 1" in result.stdout
    assert PASSWORD not in result.stdout + result.stderr


def test_an_ip_address_url_with_server_name(pki: Pki, tls_prometheus: ManagedProcess, tmp_path: Path) -> None:
    """server_name sets SNI and the name checked, whatever host the URL names."""
    path = write(tmp_path, endpoint(pki, tls_prometheus.url, server_name="localhost"))
    assert query(path) == QueryResult(1.0)


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"ca_file": "other-ca.crt"},
         "TLS: certificate signed by unknown authority (set tls_config.ca_file)"),
        ({"server_name": "prometheus.example"}, "TLS: certificate is for localhost, 127.0.0.1, not "
                                                "prometheus.example"),
        ({"basic_auth": {"username": USER, "password": "pw-SECRET-wrong"}},
         "401 from Prometheus: check the credentials of endpoint default"),
        ({"cert_file": None, "key_file": None},
         "TLS: the server requires a client certificate (tls_config.cert_file and key_file)"),
    ],
    ids=["unknown-ca", "wrong-server-name", "wrong-password", "no-client-cert"],
)
def test_each_wrong_setting_is_one_clear_line(pki: Pki, url: str, tmp_path: Path, changes: dict[str, object],
                                              message: str) -> None:
    if changes.get("ca_file"):
        changes = {**changes, "ca_file": pki.path(str(changes["ca_file"]))}
    path = write(tmp_path, endpoint(pki, url, **changes))
    result = query(path)
    assert result.value is None
    assert (result.error or "").startswith(message), result.error
    assert "\n" not in (result.error or "")
    assert "pw-SECRET" not in (result.error or "")
    (tmp_path / "rules.yaml").write_text(RULES)
    cli = subprocess.run([CLI, "check", "rules.yaml", "--prometheus-config", str(path)], cwd=tmp_path,
                         capture_output=True, text=True, timeout=60, check=False)
    assert cli.returncode == 2
    assert message in cli.stdout + cli.stderr
    assert "pw-SECRET" not in cli.stdout + cli.stderr and "Traceback" not in cli.stderr


def test_run_decides_through_the_connections_file(pki: Pki, url: str, tmp_path: Path) -> None:
    """The `run` process itself (no cluster: --assume-replicas) reads the TLS Prometheus with the file, and
    never prints the password; `status`/`check` share the same runner, `run` is the wiring tested here."""
    path = write(tmp_path, endpoint(pki, url))
    (tmp_path / "rules.yaml").write_text(RULES.replace("'vector(1)'", "'vector(3)'"))
    env = {k: v for k, v in os.environ.items() if k not in ("KUBECONFIG", "KUBERNETES_SERVICE_HOST")}
    done = subprocess.run([CLI, "run", "--rules", "rules.yaml", "--prometheus-config", str(path), "--dry-run",
                           "--once", "--metrics-port", "0", "--assume-replicas", "1"], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    assert " svc: 1 -> 3 DesiredWithinRange | one=3 (target 1) | " in done.stdout, done.stdout
    assert PASSWORD not in done.stdout + done.stderr
