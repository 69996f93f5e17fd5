"""A server answering each malformed shape on 127.0.0.1: a failed metric (BadAnswer or Timeout) for that query
only, while the good query of the same run_queries call still returns its value."""

from __future__ import annotations

import contextlib
import json
import threading
import time
import urllib.parse
from collections.abc import Iterator
from http.server import ThreadingHTTPServer

import pytest

from plumbing.prometheus.runner import PromQLRunner, PromQLSettings, QueryResult
from tests.support import QuietHandler

pytestmark = pytest.mark.integration


def vector(value: object) -> bytes:
    return json.dumps({"status": "success", "data": {"resultType": "vector",
                                                     "result": [{"metric": {}, "value": value}]}}).encode()


ANSWERS: dict[str, bytes] = {
    "good": vector([1.0, "3.5"]),
    "value-object": vector([1.0, {"v": 1}]),
    "value-list": vector([1.0, [1]]),
    "value-bare-number": vector([1.0, 7]),
    "value-word": vector([1.0, "abc"]),
    "no-timestamp": vector(["5"]),
    "label-not-string": json.dumps({"status": "success", "data": {"resultType": "vector", "result": [
        {"metric": {"a": 1}, "value": [1.0, "1"]}]}}).encode(),
    "no-result-type": json.dumps({"status": "success", "data": {"result": []}}).encode(),
    "not-utf8": b'{"status": "success", "data": "\xff\xfe"}',
    "not-json": b"<html>" + b"x" * 100_000,
    "huge": b"[" * 10 + b"0" * 3_000_000,
    "deep": b"[" * 100_000,
}
MALFORMED = [name for name in ANSWERS if name != "good"]


class Handler(QuietHandler):
    def do_GET(self) -> None:
        query = urllib.parse.parse_qs(urllib.parse.urlsplit(self.path).query)["query"][0]
        if query == "slow":
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            for _ in range(80):  # a byte every 0.1 s: never a read timeout, always past the budget
                try:
                    self.wfile.write(b" ")
                    self.wfile.flush()
                except OSError:
                    return
                time.sleep(0.1)
            return
        body = ANSWERS[query]
        with contextlib.suppress(OSError):  # the runner stopped reading a body it refused (too large, deep)
            self.answer(200, body)


@pytest.fixture
def server_url() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()
    thread.join(timeout=5)


def test_each_malformed_answer_fails_its_query_alone(server_url: str) -> None:
    # A budget a loaded CI machine meets for every quick answer (a 100,000-bracket body takes a while to
    # refuse), and that the slow answer's 8 s always overruns.
    settings = PromQLSettings(server_url, query_timeout=3.0, budget=4.0, max_attempts=1,
                              max_body_bytes=1024 * 1024)
    runner = PromQLRunner(settings)
    try:
        results = runner.run_queries(["good", *MALFORMED, "slow"])
    finally:
        runner.close()
    assert results["good"] == QueryResult(3.5)
    for name in MALFORMED:
        assert (results[name].value, results[name].error_reason) == (None, "BadAnswer"), (name, results[name])
        assert (results[name].error or "").startswith("malformed answer from Prometheus: ")
    assert "not UTF-8" in (results["not-utf8"].error or "")
    assert "larger than 1,048,576 bytes" in (results["huge"].error or "")
    assert (results["slow"].value, results["slow"].error_reason) == (None, "Timeout")
