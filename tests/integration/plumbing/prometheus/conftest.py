"""Fixtures for authenticated Prometheus connections: a test PKI (tests/pki.py), a real
Prometheus that demands TLS, a client certificate and basic auth (its --web.config.file, bcrypt hash), and a
checking reverse proxy that demands a bearer token and a tenant header under a path prefix."""

from __future__ import annotations

import base64
import ssl
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import bcrypt
import pytest

from demo.processes import ManagedProcess, running, start_prometheus
from tests.pki import TestCA
from tests.support import QuietHandler

USER = "autoscaler"
PASSWORD = "pw-SECRET-correct-horse"
TENANT = "team-a"
PREFIX = "/prometheus"


@dataclass(frozen=True)
class Pki:
    dir: Path

    def path(self, name: str) -> str:
        return str(self.dir / name)


@pytest.fixture(scope="package")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    """ca.crt (signs server.crt for localhost and 127.0.0.1, and client.crt); other-ca.crt (signs nothing)."""
    root = tmp_path_factory.mktemp("pki")
    ca = TestCA(root, "ca")
    ca.issue("prometheus", stem="server")
    ca.issue("gpu-autoscaler", server=False, stem="client")
    TestCA(root, "other-ca")
    return Pki(root)


@pytest.fixture(scope="package")
def tls_prometheus(pki: Pki) -> Iterator[ManagedProcess]:
    """Prometheus requiring TLS 1.2+, a client certificate signed by the test CA and basic auth."""
    web = {
        "tls_server_config": {"cert_file": pki.path("server.crt"), "key_file": pki.path("server.key"),
                              "client_auth_type": "RequireAndVerifyClientCert",
                              "client_ca_file": pki.path("ca.crt")},
        "basic_auth_users": {USER: bcrypt.hashpw(PASSWORD.encode(), bcrypt.gensalt(rounds=4)).decode()},
    }
    context = ssl.create_default_context(cafile=pki.path("ca.crt"))
    context.load_cert_chain(pki.path("client.crt"), pki.path("client.key"))
    auth = "Basic " + base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode()
    with running(start_prometheus({"global": {"scrape_interval": "1m"}}, web_config=web,
                                  probe_headers={"Authorization": auth}, probe_context=context)) as prom:
        yield prom


@pytest.fixture(scope="package")
def plain_prometheus() -> Iterator[ManagedProcess]:
    with running(start_prometheus({"global": {"scrape_interval": "1m"}})) as prom:
        yield prom


@dataclass
class CheckingProxy:
    """Forwards GETs under PREFIX to Prometheus when they carry `Bearer <token>` and the tenant header."""

    url: str
    server: ThreadingHTTPServer
    token: str = ""
    seen_tokens: list[str] | None = None


def _handler(proxy: CheckingProxy, upstream: str) -> type[BaseHTTPRequestHandler]:
    class Handler(QuietHandler):
        def do_GET(self) -> None:
            assert proxy.seen_tokens is not None
            proxy.seen_tokens.append(self.headers.get("Authorization", ""))
            if self.headers.get("Authorization") != f"Bearer {proxy.token}":
                return self.answer(401, b'{"status":"error","errorType":"unauthorized","error":"no"}')
            if self.headers.get("X-Scope-OrgID") != TENANT:
                return self.answer(403, b"no tenant")
            if not self.path.startswith(PREFIX + "/"):
                return self.answer(404, b"404 page not found")
            try:
                with urllib.request.urlopen(upstream + self.path.removeprefix(PREFIX), timeout=5) as answer:
                    self.answer(answer.status, answer.read())
            except urllib.error.HTTPError as e:
                self.answer(e.code, e.read())


    return Handler


@pytest.fixture
def checking_proxy(plain_prometheus: ManagedProcess) -> Iterator[CheckingProxy]:
    proxy = CheckingProxy("", None, seen_tokens=[])  # type: ignore[arg-type]
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(proxy, plain_prometheus.url))
    proxy.server = server
    proxy.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    yield proxy
    server.shutdown()
    server.server_close()
    thread.join(timeout=5)
