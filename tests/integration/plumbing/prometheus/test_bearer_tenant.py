"""Bearer tokens from a file (re-read when it rotates), a tenant header and a path prefix, through a checking
proxy in front of a real Prometheus; and no secret in any log record, error or CLI output."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from plumbing.prometheus.config import load_prometheus_config
from plumbing.prometheus.runner import PromQLRunner, PromQLSettings, QueryResult
from tests.integration.plumbing.prometheus.conftest import PREFIX, TENANT, CheckingProxy

pytestmark = pytest.mark.integration

CLI = str(Path(sys.executable).parent / "gpu-autoscaler")


def runner_for(path: Path) -> PromQLRunner:
    endpoint = load_prometheus_config(path).endpoints["default"]
    return PromQLRunner(PromQLSettings(endpoint.url, query_timeout=2, budget=3, max_attempts=1), endpoint)


def write_config(tmp_path: Path, endpoint: dict[str, object]) -> Path:
    path = tmp_path / "prometheus.yaml"
    path.write_text(yaml.safe_dump({"endpoints": {"default": endpoint}}))
    return path


def test_token_file_rotates_without_a_restart(checking_proxy: CheckingProxy, tmp_path: Path) -> None:
    token = tmp_path / "token"
    token.write_text("tok-one\n")  # a trailing newline, as files have: stripped as Prometheus does
    checking_proxy.token = "tok-one"
    path = write_config(tmp_path, {
        "url": checking_proxy.url + PREFIX,
        "authorization": {"credentials_file": "token"},  # relative to the config file
        "http_headers": {"X-Scope-OrgID": {"values": [TENANT]}},
    })
    runner = runner_for(path)
    try:
        assert runner.run_queries(["vector(2)"])["vector(2)"] == QueryResult(2.0)
        checking_proxy.token = "tok-two"  # the proxy now accepts only the new token
        rejected = runner.run_queries(["vector(2)"])["vector(2)"]
        assert rejected.error == "401 from Prometheus: check the credentials of endpoint default"
        replacement = tmp_path / "token.new"
        replacement.write_text("tok-two")
        os.replace(replacement, token)  # as the kubelet swaps a projected token
        deadline = time.monotonic() + 5
        result = rejected
        while time.monotonic() < deadline and not result.ok:
            time.sleep(0.2)
            result = runner.run_queries(["vector(2)"])["vector(2)"]
        assert result == QueryResult(2.0)
        assert checking_proxy.seen_tokens and checking_proxy.seen_tokens[-1] == "Bearer tok-two"
    finally:
        runner.close()


def test_missing_prefix_tenant_and_token_file(checking_proxy: CheckingProxy, tmp_path: Path) -> None:
    checking_proxy.token = "tok"
    (tmp_path / "token").write_text("tok")
    base = {"authorization": {"credentials_file": "token"},
            "http_headers": {"X-Scope-OrgID": {"values": [TENANT]}}}
    cases = {
        "no-prefix": ({**base, "url": checking_proxy.url},
                      f"404 from {checking_proxy.url}/api/v1/query: no Prometheus API there"),
        "no-tenant": ({"url": checking_proxy.url + PREFIX, "authorization": base["authorization"]},
                      "403 from Prometheus: endpoint default's credentials are not allowed to query"),
        "token-gone": ({**base, "url": checking_proxy.url + PREFIX,
                        "authorization": {"credentials_file": "missing-token"}},
                       "endpoint default: cannot read authorization.credentials_file "
                       f"{tmp_path}/missing-token: No such file or directory"),
    }
    for name, (endpoint, message) in cases.items():
        runner = runner_for(write_config(tmp_path, endpoint))
        try:
            result = runner.run_queries(["vector(1)"])["vector(1)"]
        finally:
            runner.close()
        assert result.value is None and (result.error or "").startswith(message), (name, result.error)


def test_no_secret_reaches_logs_errors_or_cli_output(checking_proxy: CheckingProxy, tmp_path: Path,
                                                     caplog: pytest.LogCaptureFixture) -> None:
    """Every secret the file holds, each endpoint failing: none shows anywhere."""
    caplog.set_level(logging.DEBUG)
    secrets = ["pw-SECRET-basic", "tok-SECRET-bearer", "url-SECRET-userinfo", "hdr-SECRET-value"]
    checking_proxy.token = "something-else"
    config = {"endpoints": {
        "default": {"url": checking_proxy.url + PREFIX,
                    "basic_auth": {"username": "u", "password": secrets[0]}},
        "bearer": {"url": checking_proxy.url + PREFIX, "authorization": {"credentials": secrets[1]},
                   "http_headers": {"X-Token": {"secrets": [secrets[3]]}}},
        "userinfo": {"url": f"http://user:{secrets[2]}@127.0.0.1:9/prometheus"},
    }}
    path = tmp_path / "prometheus.yaml"
    path.write_text(yaml.safe_dump(config))
    errors = []
    settings = PromQLSettings("", query_timeout=1, budget=2, max_attempts=1)
    for endpoint in load_prometheus_config(path).endpoints.values():
        runner = PromQLRunner(settings, endpoint)
        try:
            errors.append(runner.run_queries(["vector(1)"])["vector(1)"].error or "")
        finally:
            runner.close()
    assert errors[2].startswith("cannot reach Prometheus at http://user:***@127.0.0.1:9/prometheus: ")
    rules = tmp_path / "rules.yaml"
    rules.write_text("rules:\n" + "".join(
        f"  - name: r{i}\n    prometheus: {name}\n"
        f"    target: {{kind: Deployment, namespace: ml, name: r{i}}}\n"
        "    maxReplicas: 2\n    metrics: [{name: m, query: 'vector(1)', type: Average, target: 1}]\n"
        for i, name in enumerate(config["endpoints"])))
    cli = subprocess.run([CLI, "check", str(rules), "--prometheus-config", str(path), "--timeout", "2"],
                         capture_output=True, text=True, timeout=60, check=False)
    one_rule = tmp_path / "one-rule.yaml"
    one_rule.write_text("\n".join(rules.read_text().splitlines()[:6]) + "\n")
    url_cli = subprocess.run([CLI, "check", str(one_rule), "--prometheus", f"https://u:{secrets[2]}@127.0.0.1:9"],
                             capture_output=True, text=True, timeout=60, check=False)
    assert cli.returncode == 2 and url_cli.returncode == 2
    shown = "\n".join([*errors, *(r.getMessage() for r in caplog.records), cli.stdout, cli.stderr,
                       url_cli.stdout, url_cli.stderr])
    assert "401 from Prometheus" in shown and "u:***@127.0.0.1:9" in url_cli.stderr
    for secret in secrets:
        assert secret not in shown
