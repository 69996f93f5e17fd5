"""mypy --strict stays clean on every production package (autoscaler, plumbing, fleet, exporter: named in
pyproject.toml's [tool.mypy]), the generated gRPC stubs aside."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests import REPO_ROOT

ROOT = REPO_ROOT


def mypy(tmp_path: Path, *targets: str) -> subprocess.CompletedProcess[str]:
    """mypy of the suite's virtualenv with the project's config; a private cache keeps xdist workers apart."""
    return subprocess.run(
        [sys.executable, "-m", "mypy", "--config-file", str(ROOT / "pyproject.toml"),
         "--cache-dir", str(tmp_path / "cache"), *targets],
        cwd=ROOT, capture_output=True, text=True, timeout=240, check=False,
    )


@pytest.mark.timeout(300)
def test_every_production_package_is_strictly_typed(tmp_path: Path) -> None:
    result = mypy(tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Success: no issues found" in result.stdout


@pytest.mark.timeout(300)
def test_the_check_fails_on_an_ill_typed_module(tmp_path: Path) -> None:
    """The same config rejects a wrong assignment and (strict) an untyped function: a pass means something."""
    bad = tmp_path / "ill_typed.py"
    bad.write_text('count: int = "three"\n\n\ndef double(x):\n    return x * 2\n')
    result = mypy(tmp_path, str(bad))
    assert result.returncode == 1, result.stdout + result.stderr
    assert "[assignment]" in result.stdout and "[no-untyped-def]" in result.stdout, result.stdout
