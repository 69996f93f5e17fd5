"""Every rules file we ship as an example is valid: `check` (offline: fields and PromQL syntax) accepts it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests import REPO_ROOT

ROOT = REPO_ROOT
EXAMPLES = sorted((ROOT / "examples").glob("*.yaml"))


def test_there_are_examples() -> None:
    assert {p.name for p in EXAMPLES} >= {"gpu-inference-rules.yaml", "llm-rollout-rules.yaml"}


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_example_passes_check(path: Path) -> None:
    cli = str(Path(sys.executable).parent / "gpu-autoscaler")
    done = subprocess.run([cli, "check", str(path)], capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.startswith(f"{path}: OK: 1 rule(s)")
