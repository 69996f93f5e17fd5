"""Fixtures of the shipping integration tests: an exposition server whose text each test sets, PromQL over
HTTP, and bounded waits on conditions."""

from __future__ import annotations

import json
import threading
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import ThreadingHTTPServer
from typing import Any, TypeVar

import pytest

from tests.support import QuietHandler

T = TypeVar("T")


class QueryError(AssertionError):
    """Prometheus answered a query with an error."""


def prom_api(base_url: str, path: str, params: dict[str, str]) -> Any:
    url = f"{base_url}{path}?{urllib.parse.urlencode(params)}"
    try:
        with urllib.request.urlopen(url, timeout=10) as response:
            body = json.load(response)
    except urllib.error.HTTPError as exc:
        body = json.load(exc)
    if body.get("status") != "success":
        raise QueryError(f"{params}: {body.get('errorType')}: {body.get('error')}")
    return body["data"]


def query(base_url: str, expr: str) -> list[dict[str, Any]]:
    """Instant query; the result vector (or [] for an empty one)."""
    data = prom_api(base_url, "/api/v1/query", {"query": expr})
    return data["result"] if data["resultType"] in ("vector", "matrix") else [data["result"]]


@dataclass
class Exposition:
    """An HTTP target serving `text` on /metrics, as an exporter would."""

    port: int
    text: str = ""
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def set(self, text: str) -> None:
        with self._lock:
            self.text = text

    def get(self) -> str:
        with self._lock:
            return self.text


@pytest.fixture
def exposition() -> Iterator[Exposition]:
    state = Exposition(port=0)

    class Handler(QuietHandler):
        def do_GET(self) -> None:
            body = state.get().encode()
            self.answer(200 if self.path.startswith("/metrics") else 404, body, "text/plain; version=0.0.4")

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    state.port = server.server_address[1]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield state
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)
