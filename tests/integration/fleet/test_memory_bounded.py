"""`gpu-fleet` keeps its memory bounded whatever Prometheus sends. `status`: each instant answer is
size-checked as it streams (8 MiB), the answers of one command together (32 MiB), and a large answer is parsed
while no other is. `report`: the step grows with the GPUs counted in the window, each answer may hold only
the points that allows, and each is merged before the next is read. Run as the installed command, its peak
resident memory (tests/measure.py) stays under 256 MiB: an endless answer, answers that each fit but
together do not, a fleet of 25,000 GPUs, a week's report of 3,000 GPUs, and a Prometheus that undercounts."""

from __future__ import annotations

import contextlib
import json
import sys
import urllib.parse
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.measure import run_measured
from tests.support import QuietHandler, http_server

pytestmark = pytest.mark.integration

FLEET = str(Path(sys.executable).parent / "gpu-fleet")
MAX_RSS_MIB = 256


def vector(series: int) -> bytes:
    return json.dumps({"status": "success", "data": {"resultType": "vector", "result": [
        {"metric": {"node": f"node-{i // 8}", "uuid": f"GPU-{i:08d}", "gpu": str(i % 8)}, "value": [1, "0.5"]}
        for i in range(series)]}}).encode()


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


@pytest.mark.parametrize(("series", "code", "expected"), [
    (None, 2, "larger than"),  # one answer past 8 MiB, or the 11 together past 32 MiB first
    (85_000, 2, "the answers together are larger than 33,554,432 bytes"),
    (25_000, 0, "node-3124"),
], ids=["endless", "each-fits-not-together", "25000-gpus"])
def test_status_stays_under_256_mib(series: int | None, code: int, expected: str, tmp_path: Path) -> None:
    with serving(None if series is None else vector(series)) as url:
        result = run_measured([FLEET, "status", "--prometheus", url, "--query-timeout", "60s"], tmp_path,
                              timeout=120)
    assert result.returncode == code, result.output[-2000:]
    assert expected in result.output and "Traceback" not in result.output, result.output[-2000:]
    assert result.max_rss_mib < MAX_RSS_MIB, f"{result.max_rss_mib:.0f} MiB"


@contextlib.contextmanager
def report_server(gpus_said: int, gpus_sent: int) -> Iterator[str]:
    """A Prometheus that counts `gpus_said` GPUs and answers every range query with `gpus_sent` series at
    every step asked for."""
    answers: dict[str, bytes] = {}

    class Handler(QuietHandler):
        def do_GET(self) -> None:
            query = urllib.parse.parse_qs(urllib.parse.urlsplit(self.path).query)
            if self.path.startswith("/api/v1/query_range"):
                start, end, step = (float(query[key][0]) for key in ("start", "end", "step"))
                key = f"{start}:{end}:{step}"
                if key not in answers:
                    answers[key] = matrix(gpus_sent, start, step, int((end - start) // step) + 1)
                body = answers[key]
            else:
                body = json.dumps({"status": "success", "data": {"resultType": "vector", "result": [
                    {"metric": {}, "value": [1, str(gpus_said)]}]}}).encode()
            with contextlib.suppress(OSError):
                self.answer(200, body)

    with http_server(Handler) as url:
        yield url


def matrix(series: int, start: float, step: float, points: int) -> bytes:
    return json.dumps({"status": "success", "data": {"resultType": "matrix", "result": [
        {"metric": {"node": f"node-{i // 8}", "uuid": f"GPU-{i:08d}", "gpu": str(i % 8)},
         "values": [[start + k * step, "0.5"] for k in range(points)]} for i in range(series)]}}).encode()


@pytest.mark.parametrize(("said", "sent", "code", "expected"), [
    (3000, 3000, 0, "3,000 GPUs in the window"),
    (10, 120, 2, "larger than 16,777,216 bytes"),  # undercounted: refused as it streams, never parsed
    (10, 50, 2, "more than 400,000 points in all"),  # undercounted, within the bytes: refused by its points
], ids=["3000-gpus-a-week", "undercounted-bytes", "undercounted-points"])
def test_a_weeks_report_stays_under_256_mib(said: int, sent: int, code: int, expected: str,
                                            tmp_path: Path) -> None:
    with report_server(said, sent) as url:
        result = run_measured([FLEET, "report", "--prometheus", url, "--since", "7d", "--query-timeout",
                               "60s", "--out", str(tmp_path / "out")], tmp_path, timeout=300)
    assert result.returncode == code, result.output[-2000:]
    assert expected in result.output and "Traceback" not in result.output, result.output[-2000:]
    assert result.max_rss_mib < MAX_RSS_MIB, f"{result.max_rss_mib:.0f} MiB"


def test_an_export_of_4000_gpus_stays_under_256_mib(tmp_path: Path) -> None:
    """Two hours every minute of 4,000 GPUs (484,000 rows): the chunks shrink to ROWS_PER_CHUNK rows."""
    with report_server(4000, 4000) as url:
        result = run_measured([FLEET, "export", "--prometheus", url, "--since", "2h", "--step", "60s",
                               "--series", "utilization", "--query-timeout", "60s"], tmp_path, timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.count("\n") == 1 + 4000 * 121
    assert result.max_rss_mib < MAX_RSS_MIB, f"{result.max_rss_mib:.0f} MiB"
