"""Credentials with characters beyond ASCII, and CA files of noise: a clear answer naming the field or the
file, never a UnicodeEncodeError or a TypeError. A real HTTP server on 127.0.0.1 records what arrives."""

from __future__ import annotations

import base64
import json
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from plumbing.prometheus.config import load_prometheus_config
from plumbing.prometheus.errors import PrometheusClientError
from plumbing.prometheus.runner import PromQLRunner, PromQLSettings, QueryResult
from tests.support import QuietHandler, http_server

pytestmark = pytest.mark.integration

ANSWER = json.dumps({"status": "success", "data": {"resultType": "vector",
                                                   "result": [{"metric": {}, "value": [1, "1"]}]}}).encode()
SETTINGS = settings(max_examples=25, deadline=None,
                    suppress_health_check=[HealthCheck.function_scoped_fixture])
# Anything a YAML string can hold on one line but quotes and backslashes (kept out of the file's quoting).
ANY_TEXT = st.text(st.characters(blacklist_categories=["Cc", "Cs"], blacklist_characters='"\\'),
                   min_size=1, max_size=30).filter(lambda text: text.strip() == text and ":" not in text[:1])


@pytest.fixture(scope="module")
def server() -> Iterator[tuple[str, list[dict[str, str]]]]:
    seen: list[dict[str, str]] = []

    class Handler(QuietHandler):
        def do_GET(self) -> None:
            seen.append(dict(self.headers.items()))
            self.answer(200, ANSWER)

        do_POST = do_GET

    with http_server(Handler) as url:
        yield url, seen


def query(url: str, endpoint_yaml: str) -> QueryResult:
    with tempfile.TemporaryDirectory() as scratch:
        path = Path(scratch) / "prom.yaml"
        path.write_text(f"endpoints:\n  default:\n    url: {url}\n" + endpoint_yaml, encoding="utf-8")
        config = load_prometheus_config(path)
        runner = PromQLRunner(PromQLSettings(url, query_timeout=5.0, budget=10.0, max_attempts=1),
                              endpoint=config.endpoints["default"])
        try:
            return runner.run_queries(["up"])["up"]
        finally:
            runner.close()


@SETTINGS
@given(user=ANY_TEXT, password=ANY_TEXT)
def test_basic_auth_of_any_characters_is_sent_as_utf8(server: tuple[str, list[dict[str, str]]], user: str,
                                                      password: str) -> None:
    url, seen = server
    result = query(url, f'    basic_auth: {{username: "{user}", password: "{password}"}}\n')
    assert result.value == 1.0, result.error
    token = seen[-1]["Authorization"].removeprefix("Basic ")
    assert base64.b64decode(token).decode("utf-8") == f"{user}:{password}"


@SETTINGS
@given(value=ANY_TEXT.filter(lambda text: not text.isascii()))
def test_a_header_value_beyond_ascii_is_a_config_error_naming_it(value: str) -> None:
    with pytest.raises(PrometheusClientError) as info:
        query("http://127.0.0.1:1", f'    http_headers: {{X-Tenant: {{values: ["{value}"]}}}}\n')
    assert "http_headers.X-Tenant.values: a header value must be ASCII" in str(info.value)


@SETTINGS
@given(token=ANY_TEXT.filter(lambda text: not text.isascii()))
def test_a_bearer_token_beyond_ascii_fails_the_query_naming_the_field(
        server: tuple[str, list[dict[str, str]]], token: str) -> None:
    url, _ = server
    result = query(url, f'    authorization: {{credentials: "{token}"}}\n')
    assert result.value is None and result.error is not None
    assert "authorization.credentials: a header value must be printable ASCII" in result.error
    assert token not in result.error


@pytest.mark.parametrize("noise", [os.urandom(3000), b"\xff" * 100, b"not a certificate\n", b""])
def test_a_ca_file_of_noise_is_one_message_naming_it(server: tuple[str, list[dict[str, str]]], noise: bytes,
                                                     tmp_path: Path) -> None:
    url, _ = server
    ca = tmp_path / "ca.pem"
    ca.write_bytes(noise)
    result = query(url.replace("http://", "https://"), f"    tls_config: {{ca_file: {ca}}}\n")
    assert result.value is None and result.error is not None
    assert str(ca) in result.error and "Traceback" not in result.error
