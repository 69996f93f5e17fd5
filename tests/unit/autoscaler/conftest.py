"""Fixtures for the CLI tests: a valid rules file and a runner of `gpu-autoscaler` (its type, `Run`, is in
tests/measure.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.measure import Measured, Run, run_in_process
from tests.rules import SECOND_RULE, VALID_RULES
from tests.support import CLI


@pytest.fixture
def cli(tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> Run:
    """Run `gpu-autoscaler ARGS...` in tmp_path through its entry point, in this process: exit code and
    output as the console script gives them, without a Python start-up per call (the console script itself
    runs as a process in tests/unit/autoscaler/cli/test_examples.py)."""
    monkeypatch.chdir(tmp_path)

    def run(*args: str) -> Measured:
        return run_in_process([CLI, *args], capsys)

    return run


@pytest.fixture
def rules_file(tmp_path: Path) -> Path:
    path = tmp_path / "rules.yaml"
    path.write_text(VALID_RULES)
    return path


@pytest.fixture
def two_rules_file(tmp_path: Path) -> Path:
    path = tmp_path / "two.yaml"
    path.write_text(VALID_RULES + SECOND_RULE)
    return path
