"""Server TLS from a `tls_server_config`, with certificates reloaded when their files change.

The listening socket keeps one SSLContext for its life; its `sni_callback` runs on every ClientHello (with
or without SNI) and points the handshake at the newest context. A context is rebuilt when the modification
time, size or inode of the certificate, key or client-CA file changed (a Secret update swaps a symlink, so
the inode changes), which is three `stat` calls per handshake. A half-written rotation (a new certificate
with the old key) fails to load: the previous context keeps serving and one WARNING says why, and the
next handshake tries again.
"""

from __future__ import annotations

import logging
import os
import ssl
import threading
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger(__name__)

_VERSIONS = {"TLS10": ssl.TLSVersion.TLSv1, "TLS11": ssl.TLSVersion.TLSv1_1,
             "TLS12": ssl.TLSVersion.TLSv1_2, "TLS13": ssl.TLSVersion.TLSv1_3}
_VERIFY = {"NoClientCert": ssl.CERT_NONE, "VerifyClientCertIfGiven": ssl.CERT_OPTIONAL,
           "RequireAndVerifyClientCert": ssl.CERT_REQUIRED}

_SSL_REASONS = {"PEM_LIB": "not a readable PEM certificate or key",
                "KEY_VALUES_MISMATCH": "the key does not belong to the certificate",
                "NO_CERTIFICATE_OR_CRL_FOUND": "no certificate in the file"}
Signature = tuple[tuple[int, int, int], ...]


@dataclass(frozen=True)
class TlsServerConfig:
    """A web config's `tls_server_config`, paths resolved (webconfig.py reads it; here, so this module and
    the reader import in one direction)."""

    cert_file: Path
    key_file: Path
    client_auth_type: str = "NoClientCert"
    client_ca_file: Path | None = None
    min_version: str = "TLS12"
    """The toolkit's default: TLS 1.2."""
    max_version: str | None = None
    """None: the newest this OpenSSL speaks."""


def build_context(config: TlsServerConfig) -> ssl.SSLContext:
    """A server context for `config`; ValueError with a short reason when a file is unusable."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = _VERSIONS[config.min_version]
    if config.max_version is not None:
        context.maximum_version = _VERSIONS[config.max_version]
    try:
        context.load_cert_chain(config.cert_file, config.key_file)
    except (ssl.SSLError, OSError) as exc:
        raise ValueError(f"cannot load cert_file {config.cert_file.name} with key_file "
                         f"{config.key_file.name}: {_reason(exc)}") from exc
    context.verify_mode = _VERIFY[config.client_auth_type]
    if config.client_ca_file is not None:
        try:
            context.load_verify_locations(cafile=config.client_ca_file)
        except (ssl.SSLError, OSError) as exc:
            name = config.client_ca_file.name
            raise ValueError(f"cannot load client_ca_file {name}: {_reason(exc)}") from exc
    return context


def _reason(exc: BaseException) -> str:
    if isinstance(exc, ssl.SSLError):
        reason = str(exc.reason) if exc.reason else ("PEM_LIB" if "PEM lib" in str(exc) else str(exc))
        return _SSL_REASONS.get(reason, reason.replace("_", " ").lower())
    if isinstance(exc, OSError):
        return exc.strerror or str(exc)
    return str(exc)


def _signature(config: TlsServerConfig) -> Signature:
    files: list[Path] = [config.cert_file, config.key_file]
    if config.client_ca_file is not None:
        files.append(config.client_ca_file)
    out = []
    for path in files:
        try:
            st = os.stat(path)
        except OSError:
            out.append((0, 0, 0))
        else:
            out.append((st.st_mtime_ns, st.st_size, st.st_ino))
    return tuple(out)


class ReloadingTls:
    """Holds the listening context and swaps in a fresh one per handshake when the files changed."""

    def __init__(self, config: TlsServerConfig) -> None:
        self.config = config
        self._signature = _signature(config)
        self._current = build_context(config)
        self._failed: Signature | None = None
        self._lock = threading.Lock()
        self.context = build_context(config)
        """What the socket listens with: its verify mode holds for every handshake."""
        self.context.sni_callback = self._on_hello
        self.reloads = 0

    def _on_hello(self, sslobj: ssl.SSLObject, server_name: str | None, context: ssl.SSLContext) -> None:
        sslobj.context = self.current()

    def current(self) -> ssl.SSLContext:
        signature = _signature(self.config)
        if signature == self._signature or signature == self._failed:
            return self._current
        with self._lock:
            try:
                fresh = build_context(self.config)
            except ValueError as exc:
                if self._failed != signature:
                    log.warning("TLS files changed but cannot be used; serving the previous certificate: %s",
                                exc)
                self._failed = signature
                return self._current
            self._current, self._signature, self._failed = fresh, signature, None
            self.reloads += 1
            log.info("TLS certificate reloaded from %s", self.config.cert_file)
            return fresh
