"""`gpu-fleet` end to end against a Prometheus whose labels are hostile (tests/big_answers.py `labelled`): no
output a user pastes or opens obeys them. Tables show control characters as escapes, CSV text cells a
spreadsheet would run as formulas are quoted, `select -o docker` puts only GPU/MIG UUIDs on the command line;
and bad flags and endless files are refused before any query."""

from __future__ import annotations

import csv
import io
import json
import shlex
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.big_answers import labelled
from tests.hostile import endless_files
from tests.integration.fleet.conftest import FLEET

pytestmark = pytest.mark.integration

GOOD_UUID = "GPU-12345678-1234-1234-1234-123456789abc"
GPUS = [
    {"node": '=HYPERLINK("http://evil","click")', "gpu": "0", "uuid": "GPU-x --privileged -v /:/host",
     "model": "+cmd|' /C calc'!A0", "namespace": "ml", "pod": "@SUM(1+1)"},
    {"node": "n\x1b]0;owned\x07\x1b[31m\u009b2J\b", "gpu": "1", "uuid": f"{GOOD_UUID},all", "model": "-2+3"},
    {"node": "node-c", "gpu": "2", "uuid": GOOD_UUID, "model": "H100\x1b[8m"},
]
CONTROLS = ("\x1b", "\u009b", "\b", "\x07")
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def fleet(url: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([FLEET, *args, "--prometheus", url], capture_output=True, text=True, timeout=120)


def no_controls(text: str) -> None:
    assert not [c for c in CONTROLS if c in text], text[:2000]


def no_formulas(text: str) -> None:
    for row in csv.reader(io.StringIO(text)):
        for cell in row:
            assert not cell.startswith(FORMULA_STARTS), row


@pytest.fixture(scope="module")
def url() -> Iterator[str]:
    with labelled(GPUS) as served:
        yield served


@pytest.mark.parametrize("args", [["status"], ["status", "-o", "wide"],
                                  ["export", "--since", "3m", "-o", "wide"],
                                  ["report", "--since", "1h", "--quiet", "-o", "wide"]],
                         ids=["status", "status-wide", "export-wide", "report-markdown"])
def test_tables_show_control_characters_as_escapes(url: str, args: list[str]) -> None:
    result = fleet(url, *args)
    assert result.returncode == 0, result.stderr
    no_controls(result.stdout)
    assert "n\\x1b]0;owned\\x07\\x1b[31m\\u009b2J\\x08" in result.stdout


@pytest.mark.parametrize("args", [["status", "-o", "csv"], ["export", "--since", "3m"],
                                  ["report", "--since", "1h", "--quiet", "-o", "csv"]],
                         ids=["status", "export", "report"])
def test_csv_cells_are_never_formulas(url: str, args: list[str]) -> None:
    result = fleet(url, *args)
    assert result.returncode == 0, result.stderr
    no_formulas(result.stdout)
    no_controls(result.stdout)
    assert "'=HYPERLINK(" in result.stdout  # quoted, not dropped


def test_docker_takes_only_a_real_uuid(url: str) -> None:
    result = fleet(url, "select", "--gpus", "1", "-o", "docker")
    assert result.returncode == 0, result.stderr
    assert shlex.split(result.stdout) == ["--gpus", f'"device={GOOD_UUID}"']


def test_docker_refuses_rather_than_pass_a_hostile_uuid(url: str) -> None:
    result = fleet(url, "select", "--gpus", "2", "-o", "docker")
    assert result.returncode == 1 and result.stdout == ""
    assert "2 uuid not a GPU or MIG UUID" in result.stderr


def test_the_json_docker_field_leaves_hostile_uuids_out(url: str) -> None:
    result = fleet(url, "select", "--gpus", "1", "--model", "cmd", "-o", "json")
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["docker"] is None
    assert "not a GPU or MIG UUID" in result.stderr


def test_a_bad_request_flag_is_exit_2_before_any_query() -> None:
    asked: list[str] = []
    with labelled(GPUS, asked) as served:
        result = fleet(served, "estimate", "--params", "7B", "--then-select", "--max-utilization", "101")
    assert result.returncode == 2 and "--max-utilization" in result.stderr
    assert asked == []


@pytest.mark.timeout(60)  # read whole, a FIFO hangs for ever and /dev/zero fills the memory
def test_an_endless_task_config_is_exit_2_before_any_query(tmp_path: Path) -> None:
    asked: list[str] = []
    with labelled(GPUS, asked) as served:
        for name, path, message in endless_files(tmp_path):
            result = fleet(served, "estimate", "--task-config", str(path))
            assert result.returncode == 2, name
            assert message in result.stderr and "Traceback" not in result.stderr, result.stderr
    assert asked == []
