"""Fixtures of the TLS / auth / serving tests: a test CA in tmp_path and web config files written from it."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.pki import Issued, TestCA, bcrypt_hash

PASSWORD = "s3cret-scrape"


@dataclass
class Pki:
    root: Path
    ca: TestCA
    server: Issued
    client: Issued

    def web_config(self, extra: str = "", users: bool = True, tls: bool = True) -> Path:
        """Write web.yml (server cert, user `prometheus` with PASSWORD, one extra header) and return it."""
        text = ""
        if tls:
            text += "tls_server_config:\n"
            text += f"  cert_file: {self.server.cert.name}\n  key_file: {self.server.key.name}\n"
            text += extra
        if users:
            text += f"basic_auth_users:\n  prometheus: '{bcrypt_hash(PASSWORD)}'\n"
        text += "http_server_config:\n  headers:\n    X-Content-Type-Options: nosniff\n"
        path = self.root / "web.yml"
        path.write_text(text)
        return path


@pytest.fixture
def pki(tmp_path: Path) -> Pki:
    ca = TestCA(tmp_path)
    return Pki(tmp_path, ca, ca.issue("server"), ca.issue("prometheus", server=False))
