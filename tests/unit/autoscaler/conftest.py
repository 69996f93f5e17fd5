"""Fixtures for the CLI tests: a valid rules file and a runner of the installed `gpu-autoscaler` script
(its type, `Run`, is in tests/support.py)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.rules import SECOND_RULE, VALID_RULES
from tests.support import CLI, Run


@pytest.fixture
def cli(tmp_path: Path) -> Run:
    """Run `gpu-autoscaler ARGS...` in tmp_path; returns the completed process (text stdout/stderr)."""

    def run(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [CLI, *args], cwd=tmp_path, capture_output=True, text=True, timeout=timeout, check=False
        )

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
