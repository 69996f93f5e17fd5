"""The `--web-config-file` format of the Prometheus exporter-toolkit (node_exporter, dcgm-exporter), read into
frozen dataclasses.

Only what is implemented is accepted: an unknown key, or a toolkit key this server does not implement
(`cipher_suites`, `rate_limit`, `http2`, inline `cert`/`key`, ...), is an error naming `file:line: field`, so
a file written for another exporter never silently serves less security than its author asked for. Every
problem in the file is collected and reported together. Certificate and key files are checked by building
the TLS context once at load time (tls.py), so a wrong path or a key that does not match is refused before
the process serves.
"""

from __future__ import annotations

import logging
import os
import re
import threading
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from yaml.nodes import MappingNode, Node, ScalarNode

from plumbing.web.tls import TlsServerConfig, build_context
from plumbing.yamlnodes import ANY_KEY, NodeReader
from plumbing.yamlsafe import YamlFileError, YamlLimits, compose_file, line_of

log = logging.getLogger(__name__)

LIMITS = YamlLimits(max_bytes=256 * 1024)
"""A web config is a few lines; 256 KiB leaves room for thousands of users."""

CLIENT_AUTH_TYPES = ("NoClientCert", "VerifyClientCertIfGiven", "RequireAndVerifyClientCert")
UNVERIFIED_CLIENT_AUTH = ("RequestClientCert", "RequireAnyClientCert")
"""Go accepts a client certificate without verifying it; Python's ssl cannot, so these are refused."""
TLS_VERSIONS = ("TLS10", "TLS11", "TLS12", "TLS13")
_BCRYPT = re.compile(r"\$2[aby]\$(0[4-9]|[12][0-9]|3[01])\$[./A-Za-z0-9]{53}")  # fullmatch
_TOKEN = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")
RESERVED_HEADERS = frozenset({
    "allow", "authorization", "connection", "content-encoding", "content-length", "content-type", "date",
    "server", "transfer-encoding", "www-authenticate"})
"""Headers the server itself sets per answer; a configured value would contradict them."""
_UNSUPPORTED = {
    "tls_server_config": ("cert", "key", "client_ca", "cipher_suites", "curve_preferences",
                          "prefer_server_cipher_suites", "client_allowed_sans"),
    "http_server_config": ("http2",),
    "": ("rate_limit",),
}


class WebConfigError(Exception):
    """A web config file that cannot be used: every problem, one per line, as `file:line: field: message`."""


@dataclass(frozen=True)
class WebConfig:
    """One file's settings. `tls` None: plain HTTP; `users` empty: no basic auth."""

    path: Path
    tls: TlsServerConfig | None = None
    users: Mapping[str, bytes] = field(default_factory=dict)
    """user name -> bcrypt hash."""
    headers: Mapping[str, str] = field(default_factory=dict)
    """Added to every answer."""


class _Reader(NodeReader):
    """The shared reader, plus what a web config needs: messages at a node, and certificate files."""

    def at(self, node: Node, where: str, message: str) -> None:
        self.problem(line_of(node), where, message)

    def keys(self, node: Node, where: str, known: Collection[str] = ANY_KEY) -> dict[str, Node]:
        return self.mapping(node, where, known, unsupported=_UNSUPPORTED.get(where, ())) or {}

    def file(self, node: Node, where: str, base: Path) -> Path | None:
        value = self.string(node, where)
        if value is None:
            return None
        path = base / value  # relative paths are relative to the web config file, as in the toolkit
        if not path.is_file():
            self.at(node, where, f"no such file: {value}")
            return None
        return path


def load_web_config(path: str | Path) -> WebConfig:
    """Read and validate the file; raises WebConfigError listing every problem."""
    name = str(path)
    try:
        root = compose_file(path, LIMITS, what="web config file")
    except YamlFileError as exc:
        raise WebConfigError(str(exc)) from exc
    if root is None:
        return WebConfig(Path(path))  # an empty file: plain HTTP, no auth, as in the toolkit
    reader = _Reader(name)
    top = reader.keys(root, "", ("tls_server_config", "basic_auth_users", "http_server_config"))
    base = Path(path).parent
    tls = _tls(reader, top["tls_server_config"], base) if "tls_server_config" in top else None
    users = _users(reader, top["basic_auth_users"]) if "basic_auth_users" in top else {}
    headers: dict[str, str] = {}
    if "http_server_config" in top:
        server = reader.keys(top["http_server_config"], "http_server_config", ("headers",))
        if "headers" in server:
            headers = _headers(reader, server["headers"])
    if reader.problems:
        raise WebConfigError("\n".join(str(problem) for problem in reader.problems))
    config = WebConfig(Path(path), tls, users, headers)
    if tls is not None:
        try:
            build_context(tls)
        except ValueError as exc:
            line = line_of(top["tls_server_config"])
            raise WebConfigError(f"{name}:{line}: tls_server_config: {exc}") from exc
    return config


def _tls(reader: _Reader, node: Node, base: Path) -> TlsServerConfig | None:
    where = "tls_server_config"
    keys = reader.keys(node, where, ("cert_file", "key_file", "client_auth_type", "client_ca_file",
                                     "min_version", "max_version"))
    for required in ("cert_file", "key_file"):
        if required not in keys and isinstance(node, MappingNode):
            reader.at(node, f"{where}.{required}", "required when tls_server_config is given")
    cert = reader.file(keys["cert_file"], f"{where}.cert_file", base) if "cert_file" in keys else None
    key = reader.file(keys["key_file"], f"{where}.key_file", base) if "key_file" in keys else None
    auth = "NoClientCert"
    if "client_auth_type" in keys:
        node_auth = keys["client_auth_type"]
        if isinstance(node_auth, ScalarNode) and node_auth.value in UNVERIFIED_CLIENT_AUTH:
            reader.at(node_auth, f"{where}.client_auth_type",
                           f"{node_auth.value} (a certificate taken without verifying it) is not supported; "
                           "use VerifyClientCertIfGiven or RequireAndVerifyClientCert")
        auth = reader.choice(node_auth, f"{where}.client_auth_type", CLIENT_AUTH_TYPES) or auth
    ca = reader.file(keys["client_ca_file"], f"{where}.client_ca_file", base) if "client_ca_file" in keys \
        else None
    if auth != "NoClientCert" and "client_ca_file" not in keys:
        reader.at(node, f"{where}.client_ca_file", f"required with client_auth_type {auth}")
    if auth == "NoClientCert" and "client_ca_file" in keys:
        reader.at(keys["client_ca_file"], f"{where}.client_ca_file",
                       "given without a client_auth_type that verifies client certificates")
    low, high = (reader.choice(keys[k], f"{where}.{k}", TLS_VERSIONS) if k in keys else None
                 for k in ("min_version", "max_version"))
    if low and high and TLS_VERSIONS.index(low) > TLS_VERSIONS.index(high):
        reader.at(keys["max_version"], f"{where}.max_version", f"{high} is older than min_version {low}")
    if cert is None or key is None:
        return None
    return TlsServerConfig(cert, key, auth, ca, low or "TLS12", high)


def _users(reader: _Reader, node: Node) -> dict[str, bytes]:
    users: dict[str, bytes] = {}
    for name, value in reader.keys(node, "basic_auth_users").items():
        where = f"basic_auth_users.{name}"
        if ":" in name or not name.isprintable():
            reader.at(value, where, "a user name cannot contain ':' or control characters")
        hashed = reader.string(value, where)
        if hashed is not None and hashed != hashed.strip() and _BCRYPT.fullmatch(hashed.strip()):
            # a YAML block scalar (`|`) keeps the line's end: the hash would match no password, silently
            reader.at(value, where, "the hash ends (or starts) with a line break or spaces, so no password "
                      "matches it; write it on one line, or use a block scalar with `|-`")
        elif hashed is not None and not _BCRYPT.fullmatch(hashed):
            reader.at(value, where, "expected a bcrypt hash ($2y$10$... from htpasswd -nBC 10 USER)")
        elif hashed is not None:
            users[name] = hashed.encode("ascii")
    return users


def _headers(reader: _Reader, node: Node) -> dict[str, str]:
    headers: dict[str, str] = {}
    for name, value in reader.keys(node, "http_server_config.headers").items():
        where = f"http_server_config.headers.{name}"
        text = reader.string(value, where)
        if not _TOKEN.fullmatch(name):
            reader.at(value, where, "not a valid header name")
        elif name.lower() in RESERVED_HEADERS:
            reader.at(value, where, "set by the server itself; cannot be configured")
        elif text is not None and not all(ch == "\t" or " " <= ch <= "~" for ch in text):
            reader.at(value, where, "a header value must be printable ASCII on one line")
        elif text is not None:
            headers[name] = text
    return headers


class WebConfigFile:
    """The web config, re-read when its file changes (one `stat` per request): users and headers apply at
    once; a changed tls_server_config needs a restart (the certificate files themselves reload, tls.py). A
    file that became invalid is logged once and the previous settings stay."""

    def __init__(self, config: WebConfig) -> None:
        self._config = config
        self._signature = _stat(config.path)
        self._lock = threading.Lock()

    def current(self) -> WebConfig:
        signature = _stat(self._config.path)
        if signature == self._signature:
            return self._config
        with self._lock:
            if signature == self._signature:
                return self._config
            self._signature = signature
            try:
                fresh = load_web_config(self._config.path)
            except WebConfigError as exc:
                log.warning("web config file changed but is invalid; keeping the previous settings:\n%s", exc)
                return self._config
            if fresh.tls != self._config.tls:
                log.warning("web config file %s: tls_server_config changed; restart to apply it (users and "
                            "headers are applied now)", fresh.path)
                fresh = WebConfig(fresh.path, self._config.tls, fresh.users, fresh.headers)
            log.info("web config file %s reloaded", fresh.path)
            self._config = fresh
            return fresh


def _stat(path: Path) -> tuple[int, int, int]:
    try:
        st = os.stat(path)
    except OSError:
        return (0, 0, 0)
    return (st.st_mtime_ns, st.st_size, st.st_ino)
