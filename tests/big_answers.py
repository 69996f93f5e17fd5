"""A fake Prometheus whose answers are as large as a test or a benchmark asks: a fleet of any size, a week of
it, an answer that never ends. `gpu-fleet`'s memory bounds are measured against it (tests/integration/fleet/
test_memory_bounded.py, benchmarks/fleet_memory.py)."""

from __future__ import annotations

import contextlib
import itertools
import json
import threading
import urllib.parse
from collections.abc import Iterator

from tests.support import QuietHandler, http_server


def vector(series: int) -> bytes:
    return _vector(series, "")


def _vector(series: int, tag: str) -> bytes:
    """An instant vector of `series` GPUs, written as text: json.dumps of as many dicts takes seconds."""
    entries = ",".join(f'{{"metric": {{"node": "node-{tag}{i // 8}", "uuid": "GPU-{tag}{i:08d}", '
                       f'"gpu": "{i % 8}"}}, "value": [1, "0.5"]}}' for i in range(series))
    return f'{{"status": "success", "data": {{"resultType": "vector", "result": [{entries}]}}}}'.encode()


@contextlib.contextmanager
def serving(body: bytes | None) -> Iterator[str]:
    """Every query answered with `body`; None: an endless answer without Content-Length."""

    class Handler(QuietHandler):
        protocol_version = "HTTP/1.0"

        def do_GET(self) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            if body is not None:
                self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            try:
                if body is not None:
                    self.wfile.write(body)
                    return
                self.wfile.write(b'{"status": "success", "data": {"resultType": "vector", "result": [')
                chunk = b'{"metric": {}, "value": [1, "1"]}, ' * 2000
                for _ in range(2000):  # ~140 MB, bounded
                    self.wfile.write(chunk)
            except OSError:  # the client stopped reading
                return

    with http_server(Handler) as url:
        yield url


@contextlib.contextmanager
def report_server(gpus_said: int, gpus_sent: int, ranges: list[tuple[float, float, float]] | None = None,
                  extra: tuple[str, ...] = ()) -> Iterator[str]:
    """A Prometheus that counts `gpus_said` GPUs and answers every range query with `gpus_sent` series at
    every step asked for (and the `extra` points, JSON text, in every series); each range query's (start,
    end, step) is appended to `ranges`."""
    answers: dict[str, bytes] = {}

    class Handler(QuietHandler):
        def do_GET(self) -> None:
            query = urllib.parse.parse_qs(urllib.parse.urlsplit(self.path).query)
            if self.path.startswith("/api/v1/query_range"):
                start, end, step = (float(query[key][0]) for key in ("start", "end", "step"))
                if ranges is not None:
                    ranges.append((start, end, step))
                key = f"{start}:{end}:{step}"
                if key not in answers:
                    answers[key] = matrix(gpus_sent, start, step, int((end - start) // step) + 1, extra)
                body = answers[key]
            else:
                body = json.dumps({"status": "success", "data": {"resultType": "vector", "result": [
                    {"metric": {}, "value": [1, str(gpus_said)]}]}}).encode()
            with contextlib.suppress(OSError):
                self.answer(200, body)

    with http_server(Handler) as url:
        yield url


def matrix(series: int, start: float, step: float, points: int, extra: tuple[str, ...] = ()) -> bytes:
    """A range answer: `series` GPUs with `points` points each (then the `extra` ones, JSON text); the points
    are the same for every series, so they are written once and repeated."""
    values = ", ".join([*(f'[{json.dumps(start + k * step)}, "0.5"]' for k in range(points)), *extra])
    entries = ", ".join(f'{{"metric": {{"node": "node-{i // 8}", "uuid": "GPU-{i:08d}", "gpu": "{i % 8}"}}, '
                        f'"values": [{values}]}}' for i in range(series))
    return f'{{"status": "success", "data": {{"resultType": "matrix", "result": [{entries}]}}}}'.encode()


def distinct_vector(series: int, answer: int) -> bytes:
    """`vector(series)` with labels of its own: answer `answer` shares no string with any other."""
    return _vector(series, f"{answer}-")


@contextlib.contextmanager
def serving_in_turn(bodies: list[bytes]) -> Iterator[str]:
    """A Prometheus that sends one answer at a time, each request the next of `bodies` (round): every answer
    is complete, and parsed, before the next starts, the order that keeps the most answers parsed at once."""
    turn = threading.Lock()
    count = itertools.count()

    class Handler(QuietHandler):
        protocol_version = "HTTP/1.0"

        def do_GET(self) -> None:
            body = bodies[next(count) % len(bodies)]
            with turn, contextlib.suppress(OSError):
                self.answer(200, body)

    with http_server(Handler) as url:
        yield url


GIB = 1024**3
LABELLED_VALUES: dict[str, float] = {
    "gpu_info": 1, "gpu_up": 1, "gpu_utilization_ratio": 0.1, "gpu_memory_used_bytes": GIB,
    "gpu_memory_free_bytes": 79 * GIB, "gpu_memory_total_bytes": 80 * GIB, "gpu_temperature_celsius": 40,
    "gpu_power_usage_watts": 100, "gpu_health_state == 1": 1, "gpu_availability_score": 0.9,
}
"""What `labelled` answers to each of `gpu-fleet status`'s instant queries (the others: no series)."""


@contextlib.contextmanager
def labelled(gpus: list[dict[str, str]], requests: list[str] | None = None) -> Iterator[str]:
    """A Prometheus whose GPUs carry the labels `gpus` gives (node, gpu, uuid, model, ...: hostile ones in the
    output tests): every instant query of `status` answered per GPU (`LABELLED_VALUES`), any other instant
    query with their count, every range query with each GPU's series at every step (value 0.5, health state
    `healthy`). Each request's query is appended to `requests`."""

    def body(data: dict[str, object]) -> bytes:
        return json.dumps({"status": "success", "data": data}).encode()

    class Handler(QuietHandler):
        def do_GET(self) -> None:
            query = urllib.parse.parse_qs(urllib.parse.urlsplit(self.path).query)
            text = query.get("query", [""])[0]
            if requests is not None:
                requests.append(text)
            health = {"state": "healthy"} if text.startswith("gpu_health_state") else {}
            if self.path.startswith("/api/v1/query_range"):
                start, end, step = (float(query[key][0]) for key in ("start", "end", "step"))
                values = [[start + k * step, "0.5"] for k in range(int((end - start) // step) + 1)]
                answer = body({"resultType": "matrix", "result": [
                    {"metric": {**gpu, **health}, "values": values} for gpu in gpus]})
            elif text in LABELLED_VALUES:
                answer = body({"resultType": "vector", "result": [
                    {"metric": {**gpu, **health}, "value": [1, str(LABELLED_VALUES[text])]} for gpu in gpus]})
            elif text.startswith("count("):
                answer = body({"resultType": "vector",
                               "result": [{"metric": {}, "value": [1, str(len(gpus))]}]})
            else:
                answer = body({"resultType": "vector", "result": []})
            with contextlib.suppress(OSError):
                self.answer(200, answer)

    with http_server(Handler) as url:
        yield url
