"""The web config reader (exporter-toolkit format): every mistake is one line naming file:line: field, and a
bad file stops both CLIs with exit 2 before serving. Basic-auth parsing and its verification cache."""

from __future__ import annotations

import tempfile
from pathlib import Path

import bcrypt
import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from exporter.cli import main as exporter_main
from plumbing.web import WebConfigError, load_web_config
from plumbing.web.auth import DEFAULT_COST, BasicAuth, bcrypt_check, cost, credentials, dummy_hash

HASH = bcrypt.hashpw(b"pw", bcrypt.gensalt(4)).decode()


def write(tmp_path: Path, text: str) -> Path:
    for name in ("server.crt", "server.key"):
        (tmp_path / name).write_text("placeholder\n")
    path = tmp_path / "web.yml"
    path.write_text(text)
    return path


TLS = "tls_server_config:\n  cert_file: server.crt\n  key_file: server.key\n"


@pytest.mark.parametrize(("text", "expected"), [
    ("tls_server_confg: {}\n", "web.yml:1: tls_server_confg: unknown field (expected one of: "
     "basic_auth_users, http_server_config, tls_server_config); did you mean 'tls_server_config'?"),
    ("rate_limit: {interval: 1s}\n", "web.yml:1: rate_limit: not supported by this server"),
    (TLS + "  cipher_suites: [TLS_AES_128_GCM_SHA256]\n",
     "web.yml:4: tls_server_config.cipher_suites: not supp"),
    ("tls_server_config:\n  cert_file: nope.crt\n  key_file: server.key\n",
     "web.yml:2: tls_server_config.cert_file: no such file: nope.crt"),
    ("tls_server_config:\n  key_file: server.key\n", "web.yml:2: tls_server_config.cert_file: required"),
    (TLS + "  client_auth_type: RequireAnyClientCert\n",
     "web.yml:4: tls_server_config.client_auth_type: RequireAnyClientCert (a certificate taken without"),
    (TLS + "  client_auth_type: RequireAndVerifyClientCert\n",
     "web.yml:2: tls_server_config.client_ca_file: required with client_auth_type RequireAndVerify"),
    (TLS + "  min_version: TLS14\n", "web.yml:4: tls_server_config.min_version: expected one of TLS10, "),
    (TLS + "  min_version: TLS13\n  max_version: TLS12\n",
     "web.yml:5: tls_server_config.max_version: TLS12 is"),
    ("basic_auth_users:\n  alice: secret\n", "web.yml:2: basic_auth_users.alice: expected a bcrypt hash"),
    (f"basic_auth_users:\n  'a:b': '{HASH}'\n", "web.yml:2: basic_auth_users.a:b: a user name cannot"),
    ("http_server_config:\n  headers:\n    Content-Type: x\n",
     "web.yml:3: http_server_config.headers.Content-Type: set by the server itself"),
    ("http_server_config:\n  http2: false\n", "web.yml:2: http_server_config.http2: not supported"),
    ("basic_auth_users: [\n", "web.yml:2: not valid YAML"),
    (TLS, "web.yml:2: tls_server_config: cannot load cert_file server.crt with key_file server.key: not a "
          "readable PEM certificate or key"),
], ids=["typo", "rate-limit", "cipher-suites", "missing-file", "no-cert", "unverified-client-cert", "no-ca",
        "bad-version", "versions-reversed", "plain-password", "colon-user", "reserved-header", "http2",
        "bad-yaml", "unusable-cert"])
def test_a_bad_file_names_file_line_and_field(tmp_path: Path, text: str, expected: str) -> None:
    with pytest.raises(WebConfigError) as caught:
        load_web_config(write(tmp_path, text))
    assert expected in str(caught.value)
    assert str(caught.value).startswith(str(tmp_path / "web.yml"))


def test_every_problem_is_reported_together(tmp_path: Path) -> None:
    with pytest.raises(WebConfigError) as caught:
        load_web_config(write(tmp_path, "basic_auth_users:\n  a: x\n  b: y\nextra: 1\n"))
    assert len(str(caught.value).splitlines()) == 3


def test_users_and_headers_are_read(tmp_path: Path) -> None:
    config = load_web_config(write(tmp_path, f"basic_auth_users:\n  alice: '{HASH}'\n"
                                             "http_server_config:\n  headers:\n    X-Frame-Options: deny\n"))
    assert config.tls is None and dict(config.headers) == {"X-Frame-Options": "deny"}
    assert config.users == {"alice": HASH.encode()}
    assert load_web_config(write(tmp_path, "")).users == {}  # an empty file: plain HTTP, as in the toolkit


def test_the_exporter_cli_exits_2_with_one_message(tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    path = write(tmp_path, "basic_auth_users:\n  alice: plain-text\n")
    assert exporter_main(["--simulate", "1", "--port", "0", "--web-config-file", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.splitlines() == [f"gpu-exporter: error: {path}:2: basic_auth_users.alice: expected a bcrypt "
                                "hash ($2y$10$... from htpasswd -nBC 10 USER)"]
    assert "plain-text" not in err and "Traceback" not in err


@pytest.mark.parametrize(("header", "expected"), [
    ("Basic YWxpY2U6cHc=", ("alice", "pw")),
    ("basic YWxpY2U6cDp3", ("alice", "p:w")),
    ("Bearer abc", None), ("Basic !!!", None), ("Basic YWxpY2U=", None), (None, None), ("Basic /w==", None),
], ids=["basic", "colon-in-password", "bearer", "not-base64", "no-colon", "absent", "not-utf8"])
def test_credentials(header: str | None, expected: tuple[str, str] | None) -> None:
    assert credentials(header) == expected


def test_a_success_is_cached_and_a_failure_never() -> None:
    auth, users = BasicAuth(), {"alice": HASH.encode()}
    assert not auth.cached(users, "alice", "pw")
    assert not auth.verify(users, "alice", "wrong") and not auth.cached(users, "alice", "wrong")
    assert not auth.verify(users, "bob", "pw")  # unknown user: checked against the dummy hash, refused
    assert auth.verify(users, "alice", "pw") and auth.cached(users, "alice", "pw")
    other = {"alice": bcrypt.hashpw(b"pw", bcrypt.gensalt(4))}
    assert not auth.cached(other, "alice", "pw")  # a new hash in the file forgets the old success
    assert not auth.verify(users, "alice", "pw" + "x" * 80)  # beyond bcrypt's 72 bytes: refused


@settings(max_examples=50, deadline=None)
@given(padding=st.sampled_from(["\n", " ", "\t", "\r\n", "\n\n"]), before=st.booleans())
def test_a_hash_with_a_line_break_or_spaces_is_refused_saying_so(padding: str, before: bool) -> None:
    """Pasted as a YAML block (`|`), a hash ends in a newline: it would lock every user out without a word."""
    good = "$2y$10$" + "a" * 53
    hashed = padding + good if before else good + padding
    with tempfile.TemporaryDirectory() as scratch:
        path = Path(scratch) / "web.yml"
        path.write_text(yaml.safe_dump({"basic_auth_users": {"prometheus": hashed}}))
        with pytest.raises(WebConfigError) as info:
            load_web_config(path)
    expected = "basic_auth_users.prometheus: the hash ends (or starts) with a line break or spaces"
    assert expected in str(info.value)


class CountingCheck:
    """bcrypt's own check through BasicAuth's seam, recording the cost of every hash it is asked about."""

    def __init__(self) -> None:
        self.costs: list[int] = []

    def __call__(self, password: bytes, hashed: bytes) -> bool:
        self.costs.append(cost(hashed))
        return bcrypt_check(password, hashed)


LOW, MIDDLE, HIGH = (bcrypt.hashpw(b"right", bcrypt.gensalt(rounds=rounds)) for rounds in (4, 5, 7))


@pytest.mark.parametrize(("user", "password", "checked", "ok"), [
    ("nobody", "right", [7], False),  # the dummy of the highest cost in the file
    ("high", "wrong", [7], False),
    ("middle", "wrong", [5, 5, 6], False),  # its own hash, then dummies: 2^5 + 2^5 + 2^6 = 2^7
    ("low", "wrong", [4, 4, 5, 6], False),
    ("low", "right" + "x" * 80, [4, 4, 5, 6], False),  # past bcrypt's 72 bytes: a failure, padded too
    ("low", "right", [4], True),  # a success is not padded
    ("middle", "right", [5], True),
], ids=["unknown", "highest", "middle", "lowest", "too-long", "low-success", "middle-success"])
def test_every_failed_check_costs_the_highest_cost_in_the_file(user: str, password: str, checked: list[int],
                                                                ok: bool) -> None:
    """With one dummy of the highest cost for an unknown user alone, a user of a lower cost answered 4-49
    times faster than an unknown one: a failure now does bcrypt work of 2^highest whoever the user is."""
    check = CountingCheck()
    assert BasicAuth(check).verify({"low": LOW, "middle": MIDDLE, "high": HIGH}, user, password) is ok
    assert check.costs == checked
    if not ok:
        assert sum(2 ** rounds for rounds in check.costs) == 2 ** 7


def test_without_users_the_dummy_has_bcrypts_default_cost() -> None:
    check = CountingCheck()
    assert not BasicAuth(check).verify({}, "nobody", "x")
    assert check.costs == [DEFAULT_COST]
    assert not bcrypt_check(b"", dummy_hash(4)) and dummy_hash(4) != dummy_hash(5)  # well-formed, unmatched
