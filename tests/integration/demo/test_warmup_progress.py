"""The demo's wait for Prometheus' first scrapes says how far it is, so a new user never watches a silent
terminal (Prometheus applies its targets about 5 s after it starts)."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler

import pytest

from demo.warmup import wait_for_scrapes
from tests.support import http_server

pytestmark = pytest.mark.integration


@pytest.fixture
def prometheus() -> Iterator[tuple[str, list[int]]]:
    """An HTTP server answering `count(up == 1)` like Prometheus' query API, with the counts of `answers`
    in turn (the last one repeated); an empty result before the first count, as Prometheus gives."""
    answers: list[int] = []
    served = [0]

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            index = min(served[0], len(answers) - 1)
            served[0] += 1
            count = answers[index]
            result = [] if count < 0 else [{"metric": {}, "value": [1.0, str(count)]}]
            body = json.dumps({"status": "success", "data": {"resultType": "vector", "result": result}})
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            self.wfile.write(body.encode())

        def log_message(self, *args: object) -> None:
            pass

    with http_server(Handler) as url:
        yield url, answers


def test_each_change_in_scraped_targets_is_said(prometheus: tuple[str, list[int]]) -> None:
    url, answers = prometheus
    answers.extend([-1, -1, 0, 2, 2, 3, 4])
    said: list[str] = []
    assert wait_for_scrapes(url, 4, threading.Event(), timeout=20, say=said.append)
    assert said == ["demo: 0 of 4 targets scraped so far", "demo: 2 of 4 targets scraped so far",
                    "demo: 3 of 4 targets scraped so far"]


def test_a_long_wait_repeats_its_line(prometheus: tuple[str, list[int]],
                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("demo.warmup.PROGRESS_SECONDS", 0.5)
    url, answers = prometheus
    answers.append(1)
    said: list[str] = []
    assert not wait_for_scrapes(url, 2, threading.Event(), timeout=2.2, say=said.append)
    assert len(said) >= 3 and set(said) == {"demo: 1 of 2 targets scraped so far"}
