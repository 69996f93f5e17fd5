"""`gpu-fleet` keeps its memory bounded whatever Prometheus sends. `status`: each instant answer is
size-checked as it streams (4 MiB), the answers of one command together (32 MiB), and a large answer is parsed
while no other is. `report`: the step grows with the GPUs counted in the window, each answer may hold only
the points that allows, and each is merged before the next is read. `export`: chunks of at most 50,000 rows.
Run as the installed command, its peak resident memory (tests/measure.py) stays under 256 MiB: an endless
answer, answers that each fit but together do not (sent one at a time with labels of their own, so the most
are kept parsed at once), a fleet of 25,000 GPUs, a Prometheus that undercounts, an export that takes two
chunks. The largest fleets (a week of 3,000 GPUs, an export of 4,000) are measured by
benchmarks/fleet_memory.py: each costs seconds of CPU and checks no code the ones here leave out."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.big_answers import distinct_vector, report_server, serving, serving_in_turn, vector
from tests.measure import run_measured

pytestmark = pytest.mark.integration

FLEET = str(Path(sys.executable).parent / "gpu-fleet")
MAX_RSS_MIB = 256


@pytest.mark.parametrize(("answers", "code", "expected"), [
    (None, 2, "larger than"),  # one answer past 4 MiB, or the 8 streaming together past 32 MiB first
    # 41,000 series: 3.7-3.8 MiB each, under the 4 MiB of one answer whatever the answer's number
    (lambda: [distinct_vector(41_000, k) for k in range(13)], 2,
     "the answers together are larger than 33,554,432"),
    (lambda: [vector(25_000)], 0, "node-3124"),
], ids=["endless", "each-fits-not-together-in-turn", "25000-gpus"])
def test_status_stays_under_256_mib(answers: Callable[[], list[bytes]] | None, code: int, expected: str,
                                    tmp_path: Path) -> None:
    """`answers` is made when the test runs, not when it is collected (by every worker)."""
    with serving(None) if answers is None else serving_in_turn(answers()) as url:
        result = run_measured([FLEET, "status", "--prometheus", url, "--query-timeout", "60s"], tmp_path,
                              timeout=120)
    assert result.returncode == code, result.output[-2000:]
    assert expected in result.output and "Traceback" not in result.output, result.output[-2000:]
    assert result.max_rss_mib < MAX_RSS_MIB, f"{result.max_rss_mib:.0f} MiB"


@pytest.mark.parametrize(("said", "sent", "code", "expected"), [
    (10, 120, 2, "larger than 16,777,216 bytes"),  # undercounted: refused as it streams, never parsed
    (10, 50, 2, "more than 400,000 points in all"),  # undercounted, within the bytes: refused by its points
], ids=["undercounted-bytes", "undercounted-points"])
def test_a_weeks_report_stays_under_256_mib(said: int, sent: int, code: int, expected: str,
                                            tmp_path: Path) -> None:
    with report_server(said, sent) as url:
        result = run_measured([FLEET, "report", "--prometheus", url, "--since", "7d", "--query-timeout",
                               "60s", "--out", str(tmp_path / "out")], tmp_path, timeout=300)
    assert result.returncode == code, result.output[-2000:]
    assert expected in result.output and "Traceback" not in result.output, result.output[-2000:]
    assert result.max_rss_mib < MAX_RSS_MIB, f"{result.max_rss_mib:.0f} MiB"


def test_an_export_in_two_chunks_stays_under_256_mib(tmp_path: Path) -> None:
    """Two hours every minute of 500 GPUs: 60,500 rows, read in two chunks of at most ROWS_PER_CHUNK."""
    ranges: list[tuple[float, float, float]] = []
    with report_server(500, 500, ranges) as url:
        result = run_measured([FLEET, "export", "--prometheus", url, "--since", "2h", "--step", "60s",
                               "--series", "utilization", "--query-timeout", "60s"], tmp_path, timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.count("\n") == 1 + 500 * 121
    steps = [round((end - start) / step) + 1 for start, end, step in ranges]
    assert len(steps) == 2 and sum(steps) == 121 and max(steps) * 500 <= 50_000, steps
    assert result.max_rss_mib < MAX_RSS_MIB, f"{result.max_rss_mib:.0f} MiB"
