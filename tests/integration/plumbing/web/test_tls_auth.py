"""TLS and basic auth of both processes' HTTP endpoints over real sockets on 127.0.0.1: credentials, probes
without them, configured headers, certificate reload without a restart, client certificates, and the web
config file re-read when it changes."""

from __future__ import annotations

import gc
import logging
import os
import socket
import ssl
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests
from prometheus_client import CollectorRegistry

from autoscaler.controller.http_endpoint import MetricsServer
from exporter.serving.http_endpoint import ExporterServer
from plumbing.web import load_web_config
from tests.integration.plumbing.web.conftest import PASSWORD, Pki
from tests.pki import TestCA, bcrypt_hash, serial_of

pytestmark = pytest.mark.integration


class _Ready:
    init_attempted = True
    ready = True
    nvml_error = None


@pytest.fixture
def servers() -> Iterator[list[ExporterServer]]:
    started: list[ExporterServer] = []
    yield started
    for server in started:
        server.shutdown()


def exporter(started: list[ExporterServer], web: Path) -> str:
    server = ExporterServer("127.0.0.1", 0, CollectorRegistry(), _Ready(), web_config=load_web_config(web))
    server.start()
    started.append(server)
    return f"https://127.0.0.1:{server.port}"


def served_serial(port: int, ca: Path) -> int:
    """The serial number of the certificate a fresh handshake gets."""
    context = ssl.create_default_context(cafile=str(ca))
    with socket.create_connection(("127.0.0.1", port), timeout=5) as raw, \
            context.wrap_socket(raw, server_hostname="127.0.0.1") as tls:
        der = tls.getpeercert(binary_form=True)
    assert der is not None
    return serial_of(der)


def test_basic_auth_over_tls_and_probes_without_credentials(pki: Pki, servers: list[ExporterServer]) -> None:
    base = exporter(servers, pki.web_config())
    ca = str(pki.ca.cert)
    answer = requests.get(base + "/metrics", verify=ca, timeout=10)
    assert answer.status_code == 401 and answer.headers["WWW-Authenticate"].startswith("Basic ")
    assert answer.headers["X-Content-Type-Options"] == "nosniff"  # configured headers on every answer
    for user, password in [("prometheus", "wrong"), ("nobody", PASSWORD), ("prometheus", "")]:
        answer = requests.get(base + "/metrics", auth=(user, password), verify=ca, timeout=10)
        assert answer.status_code == 401
    good = requests.get(base + "/metrics", auth=("prometheus", PASSWORD), verify=ca, timeout=10)
    assert good.status_code == 200 and good.headers["X-Content-Type-Options"] == "nosniff"
    assert requests.get(base + "/nope", verify=ca, timeout=10).status_code == 401  # no path probing
    # the kubelet's probes carry no credentials and need none
    assert requests.get(base + "/healthz", verify=ca, timeout=10).text == "ok\n"
    assert requests.get(base + "/readyz", verify=ca, timeout=10).status_code == 200
    with pytest.raises(requests.exceptions.SSLError):  # an unknown CA is refused by the client
        requests.get(base + "/healthz", timeout=10)


def test_the_controller_endpoint_takes_the_same_config(pki: Pki) -> None:
    server = MetricsServer(lambda: b"up_metric 1\n", lambda: (True, "ok"), 0, "127.0.0.1",
                           web_config=load_web_config(pki.web_config())).start()
    try:
        base, ca = f"https://127.0.0.1:{server.port}", str(pki.ca.cert)
        assert requests.get(base + "/metrics", verify=ca, timeout=10).status_code == 401
        answer = requests.get(base + "/metrics", auth=("prometheus", PASSWORD), verify=ca, timeout=10)
        assert answer.status_code == 200 and answer.text == "up_metric 1\n"
        assert requests.get(base + "/healthz", verify=ca, timeout=10).text == "ok\n"
    finally:
        server.stop()


def test_certificates_are_reloaded_without_a_restart(pki: Pki, servers: list[ExporterServer]) -> None:
    base = exporter(servers, pki.web_config())
    port = int(base.rsplit(":", 1)[1])
    first = served_serial(port, pki.ca.cert)
    assert served_serial(port, pki.ca.cert) == first
    rotated = pki.ca.issue("server", stem="rotated")
    os.replace(rotated.key, pki.server.key)  # key first: a handshake in between keeps the old pair
    os.replace(rotated.cert, pki.server.cert)
    second = served_serial(port, pki.ca.cert)
    assert second != first
    ca = str(pki.ca.cert)
    assert requests.get(base + "/metrics", auth=("prometheus", PASSWORD), verify=ca, timeout=10).ok


def test_a_broken_rotation_keeps_the_previous_certificate(pki: Pki, servers: list[ExporterServer],
                                                          caplog: pytest.LogCaptureFixture) -> None:
    base = exporter(servers, pki.web_config())
    port = int(base.rsplit(":", 1)[1])
    first = served_serial(port, pki.ca.cert)
    pki.server.key.write_text("not a key\n")
    with caplog.at_level(logging.WARNING, "plumbing.web.tls"):
        assert served_serial(port, pki.ca.cert) == first
        assert served_serial(port, pki.ca.cert) == first
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "serving the previous certificate" in warnings[0].getMessage()


# A client certificate from another CA fails the server's TLS 1.3 handshake once the client thinks it is done;
# asyncio's TLS layer then drops that connection's transport unclosed, to the garbage collector (the
# ResourceWarning of CPython's asyncio/sslproto.py, python/cpython#90476 and relatives): the socket is closed
# by the collector. The test collects at its end, inside this filter, so the warning cannot land on another.
@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
@pytest.mark.parametrize("mode", ["RequireAndVerifyClientCert", "VerifyClientCertIfGiven"])
def test_client_certificates(pki: Pki, servers: list[ExporterServer], mode: str) -> None:
    extra = f"  client_auth_type: {mode}\n  client_ca_file: {pki.ca.cert.name}\n"
    base = exporter(servers, pki.web_config(extra, users=False))
    ca, mine = str(pki.ca.cert), (str(pki.client.cert), str(pki.client.key))
    assert requests.get(base + "/metrics", cert=mine, verify=ca, timeout=10).status_code == 200
    (pki.root / "other").mkdir()
    stranger = TestCA(pki.root / "other", "other-ca")
    theirs = stranger.issue("intruder", server=False)
    with pytest.raises(requests.exceptions.RequestException):  # a certificate from another CA: never
        requests.get(base + "/metrics", cert=(str(theirs.cert), str(theirs.key)), verify=ca, timeout=10)
    if mode == "RequireAndVerifyClientCert":
        with pytest.raises(requests.exceptions.RequestException):
            requests.get(base + "/healthz", verify=ca, timeout=10)
        port = int(base.rsplit(":", 1)[1])
        socket.create_connection(("127.0.0.1", port), timeout=5).close()  # what a tcpSocket probe checks
    else:  # the kubelet presents no certificate: its HTTPS probe passes
        assert requests.get(base + "/healthz", verify=ca, timeout=10).text == "ok\n"
    gc.collect()  # the dropped transport of the refused handshake, while the filter above applies


def test_the_web_config_file_is_re_read_when_it_changes(pki: Pki, servers: list[ExporterServer]) -> None:
    web = pki.web_config()
    base, ca = exporter(servers, web), str(pki.ca.cert)
    assert requests.get(base + "/metrics", auth=("prometheus", PASSWORD), verify=ca, timeout=10).ok
    grafana = f"basic_auth_users:\n  grafana: '{bcrypt_hash('g')}'\n"
    text = web.read_text().replace("basic_auth_users:\n", grafana)
    web.write_text(text.replace("nosniff", "nosniff-v2"))
    answer = requests.get(base + "/metrics", auth=("grafana", "g"), verify=ca, timeout=10)
    assert answer.status_code == 200 and answer.headers["X-Content-Type-Options"] == "nosniff-v2"
    web.write_text("basic_auth_users: [broken\n")  # an invalid edit: the previous settings stay
    assert requests.get(base + "/metrics", auth=("grafana", "g"), verify=ca, timeout=10).status_code == 200
    assert requests.get(base + "/metrics", verify=ca, timeout=10).status_code == 401


def test_plain_http_to_the_tls_port_is_refused_quietly(pki: Pki, servers: list[ExporterServer],
                                                       caplog: pytest.LogCaptureFixture) -> None:
    base = exporter(servers, pki.web_config())
    with caplog.at_level(logging.DEBUG):
        with pytest.raises(requests.exceptions.ConnectionError):
            requests.get(base.replace("https", "http") + "/healthz", timeout=10)
        assert requests.get(base + "/healthz", verify=str(pki.ca.cert), timeout=10).status_code == 200
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING or r.exc_info]
