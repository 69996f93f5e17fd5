"""One Prometheus endpoint over HTTP: a requests Session built from its http_config; failures in one line.

requests (with urllib3 under it) does the HTTP; this module adds what Prometheus' Go client does and requests
does not: credentials and header values read from files that are re-read when they change (a projected
ServiceAccount token rotates every hour), a TLS context of our own (only the configured CA, `server_name` for
SNI and the name check, `min_version`, a client certificate) rebuilt when a certificate file changes, and
`describe_failure`, which turns the library's exception chains (long, and holding URLs) into one short line.
"""

from __future__ import annotations

import base64
import contextlib
import os
import re
import socket
import ssl
import threading
import time
import urllib.parse
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import requests
from requests.adapters import HTTPAdapter
from urllib3.exceptions import InsecureRequestWarning, NameResolutionError
from urllib3.util.retry import Retry

from plumbing import deadline
from plumbing.files import read_regular
from plumbing.numbers import ascii_int
from plumbing.prometheus.config import Endpoint, Secret
from plumbing.prometheus.errors import PrometheusClientError

MAX_SECRET_BYTES = 64 * 1024
"""A token, password or header file larger than this is refused (a ServiceAccount token is ~1 KB)."""
MAX_CERT_BYTES = 1024 * 1024
RECHECK_SECONDS = 1.0
"""How often a named file's inode, size and mtime are looked at (Kubernetes swaps mounted files whole)."""
_TLS_VERSIONS = {"TLS10": ssl.TLSVersion.TLSv1, "TLS11": ssl.TLSVersion.TLSv1_1,
                 "TLS12": ssl.TLSVersion.TLSv1_2, "TLS13": ssl.TLSVersion.TLSv1_3}


class CredentialError(PrometheusClientError):
    """A file the endpoint names cannot be used right now: the query fails with this message, not a crash."""


class WatchedFile:
    """A file's content, re-read when its inode, size or mtime changes (looked at once a second at most)."""

    def __init__(self, path: str, what: str, max_bytes: int = MAX_SECRET_BYTES,
                 monotonic: Callable[[], float] = time.monotonic) -> None:
        self.path = path
        self.what = what
        self.max_bytes = max_bytes
        self._monotonic = monotonic
        self._lock = threading.Lock()
        self._checked = -float("inf")
        self._signature: tuple[int, int, int] | None = None
        self._content: bytes | None = None
        self._error: str | None = None

    def read(self) -> tuple[bytes, tuple[int, int, int]]:
        """(content, signature); raises CredentialError while the file cannot be read."""
        with self._lock:
            now = self._monotonic()
            if now - self._checked >= RECHECK_SECONDS or self._content is None:
                self._checked = now
                self._refresh()
            if self._error is not None or self._content is None or self._signature is None:
                raise CredentialError(self._error or f"cannot read {self.what} {self.path}")
            return self._content, self._signature

    def _refresh(self) -> None:
        try:
            st = os.stat(self.path)
            signature = (st.st_ino, st.st_size, st.st_mtime_ns)
            if signature == self._signature and self._error is None:
                return
            content = read_regular(self.path, self.max_bytes)
        except OSError as exc:
            self._error = f"cannot read {self.what} {self.path}: {exc.strerror or type(exc).__name__}"
            self._signature = None
            return
        if len(content) > self.max_bytes:
            self._error = f"{self.what} {self.path} is larger than {self.max_bytes:,} bytes"
            return
        self._signature, self._content, self._error = signature, content, None


def _header_value(text: str, field: str) -> str:
    """`text` when an HTTP header can carry it as it is (printable ASCII); else CredentialError naming the
    field, never the value, and never a UnicodeEncodeError from deep inside the HTTP client."""
    if not all(" " <= ch <= "~" or ch == "\t" for ch in text):
        raise CredentialError(f"{field}: a header value must be printable ASCII (it holds another character; "
                              "percent- or base64-encode it as the server expects)")
    return text


def _text(content: bytes, what: str, path: str) -> str:
    """A secret from a file: UTF-8, surrounding whitespace dropped (as Prometheus does), no control chars."""
    try:
        text = content.decode("utf-8").strip()
    except UnicodeDecodeError:
        raise CredentialError(f"{what} {path} is not UTF-8 text") from None
    if not text:
        raise CredentialError(f"{what} {path} is empty")
    if any(ord(c) < 32 or ord(c) == 127 for c in text):
        raise CredentialError(f"{what} {path} holds a line break or control character inside the value")
    return text


class _SecretSource:
    """An inline secret or a watched file's stripped text."""

    def __init__(self, secret: Secret, what: str) -> None:
        self._value = secret.value
        self._file = WatchedFile(secret.file, what) if secret.file else None
        self._what = what

    def get(self) -> str:
        if self._file is None:
            return self._value or ""
        content, _ = self._file.read()
        return _text(content, self._what, self._file.path)


class _TlsAdapter(HTTPAdapter):
    """An HTTPAdapter whose HTTPS connections use our SSLContext, rebuilt when a certificate file changes.

    requests would otherwise add certifi's bundle (trusting every public CA besides ca_file) and has no
    server_name; urllib3 takes an `ssl_context`, `server_hostname` (SNI) and `assert_hostname` per pool."""

    def __init__(self, endpoint: Endpoint, pool_maxsize: int) -> None:
        super().__init__(max_retries=Retry(total=0, raise_on_status=False, redirect=0),
                         pool_connections=2, pool_maxsize=pool_maxsize)
        tls = endpoint.tls
        self._tls = tls
        self._ca = WatchedFile(tls.ca_file, "tls_config.ca_file", MAX_CERT_BYTES) if tls.ca_file else None
        self._cert = WatchedFile(tls.cert_file, "tls_config.cert_file", MAX_CERT_BYTES) if tls.cert_file \
            else None
        self._key = WatchedFile(tls.key_file, "tls_config.key_file", MAX_CERT_BYTES) if tls.key_file else None
        self._context_lock = threading.Lock()
        self._context: ssl.SSLContext | None = None
        self._context_key: tuple[object, ...] = ()
        if tls.insecure_skip_verify:  # the user asked for it; urllib3 would warn on every request
            warnings.filterwarnings("ignore", category=InsecureRequestWarning)

    def init_poolmanager(self, *args: Any, **kwargs: Any) -> None:
        super().init_poolmanager(*args, **kwargs)
        deadline.install(self.poolmanager)  # every exchange of a `Deadline` is cut at its end

    def proxy_manager_for(self, proxy: str, **proxy_kwargs: Any) -> Any:
        return deadline.install(super().proxy_manager_for(proxy, **proxy_kwargs))

    def context(self) -> ssl.SSLContext:
        files = [f for f in (self._ca, self._cert, self._key) if f is not None]
        key = tuple(f.read()[1] for f in files)
        with self._context_lock:
            if self._context is None or key != self._context_key:
                self._context = self._build()
                self._context_key = key
            return self._context

    def _build(self) -> ssl.SSLContext:
        tls = self._tls
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        ctx.minimum_version = _TLS_VERSIONS[tls.min_version]
        if tls.insecure_skip_verify:
            ctx.check_hostname = False
            ctx.verify_mode = ssl.CERT_NONE
        elif self._ca is not None:
            content, _ = self._ca.read()
            try:
                ctx.load_verify_locations(cadata=content.decode("ascii"))
            except (ssl.SSLError, ValueError, TypeError) as exc:  # UnicodeDecodeError is a ValueError
                raise CredentialError(f"tls_config.ca_file {self._ca.path} holds no PEM certificate") from exc
        else:
            ctx.load_default_certs()
        if self._cert is not None and self._key is not None:
            try:
                ctx.load_cert_chain(self._cert.path, self._key.path)
            except (ssl.SSLError, OSError) as exc:
                raise CredentialError(
                    f"tls_config.cert_file {self._cert.path} and key_file {self._key.path} are not a PEM "
                    "certificate and its key") from exc
        return ctx

    def build_connection_pool_key_attributes(
        self, request: requests.PreparedRequest, verify: Any, cert: Any = None
    ) -> Any:  # urllib3's pool keys (host params, pool kwargs); ours has keys beyond the stubs' TypedDict
        host_params, inherited = super().build_connection_pool_key_attributes(request, verify, None)
        if host_params.get("scheme") != "https":
            return host_params, inherited
        tls = self._tls
        verify_mode = "CERT_NONE" if tls.insecure_skip_verify else "CERT_REQUIRED"
        pool_kwargs: dict[str, Any] = {"ssl_context": self.context(), "cert_reqs": verify_mode}
        if tls.insecure_skip_verify:
            pool_kwargs["assert_hostname"] = False
        elif tls.server_name:
            pool_kwargs["assert_hostname"] = tls.server_name
        if tls.server_name:
            pool_kwargs["server_hostname"] = tls.server_name
        return host_params, pool_kwargs

    def cert_verify(self, conn: Any, url: str, verify: Any, cert: Any) -> None:
        """Our SSLContext decides; requests' default would add certifi's CAs to it."""


class EndpointSession(requests.Session):
    """A Session for one endpoint: its TLS, proxy and redirects; `auth_headers()` fresh from files."""

    def __init__(self, endpoint: Endpoint, pool_maxsize: int = 16) -> None:
        super().__init__()
        self.endpoint = endpoint
        self.trust_env = False  # no proxy, CA bundle or .netrc from the environment: the file says it all
        self.max_redirects = 5
        if endpoint.proxy_url:
            self.proxies = {"http": endpoint.proxy_url, "https": endpoint.proxy_url}
        adapter = _TlsAdapter(endpoint, pool_maxsize)
        self.mount("https://", adapter)
        self.mount("http://", adapter)
        self._basic = None
        if endpoint.basic_auth is not None:
            self._basic = (_SecretSource(endpoint.basic_auth.username, "basic_auth.username_file"),
                           _SecretSource(endpoint.basic_auth.password, "basic_auth.password_file"))
        self._authorization = None
        if endpoint.authorization is not None:
            self._authorization = (endpoint.authorization.type,
                                   _SecretSource(endpoint.authorization.credentials,
                                                 "authorization.credentials_file"))
        self._headers = [(h.name, h.values, h.secrets, [WatchedFile(p, f"http_headers.{h.name} file")
                                                         for p in h.files]) for h in endpoint.headers]

    def auth_headers(self) -> dict[str, str]:
        """Authorization and custom headers as of now; raises CredentialError naming the unreadable file."""
        headers: dict[str, str] = {}
        for name, values, secrets, files in self._headers:
            parts = [*values, *secrets, *(_text(f.read()[0], f.what, f.path) for f in files)]
            headers[name] = _header_value(", ".join(parts), f"http_headers.{name}")
        if self._basic is not None:
            user, password = self._basic[0].get(), self._basic[1].get()
            # RFC 7617's charset=UTF-8: a user name or password beyond Latin-1 is sent, not a crash
            token = base64.b64encode(f"{user}:{password}".encode()).decode("ascii")
            headers["Authorization"] = f"Basic {token}"
        if self._authorization is not None:
            kind, credentials = self._authorization
            value = f"{kind} {credentials.get()}"
            headers["Authorization"] = _header_value(value, "authorization.credentials")
        return headers

    def get_api(self, path: str, params: dict[str, str], timeout: float) -> requests.Response:
        """GET `url + path` with the endpoint's auth, streamed (the caller bounds the body and closes it)."""
        return self.get(self.endpoint.url + path, params=params, headers=self.auth_headers(),
                        timeout=(timeout, timeout), stream=True,
                        allow_redirects=self.endpoint.follow_redirects)

    def post_api(self, path: str, form: dict[str, str], timeout: float) -> requests.Response:
        """POST `form` (application/x-www-form-urlencoded) to `url + path`, otherwise like `get_api`: a
        batch of queries is too long for a URL."""
        return self.post(self.endpoint.url + path, data=form, headers=self.auth_headers(),
                         timeout=(timeout, timeout), stream=True,
                         allow_redirects=self.endpoint.follow_redirects)

    def rebuild_proxies(self, prepared_request: requests.PreparedRequest, proxies: Any) -> dict[str, str]:
        """The configured proxy for redirects too, never the environment's (trust_env is off)."""
        return dict(self.proxies)


def read_capped(response: requests.Response, limit: int, too_large: Callable[[], Exception],
                each_chunk: Callable[[int], None] | None = None) -> bytes:
    """The body of a streamed response, `too_large()` raised as soon as it passes `limit` bytes, declared or
    streamed; `each_chunk` sees each chunk's size as it arrives (a budget, a deadline) and may raise."""
    declared = ascii_int(response.headers.get("Content-Length", ""))
    if declared is not None and declared > limit:
        raise too_large()
    chunks: list[bytes] = []
    size = 0
    for chunk in response.iter_content(64 * 1024):
        size += len(chunk)
        if size > limit:
            raise too_large()
        if each_chunk is not None:
            each_chunk(len(chunk))
        chunks.append(chunk)
    return b"".join(chunks)


class ExchangeTimedOut(requests.Timeout):
    """The whole exchange, headers and body, outlasted its deadline (plumbing/deadline.py)."""


class ExchangeCancelled(ExchangeTimedOut):
    """The exchange was cut by a `deadline.Cancel` (a stop signal), not by its time running out."""


def bounded_exchange(send: Callable[[], requests.Response], read: Callable[[requests.Response], bytes],
                     seconds: float, where: str, cancel: deadline.Cancel | None = None) -> tuple[int, bytes]:
    """(status, body) of `send()`, its body read by `read`, the whole of it within `seconds`: past them the
    socket is shut down and ExchangeTimedOut raised, never a truncated answer read as complete; `cancel`
    cuts it sooner (ExchangeCancelled). Every other failure is raised as it is, for the caller to word."""
    watch = deadline.Deadline(seconds)
    try:
        with watch, (cancel.under(watch) if cancel is not None else contextlib.nullcontext()):
            response = send()
            try:
                status, body = response.status_code, read(response)
            finally:
                response.close()
    except (requests.RequestException, OSError) as exc:
        _raise_if_cut(watch, cancel, seconds, where, exc)
        raise
    _raise_if_cut(watch, cancel, seconds, where, None)  # cut in its headers, a response can look complete
    return status, body


def _raise_if_cut(watch: deadline.Deadline, cancel: deadline.Cancel | None, seconds: float, where: str,
                  cause: BaseException | None) -> None:
    if cancel is not None and cancel.cancelled:
        raise ExchangeCancelled(f"the query to {where} was cancelled (stopping)") from cause
    if watch.expired:
        raise ExchangeTimedOut(f"no complete answer from {where} within {seconds:.3g} s") from cause


@dataclass(frozen=True)
class Failure:
    """What went wrong in one line, whether to call it unreachable, and whether a retry may help."""

    message: str
    unreachable: bool
    retryable: bool
    timeout: bool = False


def _chain(exc: BaseException) -> Iterator[BaseException]:
    """`exc` and every exception it wraps (cause, context, args, urllib3's `reason`), breadth first."""
    seen: set[int] = set()
    queue: list[BaseException] = [exc]
    while queue and len(seen) < 32:
        current = queue.pop(0)
        if id(current) in seen:
            continue
        seen.add(id(current))
        yield current
        nested = [getattr(current, "reason", None), current.__cause__, current.__context__,
                  *getattr(current, "args", ())]
        queue.extend(e for e in nested if isinstance(e, BaseException))


def describe_failure(exc: BaseException, endpoint: Endpoint) -> Failure:
    """One line for a failed request: never the library's text, which is long and repeats the URL."""
    chain = list(_chain(exc))
    where = endpoint.display_url
    host = urllib.parse.urlsplit(endpoint.url).hostname or "?"
    for e in chain:
        if isinstance(e, CredentialError):
            return Failure(f"endpoint {endpoint.name}: {e}", unreachable=False, retryable=False)
    if isinstance(exc, requests.exceptions.ProxyError):
        return Failure(f"proxy {endpoint.proxy_display}: {_proxy_problem(chain)}", True, True)
    timeouts = ("ReadTimeoutError", "ConnectTimeoutError", "TimeoutError")
    if isinstance(exc, requests.Timeout) or any(type(e).__name__ in timeouts for e in chain):
        return Failure(f"no answer from {where} in time", unreachable=False, retryable=True, timeout=True)
    if isinstance(exc, requests.TooManyRedirects):
        return Failure(f"too many redirects from {where}", unreachable=False, retryable=False)
    tls = _tls_message(chain, endpoint, host)
    if tls is not None:
        return Failure(f"{tls} ({where})", unreachable=True, retryable=False)
    for e in chain:
        if isinstance(e, ConnectionRefusedError):
            return Failure(f"cannot reach Prometheus at {where}: connection refused", True, True)
        if isinstance(e, NameResolutionError | socket.gaierror):
            return Failure(f"cannot reach Prometheus at {where}: cannot resolve host {host}", True, True)
        if isinstance(e, ConnectionResetError | BrokenPipeError) or type(e).__name__ == "RemoteDisconnected":
            return Failure(f"cannot reach Prometheus at {where}: the connection was closed before an answer",
                           True, True)
        if isinstance(e, OSError) and e.errno is not None and e.strerror:
            return Failure(f"cannot reach Prometheus at {where}: {e.strerror.lower()}", True, True)
    return Failure(f"request to {where} failed ({type(exc).__name__})", unreachable=True, retryable=True)


def _proxy_problem(chain: list[BaseException]) -> str:
    """Judged on the whole chain, most specific first: the outer exceptions' text holds object addresses
    (`at 0x7f...407...`), so a status is read only from http.client's own tunnel message."""
    if any(isinstance(e, ConnectionRefusedError) for e in chain):
        return "connection refused"
    if any(isinstance(e, NameResolutionError | socket.gaierror) for e in chain):
        return "cannot resolve its host"
    tunnel = [m for e in chain if isinstance(e, OSError) and (m := _TUNNEL_FAILED.match(str(e)))]
    if tunnel and tunnel[0].group(1) == "407":
        return "407: the proxy wants credentials (user:password@ in proxy_url)"
    if tunnel:
        return "it refused to open a tunnel to Prometheus"
    return "cannot connect through it"


_TUNNEL_FAILED = re.compile(r"Tunnel connection failed: (\d{3})\b")
"""http.client's message when a proxy answers CONNECT with anything but 200."""


def _tls_message(chain: list[BaseException], endpoint: Endpoint, host: str) -> str | None:
    expected = endpoint.tls.server_name or host
    for e in chain:
        if type(e).__name__ == "CertificateError":  # urllib3's own check, used when server_name is set
            return f"TLS: certificate is for {_peer_names(endpoint)}, not {expected}"
        if isinstance(e, ssl.SSLCertVerificationError):
            code = e.verify_code
            if code == 62:
                return f"TLS: certificate is for {_peer_names(endpoint)}, not {expected}"
            if code in (2, 18, 19, 20, 21):
                return "TLS: certificate signed by unknown authority (set tls_config.ca_file)"
            if code == 10:
                return "TLS: certificate has expired"
            if code == 9:
                return "TLS: certificate is not yet valid"
            return f"TLS: certificate verification failed ({e.verify_message})"
    for e in chain:
        if isinstance(e, ssl.SSLError):
            reason = str(getattr(e, "reason", "") or "")
            refused = ("CERTIFICATE_REQUIRED", "HANDSHAKE_FAILURE", "BAD_CERTIFICATE", "UNKNOWN_CA",
                       "CERTIFICATE_UNKNOWN")
            if any(code in reason for code in refused):  # Go answers "bad certificate" to none at all too
                if endpoint.tls.cert_file is None:
                    return "TLS: the server requires a client certificate (tls_config.cert_file and key_file)"
                return "TLS: the server refused the client certificate"
            if "WRONG_VERSION_NUMBER" in reason or "RECORD_LAYER_FAILURE" in reason:
                return "TLS: the server does not speak TLS (http:// instead of https://?)"
            if "PROTOCOL_VERSION" in reason or "UNSUPPORTED_PROTOCOL" in reason:
                return f"TLS: no TLS version both sides accept (min_version {endpoint.tls.min_version})"
            return f"TLS: handshake failed ({reason or 'no reason given'})"
    return None


def _peer_names(endpoint: Endpoint, timeout: float = 2.0) -> str:
    """The DNS and IP names of the server's certificate, read in a second, unverified handshake."""
    from cryptography import x509  # only on this error path

    parts = urllib.parse.urlsplit(endpoint.url)
    try:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
        with socket.create_connection((parts.hostname or "", parts.port or 443), timeout=timeout) as sock, \
                context.wrap_socket(sock, server_hostname=endpoint.tls.server_name or parts.hostname) as tls:
            der = tls.getpeercert(binary_form=True)
        cert = x509.load_der_x509_certificate(der or b"")
        san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
        names = [*san.get_values_for_type(x509.DNSName), *map(str, san.get_values_for_type(x509.IPAddress))]
    except (OSError, ValueError, x509.ExtensionNotFound):
        return "other names"
    return ", ".join(names[:5]) + (", ..." if len(names) > 5 else "") if names else "no names"
