"""`gpu-autoscaler simulate` fed hostile traces (CSV), as a child process: exit 2 and one message naming the
file, line and column, no traceback, in bounded memory, under a hang guard; a huge but finite value is a
valid input."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.hostile import AUTOSCALER, HANG_SECONDS, MAX_RSS_MIB, RULES
from tests.measure import run_measured

HOSTILE_TRACES = [
    ("50-MB", b"t,util\n" + b"0,0.5\n" * (50 * 1024 * 1024 // 6), "larger than 16,777,216 bytes", None),
    ("5000-digit-cell", b"t,util\n0," + b"9" * 5000 + b"\n", "util: a number 5,000 characters long", 2),
    ("5000-digit-time", b"t,util\n" + b"1" * 5000 + b",0.5\n", "t: a number 5,000 characters long", 2),
    ("time-1e308", b"t,util\n1e308,0.5\n", "t: expected a time within", 2),
    ("nan-cell", b"t,util\n0,nan\n", "util: expected a finite number (got 'nan')", 2),
    ("inf-cell", b"t,util\n0,1e999\n", "util: expected a finite number (got '1e999')", 2),
    ("not-utf8", b"t,util\n0,0.5\n15,caf\xe9\n", "not UTF-8 text (byte 0xe9", 3),
    ("empty", b"", "the trace is empty", 1),
    ("too-many-rows", b"t,util\n" + b"0,1\n" * 200_001, "more than 200,000 rows", 200_002),
    ("too-many-columns", b"t,util\n0" + b",1" * 100_000 + b"\n", "expected 2 cells (t,util) (got 100001)", 2),
    ("huge-cell", b"t,util\n0,\"" + b"x" * 200_000 + b"\"\n", "not valid CSV", None),
]


@pytest.fixture(scope="module")
def rules(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("trace") / "rules.yaml"
    path.write_text(RULES)
    return path


@pytest.mark.parametrize(("content", "expected", "line"), [pytest.param(c, e, n, id=i)
                                                           for i, c, e, n in HOSTILE_TRACES])
def test_hostile_trace_is_one_message_exit_2(content: bytes, expected: str, line: int | None,
                                              rules: Path) -> None:
    trace = rules.parent / "hostile.csv"
    trace.write_bytes(content)
    try:
        result = run_measured([AUTOSCALER, "simulate", str(rules), str(trace)], rules.parent, HANG_SECONDS)
    finally:
        trace.unlink()
    assert result.returncode == 2, result.output[-2000:]
    assert "Traceback" not in result.output
    assert result.stdout == ""  # the trace is validated before the first output line
    message = result.stderr.strip()
    assert "\n" not in message and expected in message, message
    assert message.startswith(f"{trace}:{line}:" if line is not None else f"{trace}:"), message
    assert result.max_rss_mib < MAX_RSS_MIB


def test_a_huge_finite_value_proposes_max_replicas(rules: Path) -> None:
    """1e308 is a number the engine must survive (capped, never OverflowError): maxReplicas, exit 0."""
    trace = rules.parent / "huge.csv"
    trace.write_text("t,util\n0,1e308\n15,1e308\n")
    result = run_measured([AUTOSCALER, "simulate", str(rules), str(trace)], rules.parent)
    assert result.returncode == 0, result.output
    assert result.stdout.splitlines()[-1].split(",")[1] == "10"  # maxReplicas of RULES
