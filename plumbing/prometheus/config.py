"""The Prometheus connections file (`--prometheus-config`): named endpoints with Prometheus' http_config.

Platform Prometheus rarely answers anonymous plain HTTP: OpenShift's thanos-querier wants a ServiceAccount
token and the service CA, Mimir and Cortex want a tenant header, managed services want TLS and tokens. Users
already write that for Prometheus (scrape configs, `promtool --http.config.file`), so each endpoint takes
the same keys with the same meaning. The file is read once, every problem reported together as
`file:line: field: message`; the files it names (tokens, passwords, certificates) are re-read at query time by
`session`, so only their paths are checked here. Secrets read from the file itself never reach a message.
"""

from __future__ import annotations

import re
import urllib.parse
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from yaml.nodes import Node, ScalarNode

from plumbing.problems import Problem
from plumbing.prometheus.errors import PrometheusClientError
from plumbing.yamlnodes import ANY_KEY, NodeReader, describe, line_of
from plumbing.yamlsafe import YamlFileError, compose_file

DEFAULT_ENDPOINT = "default"
TLS_VERSIONS = ("TLS10", "TLS11", "TLS12", "TLS13")
_NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,62}")
_HEADER_NAME_RE = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")
_RESERVED_HEADERS = frozenset(h.lower() for h in (
    "Authorization", "Host", "Content-Encoding", "Content-Length", "Content-Type", "User-Agent", "Connection",
    "Keep-Alive", "Proxy-Authenticate", "Proxy-Authorization", "Www-Authenticate", "Accept-Encoding",
    "Transfer-Encoding", "Upgrade", "TE", "Trailer",
))
# Keys of Prometheus' http_config this client does not implement: refused by name, not as "unknown".
_UNSUPPORTED = {
    "oauth2": "OAuth 2 client credentials", "bearer_token": "use authorization.credentials",
    "bearer_token_file": "use authorization.credentials_file", "no_proxy": "not implemented",
    "proxy_from_environment": "not implemented", "proxy_connect_header": "not implemented",
    "sigv4": "not implemented", "enable_http2": "this client speaks HTTP/1.1 only",
}
_ENDPOINT_FIELDS = {"url", "basic_auth", "authorization", "tls_config", "proxy_url", "http_headers",
                    "follow_redirects", *_UNSUPPORTED}


class PrometheusConfigError(PrometheusClientError):
    """The connections file (or a --prometheus URL) is invalid; carries every problem found."""

    def __init__(self, problems: list[Problem]) -> None:
        self.problems = tuple(problems)
        lines = (str(p) if p.line or p.field == "file" else f"{p.file}: {p.field}: {p.message}"
                 for p in self.problems)
        super().__init__("\n".join(lines))


@dataclass(frozen=True)
class Secret:
    """A value written inline or the path of a file holding it (re-read when it changes)."""

    value: str | None = field(default=None, repr=False)
    file: str | None = None


@dataclass(frozen=True)
class BasicAuth:
    username: Secret
    password: Secret


@dataclass(frozen=True)
class Authorization:
    type: str
    credentials: Secret


@dataclass(frozen=True)
class TlsConfig:
    ca_file: str | None = None
    cert_file: str | None = None
    key_file: str | None = None
    server_name: str | None = None
    insecure_skip_verify: bool = False
    min_version: str = "TLS12"
    """Prometheus' default too."""


@dataclass(frozen=True)
class Header:
    """One request header: every value, secret and file's content, joined with ', ' as HTTP allows."""

    name: str
    values: tuple[str, ...] = ()
    secrets: tuple[str, ...] = field(default=(), repr=False)
    files: tuple[str, ...] = ()


@dataclass(frozen=True)
class Endpoint:
    """One Prometheus (or Thanos, Mimir, Cortex, VictoriaMetrics) query endpoint and how to reach it."""

    name: str
    url: str
    """Base URL without userinfo, path prefix kept, no trailing slash: queries go to `url + /api/v1/query`."""
    display_url: str
    """`url` as shown in logs, errors and CLI output: a password written into the URL shows as ***."""
    basic_auth: BasicAuth | None = None
    authorization: Authorization | None = None
    tls: TlsConfig = TlsConfig()
    proxy_url: str | None = field(default=None, repr=False)
    proxy_display: str | None = None
    headers: tuple[Header, ...] = ()
    follow_redirects: bool = True


@dataclass(frozen=True)
class PrometheusConfig:
    path: str
    endpoints: Mapping[str, Endpoint]


def redact_url(url: str) -> str:
    """`url` with any password replaced by *** (the user name stays, it helps and is not a secret).

    The user information is read as a browser reads it, without parsing the URL: everything between `://`
    (or the start) and the last `@`. So a password holding `#`, `/`, `?`, `:` or `@`, which a URL parser
    splits elsewhere, is hidden whole, and so is one in a URL that does not parse at all."""
    scheme, separator, rest = url.partition("://")
    if not separator or scheme.lower() not in ("http", "https"):
        # `user://pw@host` (a password starting with //) reads as scheme `user`: anything but http(s) before
        # `://` may be user information, so it is read as such and its password hidden
        scheme, separator, rest = "", "", url
    at = rest.rfind("@")
    if at < 0:
        return url
    user, colon, _password = rest[:at].partition(":")
    if not colon:
        return url
    return f"{scheme}{separator}{user}:***@{rest[at + 1:]}"


def _split_url(url: str) -> tuple[str, str | None, str | None, str | None]:
    """(url without userinfo, username, password, problem)."""
    try:
        parts = urllib.parse.urlsplit(url.strip())
        parts.port  # noqa: B018 - raises ValueError on a bad port
    except ValueError:  # its message quotes the parts it split, a password's piece among them
        return url, None, None, (f"not a valid URL ({redact_url(url)!r}: a port that is not a number, or a "
                                 "password holding '/', '?' or '#', which must be percent-encoded)")
    if parts.scheme not in ("http", "https"):
        if "://" not in url:  # host:port reads as scheme 'host': say what to write instead
            shown = redact_url(f"http://{url.strip()}")  # user:password@host reads as scheme 'user' too
            return url, None, None, (f"expected an http:// or https:// URL (got no scheme in "
                                     f"{shown.removeprefix('http://')!r}; write {shown!r})")
        return url, None, None, (f"expected an http:// or https:// URL (got scheme {parts.scheme!r}: "
                                 f"{redact_url(url)!r})")
    if not parts.hostname:
        return url, None, None, f"expected a host name in the URL (got {redact_url(url)!r})"
    if url.strip().partition("://")[2].count("@") != parts.netloc.count("@"):
        # `user:pa/ss@host` parses as host `user` and a path holding the password: never send it anywhere
        return url, None, None, (f"not a valid URL ({redact_url(url)!r}: an '@' after the host; a password "
                                 "holding '/', '?' or '#' must be percent-encoded)")
    if parts.query or parts.fragment:
        return url, None, None, "expected no ?query or #fragment in the URL"
    netloc = parts.netloc.rsplit("@", 1)[-1]
    clean = urllib.parse.urlunsplit((parts.scheme, netloc, parts.path.rstrip("/"), "", ""))
    user = urllib.parse.unquote(parts.username) if parts.username else None
    password = urllib.parse.unquote(parts.password) if parts.password is not None else None
    return clean, user, password, None


def endpoint_from_url(url: str, name: str = DEFAULT_ENDPOINT, source: str = "--prometheus") -> Endpoint:
    """The endpoint of a plain URL (`--prometheus`): `https://user:pass@host` is taken as basic auth."""
    clean, user, password, problem = _split_url(url)
    if problem:
        raise PrometheusConfigError([Problem(source, 0, "url", problem)])
    auth = BasicAuth(Secret(user), Secret(password or "")) if user is not None else None
    return Endpoint(name, clean, redact_url(url.strip()).rstrip("/"), basic_auth=auth)


def single_endpoint(url: str) -> PrometheusConfig:
    return PrometheusConfig("--prometheus", {DEFAULT_ENDPOINT: endpoint_from_url(url)})


def endpoints_of(url: str | None, config_file: str | None) -> PrometheusConfig | None:
    """The endpoints of `--prometheus-config FILE` if given, else of `--prometheus URL` (None: neither)."""
    if config_file:
        return load_prometheus_config(config_file)
    return single_endpoint(url) if url else None


def load_prometheus_config(path: str | Path) -> PrometheusConfig:
    """Read and validate the connections file; raises PrometheusConfigError listing every problem."""
    name = str(path)
    try:
        root = compose_file(path, what="Prometheus connections file")
    except YamlFileError as exc:
        raise PrometheusConfigError([Problem(name, exc.line, "file", exc.message)]) from exc
    if root is None:
        raise PrometheusConfigError([Problem(name, 1, "endpoints",
                                             "the file is empty (expected 'endpoints:')")])
    reader = NodeReader(name)
    base = Path(path).parent
    endpoints: dict[str, Endpoint] = {}
    top = reader.mapping(root, "", {"endpoints"}, required=("endpoints",))
    if top is not None and "endpoints" in top:
        items = reader.mapping(top["endpoints"], "endpoints", ANY_KEY)
        if items is not None and not items:
            reader.problem(line_of(top["endpoints"]), "endpoints", "expected at least one endpoint")
        for key, node in (items or {}).items():
            where = f"endpoints.{key}"
            if not _NAME_RE.fullmatch(key):
                reader.problem(line_of(node), where, "expected an endpoint name of letters, digits, '-', '_' "
                               f"or '.' (got {key!r})")
                continue
            endpoint = _endpoint(_Reader(reader, base), key, node, where)
            if endpoint is not None:
                endpoints[key] = endpoint
    if reader.problems:
        raise PrometheusConfigError(sorted(reader.problems, key=lambda p: p.line))
    return PrometheusConfig(name, endpoints)


@dataclass
class _Reader:
    nodes: NodeReader
    base: Path

    def problem(self, node: Node, where: str, message: str) -> None:
        self.nodes.problem(line_of(node), where, message)

    def boolean(self, node: Node, where: str) -> bool | None:
        if isinstance(node, ScalarNode) and node.tag.endswith(":bool"):
            return str(node.value).lower() in ("true", "yes", "on")
        self.problem(node, where, f"expected true or false (got {describe(node)})")
        return None

    def path(self, node: Node, where: str) -> str | None:
        """A file path, relative ones resolved against the config file's directory as Prometheus does."""
        text = self.nodes.string(node, where)
        if text is None:
            return None
        return str(self.base / text) if not Path(text).is_absolute() else text

    def strings(self, node: Node, where: str) -> tuple[str, ...]:
        items = self.nodes.sequence(node, where) or []
        values = [self.nodes.string(item, f"{where}[{i}]") for i, item in enumerate(items)]
        return tuple(v for v in values if v is not None)


def _endpoint(r: _Reader, name: str, node: Node, where: str) -> Endpoint | None:
    before = len(r.nodes.problems)
    fields = r.nodes.mapping(node, where, _ENDPOINT_FIELDS, required=("url",))
    if fields is None:
        return None
    for key in sorted(set(fields) & set(_UNSUPPORTED)):
        r.problem(fields[key], f"{where}.{key}", f"not supported by gpu-autoscaler ({_UNSUPPORTED[key]})")
    url = display = user = password = None
    if "url" in fields:
        text = r.nodes.string(fields["url"], f"{where}.url")
        if text is not None:
            url, user, password, problem = _split_url(text)
            display = redact_url(text.strip()).rstrip("/")
            if problem:
                r.problem(fields["url"], f"{where}.url", problem)
    basic = _basic_auth(r, fields["basic_auth"], f"{where}.basic_auth") if "basic_auth" in fields else None
    if user is not None:
        if basic is not None:
            r.problem(fields["url"], f"{where}.url", "a user in the URL and basic_auth: give only one")
        basic = BasicAuth(Secret(user), Secret(password or ""))
    auth = None
    if "authorization" in fields:
        auth = _authorization(r, fields["authorization"], f"{where}.authorization")
        if basic is not None:
            r.problem(fields["authorization"], f"{where}.authorization",
                      "basic_auth and authorization are mutually exclusive (as in Prometheus)")
    tls = _tls(r, fields["tls_config"], f"{where}.tls_config") if "tls_config" in fields else TlsConfig()
    proxy = proxy_display = None
    if "proxy_url" in fields:
        text = r.nodes.string(fields["proxy_url"], f"{where}.proxy_url")
        if text is not None:
            _, _, _, problem = _split_url(text)
            if problem:
                r.problem(fields["proxy_url"], f"{where}.proxy_url", problem)
            proxy, proxy_display = text.strip(), redact_url(text.strip())
    headers = _headers(r, fields["http_headers"], f"{where}.http_headers") if "http_headers" in fields else ()
    follow = True
    if "follow_redirects" in fields:
        follow = bool(r.boolean(fields["follow_redirects"], f"{where}.follow_redirects"))
    if len(r.nodes.problems) > before or url is None or display is None:
        return None
    return Endpoint(name, url, display, basic, auth, tls, proxy, proxy_display, headers, follow)


def _secret(r: _Reader, fields: dict[str, Node], key: str, where: str, required: bool,
            node: Node) -> Secret | None:
    """`key` or `key_file` (never both)."""
    inline, path_key = fields.get(key), fields.get(f"{key}_file")
    if inline is not None and path_key is not None:
        r.problem(path_key, f"{where}.{key}_file", f"{key} and {key}_file are mutually exclusive")
        return None
    if inline is not None:
        if not isinstance(inline, ScalarNode) or inline.tag.endswith(":null") or not str(inline.value):
            r.problem(inline, f"{where}.{key}", "expected a non-empty string")  # never echo a secret
            return None
        return Secret(value=str(inline.value))
    if path_key is not None:
        path = r.path(path_key, f"{where}.{key}_file")
        return Secret(file=path) if path is not None else None
    if required:
        r.problem(node, f"{where}.{key}", f"required: give {key} or {key}_file")
        return None
    return Secret()


def _basic_auth(r: _Reader, node: Node, where: str) -> BasicAuth | None:
    keys = {"username", "username_file", "password", "password_file"}
    fields = r.nodes.mapping(node, where, keys)
    if fields is None:
        return None
    user = _secret(r, fields, "username", where, True, node)
    password = _secret(r, fields, "password", where, False, node)
    return BasicAuth(user, password) if user is not None and password is not None else None


def _authorization(r: _Reader, node: Node, where: str) -> Authorization | None:
    fields = r.nodes.mapping(node, where, {"type", "credentials", "credentials_file"})
    if fields is None:
        return None
    type_ = "Bearer"
    if "type" in fields:
        type_ = r.nodes.string(fields["type"], f"{where}.type") or "Bearer"
        if type_.lower() == "basic":
            r.problem(fields["type"], f"{where}.type", "for Basic use basic_auth")
        elif not _HEADER_NAME_RE.fullmatch(type_):  # `Bearer <token>` pasted here: never repeat it
            r.problem(fields["type"], f"{where}.type", "expected an auth scheme alone, such as Bearer (the "
                      "value is not shown: it may hold the token, which belongs in credentials)")
    credentials = _secret(r, fields, "credentials", where, True, node)
    return Authorization(type_, credentials) if credentials is not None else None


def _tls(r: _Reader, node: Node, where: str) -> TlsConfig:
    keys = {"ca_file", "cert_file", "key_file", "server_name", "insecure_skip_verify", "min_version"}
    fields = r.nodes.mapping(node, where, keys)
    if fields is None:
        return TlsConfig()
    paths = {k: r.path(fields[k], f"{where}.{k}") if k in fields else None
             for k in ("ca_file", "cert_file", "key_file")}
    if ("cert_file" in fields) != ("key_file" in fields):
        missing = "key_file" if "cert_file" in fields else "cert_file"
        r.problem(node, f"{where}.{missing}", "cert_file and key_file go together (a client certificate)")
    server_name = r.nodes.string(fields["server_name"], f"{where}.server_name") if "server_name" in fields \
        else None
    insecure = False
    if "insecure_skip_verify" in fields:
        insecure = bool(r.boolean(fields["insecure_skip_verify"], f"{where}.insecure_skip_verify"))
    version = "TLS12"
    if "min_version" in fields:
        version = r.nodes.choice(fields["min_version"], f"{where}.min_version", TLS_VERSIONS) or "TLS12"
    return TlsConfig(paths["ca_file"], paths["cert_file"], paths["key_file"], server_name, insecure, version)


def _headers(r: _Reader, node: Node, where: str) -> tuple[Header, ...]:
    items = r.nodes.mapping(node, where, ANY_KEY)
    headers: list[Header] = []
    seen: set[str] = set()
    for name, value in (items or {}).items():
        at = f"{where}.{name}"
        if not _HEADER_NAME_RE.fullmatch(name):
            r.problem(value, at, "expected an HTTP header name (letters, digits, '-')")
            continue
        if name.lower() in _RESERVED_HEADERS:
            hint = "; use authorization or basic_auth" if name.lower() == "authorization" else ""
            r.problem(value, at, f"{name} is reserved and cannot be set here{hint}")
            continue
        if name.lower() in seen:
            r.problem(value, at, "the same header twice (header names are case-insensitive)")
            continue
        seen.add(name.lower())
        fields = r.nodes.mapping(value, at, {"values", "secrets", "files"})
        if fields is None:
            continue
        values = r.strings(fields["values"], f"{at}.values") if "values" in fields else ()
        secrets: tuple[str, ...] = ()
        if "secrets" in fields:
            secrets = tuple(str(n.value) for n in (r.nodes.sequence(fields["secrets"], f"{at}.secrets") or [])
                            if isinstance(n, ScalarNode) and str(n.value))
        files: tuple[str, ...] = ()
        if "files" in fields:
            found = r.nodes.sequence(fields["files"], f"{at}.files") or []
            files = tuple(p for i, n in enumerate(found) if (p := r.path(n, f"{at}.files[{i}]")) is not None)
        for text in values:
            if any(ord(c) < 32 or ord(c) == 127 for c in text):
                r.problem(fields["values"], f"{at}.values", "a header value cannot hold control characters")
            elif not text.isascii():
                r.problem(fields["values"], f"{at}.values", "a header value must be ASCII (percent- or "
                          "base64-encode it as the server expects)")
        if not (values or secrets or files):
            r.problem(value, at, "expected at least one of values, secrets, files")
            continue
        headers.append(Header(name, values, secrets, files))
    return tuple(headers)


def endpoint_names(config: PrometheusConfig) -> str:
    return ", ".join(sorted(config.endpoints)) or "none"
