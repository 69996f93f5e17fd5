"""The Python part of scripts/gpu-check.sh: run the `gpu` test tier and the NVML benchmark, write one summary.

On a GPU machine (`--backend real`): the contract test on the real NVML (`pytest -m gpu`), then
benchmarks/nvml_sweep.py on the real NVML and on as many simulated H100s, with the ratios. With
`--backend simulated` (scripts/gpu-check.sh --simulate, what the suite runs here): the same contract test on
the simulated backend and the benchmark on one simulated H100, so the script is proven where no GPU is.

The summary (printed and written to `--output`) names the machine, the tier's outcome and the figures; the
benchmark's whole result is written beside it as JSON (`<output>.json`). Exit 0 when the tier passed (on a
GPU machine a skipped tier is a failure: NVML found no GPU), 1 otherwise.
"""

from __future__ import annotations

import argparse
import datetime
import json
import platform
import subprocess
import sys
import xml.etree.ElementTree as ElementTree
from dataclasses import dataclass
from pathlib import Path

from benchmarks.nvml_sweep import report, run
from exporter.errors import NvmlUnavailableError

CONTRACT = "tests/integration/exporter/test_gpu_contract.py"


@dataclass(frozen=True)
class TierOutcome:
    passed: int
    failed: int
    skipped: int
    log: str  # pytest's output

    @property
    def ok(self) -> bool:
        return self.passed > 0 and self.failed == 0


def run_tier(backend: str, junit: Path) -> TierOutcome:
    """The contract test of `backend` in a pytest of its own; counts from its JUnit XML."""
    marker = "gpu" if backend == "real" else "not gpu"
    argv = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "-n", "0", "-m", marker,
            f"--junitxml={junit}", CONTRACT]
    done = subprocess.run(argv, capture_output=True, text=True, check=False, timeout=600)
    counts = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
    if junit.exists():
        root = ElementTree.parse(junit).getroot()
        suite = root if root.tag == "testsuite" else root.find("testsuite")
        if suite is not None:
            counts = {key: int(suite.get(key, "0")) for key in counts}
    failed = counts["failures"] + counts["errors"] + (0 if done.returncode in (0, 5) else 1)
    passed = counts["tests"] - counts["failures"] - counts["errors"] - counts["skipped"]
    return TierOutcome(max(passed, 0), failed, counts["skipped"], done.stdout + done.stderr)


def summary(backend: str, tier: TierOutcome, bench: str) -> str:
    now = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    verdict = "PASSED" if tier.ok else "FAILED"
    lines = [f"gpu-check {now} on {platform.node()} ({backend} NVML)",
             f"tier ({CONTRACT}, -m {'gpu' if backend == 'real' else 'not gpu'}): {verdict}: "
             f"{tier.passed} passed, {tier.failed} failed, {tier.skipped} skipped", bench]
    if not tier.ok:
        lines += ["pytest said:", tier.log.strip()[-4000:]]
    if tier.skipped and backend == "real":
        lines.append("the tier was skipped: this machine's NVML found no GPU (the reason is above)")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.gpu_check",
                                     description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--backend", choices=("real", "simulated"), default="real")
    parser.add_argument("--output", default="gpu-check-summary.txt",
                        help="summary file (default %(default)s)")
    parser.add_argument("--sweeps", type=int, default=200, help="timed sweeps (default 200)")
    parser.add_argument("--scrapes", type=int, default=200, help="timed scrapes (default 200)")
    args = parser.parse_args(argv)
    if min(args.sweeps, args.scrapes) < 1:
        parser.error("--sweeps and --scrapes must be at least 1")
    output = Path(args.output)
    output.parent.mkdir(parents=True, exist_ok=True)
    tier = run_tier(args.backend, output.with_suffix(".junit.xml"))
    try:
        result = run(args.backend, 1, args.sweeps, args.scrapes, compare=args.backend == "real")
    except NvmlUnavailableError as exc:  # no driver or no GPU: the tier says so too
        result, bench = {"error": str(exc)}, f"benchmark not run: {exc}"
    else:
        bench = report(result) + ("\n" + report(result["simulated"]) if "simulated" in result else "")
    text = summary(args.backend, tier, bench)
    output.write_text(text, encoding="utf-8")
    output.with_suffix(".json").write_text(json.dumps(result, indent=2), encoding="utf-8")
    print(text, end="")
    return 0 if tier.ok else 1


if __name__ == "__main__":
    sys.exit(main())
