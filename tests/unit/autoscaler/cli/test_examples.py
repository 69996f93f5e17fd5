"""Every rules file we ship as an example is valid: `check` (offline: fields and PromQL syntax) accepts it."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests import REPO_ROOT
from tests.measure import Run
from tests.support import CLI

ROOT = REPO_ROOT
EXAMPLES = sorted((ROOT / "examples").glob("*.yaml"))


def test_there_are_examples() -> None:
    assert {p.name for p in EXAMPLES} >= {"gpu-inference-rules.yaml", "llm-rollout-rules.yaml"}


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_example_passes_check(path: Path, cli: Run) -> None:
    done = cli("check", str(path))
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.startswith(f"{path}: OK: 1 rule(s)")


def test_the_console_script_checks_an_example_as_a_process() -> None:
    """The installed script itself, once: its exit status and output are those of the entry point above."""
    path = ROOT / "examples" / "gpu-inference-rules.yaml"
    done = subprocess.run([CLI, "check", str(path)], capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.startswith(f"{path}: OK: 1 rule(s)")
    bad = subprocess.run([CLI, "check", str(ROOT / "examples")], capture_output=True, text=True, timeout=60,
                         check=False)
    assert bad.returncode == 2 and "not a regular file" in bad.stdout + bad.stderr, bad.stdout + bad.stderr
