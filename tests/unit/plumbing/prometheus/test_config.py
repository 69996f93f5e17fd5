"""The Prometheus connections file: every mistake is `file:line: field: message`, secrets never echoed."""

from __future__ import annotations

from pathlib import Path

import pytest

from plumbing.prometheus.config import (
    PrometheusConfigError,
    endpoint_from_url,
    load_prometheus_config,
    redact_url,
)

GOOD = """\
endpoints:
  default:
    url: https://thanos-querier.openshift-monitoring.svc:9091/
    authorization: {credentials_file: /var/run/secrets/kubernetes.io/serviceaccount/token}
    tls_config:
      ca_file: /var/run/secrets/kubernetes.io/serviceaccount/service-ca.crt
      server_name: thanos-querier.openshift-monitoring.svc
      min_version: TLS13
  mimir:
    url: http://mimir-query-frontend.mimir:8080/prometheus
    http_headers: {X-Scope-OrgID: {values: [team-a]}, X-Extra: {files: [tenant.txt]}}
    follow_redirects: false
    proxy_url: http://proxy:3128
"""


def load(tmp_path: Path, text: str) -> list[str]:
    path = tmp_path / "prom.yaml"
    path.write_text(text)
    try:
        load_prometheus_config(path)
    except PrometheusConfigError as exc:
        return [str(p) for p in exc.problems]
    return []


def test_a_good_file(tmp_path: Path) -> None:
    path = tmp_path / "prom.yaml"
    path.write_text(GOOD)
    config = load_prometheus_config(path)
    default, mimir = config.endpoints["default"], config.endpoints["mimir"]
    assert default.url == "https://thanos-querier.openshift-monitoring.svc:9091"
    assert default.authorization is not None and default.authorization.type == "Bearer"
    assert default.tls.min_version == "TLS13" and default.tls.server_name.startswith("thanos")  # type: ignore[union-attr]
    assert mimir.url.endswith("/prometheus") and not mimir.follow_redirects
    assert mimir.headers[1].files == (str(tmp_path / "tenant.txt"),)  # relative to the file, as Prometheus


def endpoint(body: str) -> str:
    return "endpoints:\n  default:\n" + "".join(f"    {line}\n" for line in body.splitlines())


CASES = [
    ("no-scheme", endpoint("url: prometheus:9090"),
     "prom.yaml:3: endpoints.default.url: expected an http:// or https:// URL (got no scheme in "
     "'prometheus:9090'; write 'http://prometheus:9090')"),
    ("ftp", endpoint("url: ftp://host"), "prom.yaml:3: endpoints.default.url: expected an http:// or https://"),
    ("no-host", endpoint("url: http://"), "prom.yaml:3: endpoints.default.url: expected a host name"),
    ("missing-url", endpoint("follow_redirects: true"), "prom.yaml:3: endpoints.default.url: required field"),
    ("typo", endpoint("url: http://h\nbasic_aut: {username: u}"),
     "prom.yaml:4: endpoints.default.basic_aut: unknown field (expected one of:"),
    ("typo-hint", endpoint("url: http://h\ntls_config: {ca_fil: x}"), "did you mean 'ca_file'?"),
    ("both-auths", endpoint("url: http://h\nbasic_auth: {username: u, password: p}\nauthorization: "
                            "{credentials: t}"),
     "prom.yaml:5: endpoints.default.authorization: basic_auth and authorization are mutually exclusive"),
    ("both-password", endpoint("url: http://h\nbasic_auth: {username: u, password: p, password_file: f}"),
     "prom.yaml:4: endpoints.default.basic_auth.password_file: password and password_file are mutually"),
    ("no-credentials", endpoint("url: http://h\nauthorization: {type: Bearer}"),
     "prom.yaml:4: endpoints.default.authorization.credentials: required: give credentials or "),
    ("cert-no-key", endpoint("url: https://h\ntls_config: {cert_file: c.crt}"),
     "prom.yaml:4: endpoints.default.tls_config.key_file: cert_file and key_file go together"),
    ("tls-version", endpoint("url: https://h\ntls_config: {min_version: TLS1.2}"),
     "prom.yaml:4: endpoints.default.tls_config.min_version: expected one of TLS10, TLS11, TLS12, TLS13"),
    ("bool", endpoint("url: http://h\nfollow_redirects: sometimes"),
     "prom.yaml:4: endpoints.default.follow_redirects: expected true or false"),
    ("reserved-header", endpoint("url: http://h\nhttp_headers: {Authorization: {values: [x]}}"),
     "prom.yaml:4: endpoints.default.http_headers.Authorization: Authorization is reserved"),
    ("empty-header", endpoint("url: http://h\nhttp_headers: {X-Scope-OrgID: {}}"),
     "prom.yaml:4: endpoints.default.http_headers.X-Scope-OrgID: expected at least one of values, secrets"),
    ("unsupported", endpoint("url: http://h\noauth2: {client_id: x}"),
     "prom.yaml:4: endpoints.default.oauth2: not supported by gpu-autoscaler"),
    ("userinfo-and-basic", endpoint("url: http://u:p@h\nbasic_auth: {username: u}"),
     "prom.yaml:3: endpoints.default.url: a user in the URL and basic_auth: give only one"),
    ("bad-name", "endpoints:\n  'no spaces!': {url: 'http://h'}\n", "prom.yaml:2: endpoints.no spaces!:"),
    ("no-endpoints", "endpoints: {}\n", "prom.yaml:1: endpoints: expected at least one endpoint"),
    ("top-typo", "endpoint: {}\n", "prom.yaml:1: endpoint: unknown field"),
    ("empty", "", "prom.yaml:1: endpoints: the file is empty"),
    ("bad-yaml", "endpoints: [\n", "prom.yaml:2: file: not valid YAML"),
]


@pytest.mark.parametrize(("text", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_each_mistake_names_file_line_and_field(tmp_path: Path, text: str, expected: str) -> None:
    problems = load(tmp_path, text)
    assert any(p.startswith(f"{tmp_path}/") and expected in p for p in problems), problems


def test_every_problem_of_a_file_is_reported_together(tmp_path: Path) -> None:
    text = "endpoints:\n  a: {url: nope}\n  b: {url: 'http://h', follow_redirects: 3}\n"
    problems = load(tmp_path, text)
    assert [p.split(": ")[1] for p in problems] == ["endpoints.a.url", "endpoints.b.follow_redirects"]


def test_an_inline_secret_is_never_echoed(tmp_path: Path) -> None:
    text = endpoint("url: http://h\nauthorization: {credentials: [tok-SECRET], type: Bearer}")
    text += "    basic_auth: {username: u, password: {p: pw-SECRET}}\n"
    problems = load(tmp_path, text)
    assert problems and not any("SECRET" in p for p in problems)


def test_a_password_in_a_url_is_basic_auth_and_shown_redacted() -> None:
    endpoint_ = endpoint_from_url("https://user:pa%40ss@prom.example:9090/api/prom/")
    assert endpoint_.url == "https://prom.example:9090/api/prom"
    assert endpoint_.display_url == "https://user:***@prom.example:9090/api/prom"
    assert endpoint_.basic_auth is not None and endpoint_.basic_auth.password.value == "pa@ss"
    assert redact_url("http://h:1/x") == "http://h:1/x"
    with pytest.raises(PrometheusConfigError, match=r"^--prometheus: url: expected an http:// or https://"):
        endpoint_from_url("localhost:9090")
