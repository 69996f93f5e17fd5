"""scripts/gpu-check.sh works here, on the simulated NVML: the `gpu` tier's contract test and the NVML
benchmark run, the summary is printed and written; on this machine's real NVML (no GPU) it says why it
failed and exits 1; a bad flag exits 2. The real-GPU run itself needs a GPU machine (docs/development.md)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests import REPO_ROOT

pytestmark = pytest.mark.integration
SCRIPT = str(REPO_ROOT / "scripts" / "gpu-check.sh")


def check(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([SCRIPT, "--python", sys.executable, "--sweeps", "5", "--scrapes", "5", *args],
                          capture_output=True, text=True, timeout=300, check=False)


@pytest.mark.slow
def test_simulate_runs_the_tier_and_the_benchmark_and_writes_the_summary(tmp_path: Path) -> None:
    summary = tmp_path / "out" / "summary.txt"
    done = check("--simulate", "--output", str(summary))
    assert done.returncode == 0, done.stdout + done.stderr
    text = summary.read_text()
    assert text in done.stdout  # printed and written alike
    assert "PASSED: 1 passed, 0 failed, 0 skipped" in text and "(simulated NVML)" in text
    result = json.loads(summary.with_suffix(".json").read_text())
    assert result["backend"] == "simulated" and result["gpus"] == 1 and result["sweeps"] == 5
    assert result["sweep_per_gpu"]["count"] == 5 and result["scrape"]["count"] == 5
    assert "nvmlDeviceGetUtilizationRates" in result["calls"]  # a sweep call, timed by name


def test_without_a_gpu_the_real_check_fails_saying_why(tmp_path: Path) -> None:
    summary = tmp_path / "summary.txt"
    done = check("--output", str(summary))
    assert done.returncode == 1, done.stdout + done.stderr
    text = summary.read_text()
    assert "FAILED: 0 passed, 0 failed, 1 skipped" in text and "no NVIDIA GPU here" in text
    assert "benchmark not run" in text


@pytest.mark.parametrize("args", [["--frobnicate"], ["--sweeps", "many"], ["--wheelhouse"],
                                  ["--wheelhouse", "/nonexistent-wheels"]],
                         ids=["unknown", "not-a-number", "missing-value", "no-such-wheelhouse"])
def test_a_bad_flag_exits_2(args: list[str]) -> None:
    done = subprocess.run([SCRIPT, *args], capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 2 and done.stderr.startswith("gpu-check: ") and done.stdout == ""


def test_the_cuda_process_without_a_driver_says_why_and_exits_1() -> None:
    """tests/cuda_process.py runs on a GPU only; here (no libcuda) its failure path: one line, exit 1."""
    done = subprocess.run([sys.executable, str(REPO_ROOT / "tests" / "cuda_process.py"), "--mib", "1"],
                          capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 1 and done.stdout == ""
    assert done.stderr.startswith("error: ") and "libcuda" in done.stderr
