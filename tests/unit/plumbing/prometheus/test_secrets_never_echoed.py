"""No part of a secret is ever printed: generated passwords and tokens, in every place a user writes them.

A password may hold any character a URL parser splits on (`#`, `/`, `?`, `@`, `:`); whatever the URL then
parses to (an endpoint, or an error naming the URL), neither its display nor the message holds any four
characters of the password. A token pasted into `authorization.type` is refused without being repeated.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from hypothesis import assume, given, settings
from hypothesis import strategies as st

from plumbing.prometheus.config import endpoints_of, load_prometheus_config, redact_url
from plumbing.prometheus.errors import PrometheusClientError

# Upper-case letters (none in the templates, so a 4-character piece with one cannot be there by chance)
# and the characters URL parsers split on.
SECRET_CHARS = st.sampled_from("ABCDEFGHIJKLMNOPQRSTUVWXYZ#/?@:%&=+!$~")
PASSWORDS = st.text(SECRET_CHARS, min_size=6, max_size=40).filter(
    lambda text: sum(ch.isupper() for ch in text) >= 3)
TEMPLATES = ("http://user:{}@prom.example:9090/api", "https://user:{}@prom.example",
             "user:{}@prom.example:9090", "http://user:{}@prom.example:port", "ftp://user:{}@prom.example")


def pieces(secret: str) -> list[str]:
    """Every 4-character piece of the secret holding an upper-case letter: none of them may be printed."""
    return [secret[i:i + 4] for i in range(len(secret) - 3) if any(ch.isupper() for ch in secret[i:i + 4])]


def leaked(secret: str, text: str) -> list[str]:
    return [piece for piece in pieces(secret) if piece in text]


@settings(max_examples=300, deadline=None)
@given(password=PASSWORDS, template=st.sampled_from(TEMPLATES))
def test_a_password_in_a_url_is_never_shown(password: str, template: str) -> None:
    url = template.format(password)
    assume(pieces(password))
    assert leaked(password, redact_url(url)) == []
    try:
        config = endpoints_of(url, None)
    except PrometheusClientError as exc:
        assert leaked(password, str(exc)) == [], str(exc)
    else:
        assert config is not None
        for endpoint in config.endpoints.values():
            assert leaked(password, endpoint.display_url) == [], endpoint.display_url
            assert leaked(password, repr(endpoint)) == [], repr(endpoint)


def test_the_example_of_the_report() -> None:
    """`http://user:SECRET#REST@host` once printed SECRET in its error."""
    try:
        endpoints_of("http://user:SECRET#REST@host", None)
    except PrometheusClientError as exc:
        assert "SECRET" not in str(exc) and "REST" not in str(exc) and "user:***@host" in str(exc)
    else:
        raise AssertionError("a URL with a raw '#' in its password was accepted")


@settings(max_examples=100, deadline=None)
@given(token=st.text(st.sampled_from("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-"),
                     min_size=12, max_size=60).filter(lambda text: sum(ch.isupper() for ch in text) >= 4))
def test_a_token_pasted_into_the_auth_type_is_refused_unrepeated(token: str) -> None:
    with tempfile.TemporaryDirectory() as scratch:
        path = Path(scratch) / "prom.yaml"
        path.write_text("endpoints:\n  default:\n    url: http://prom.example:9090\n"
                        f"    authorization: {{type: 'Bearer {token}', credentials: x}}\n")
        try:
            load_prometheus_config(path)
        except PrometheusClientError as exc:
            message = str(exc)
        else:
            raise AssertionError("an auth type with a space in it was accepted")
    assert "authorization.type" in message and leaked(token, message) == [], message


def test_a_password_starting_with_two_slashes_is_hidden_too() -> None:
    """`user://=AAA@host` reads as the scheme `user`: found by the property test above; the password
    (`//=AAA`) was shown whole."""
    assert redact_url("user://=AAA@prom.example:9090") == "user:***@prom.example:9090"
    try:
        endpoints_of("user://=AAA@prom.example:9090", None)
    except PrometheusClientError as exc:
        assert "=AAA" not in str(exc), str(exc)
