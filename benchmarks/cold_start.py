"""Benchmark: a new user's first minute, from a fresh clone to the demo's first live line.

Run: .venv/bin/python -m benchmarks.cold_start [--runs 3]

Each run clones this repository into a temporary directory (a local clone: no network), gives uv and pip
empty caches, and starts `./scripts/demo.sh` there as a user would: the virtualenv is created, the locked
dependencies are downloaded from the package registry and installed, the exporters, Prometheus and the
controller start, and the demo warms up. It stops the demo at its first sync line (`[   0.0s] ...`) and
reports the seconds to it, the longest silent phase (seconds with no new line on the terminal) and the line
that ended it. The baseline measured in the same run is the demo started again in the same clone, with
everything installed: what the set-up costs is the difference. Debian packages (Prometheus) are taken as
installed: a fresh machine's apt-get adds its own download time, announced by a line of its own.
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FIRST_SYNC = "[   0.0s]"
LIMIT_SECONDS = 300.0
"""A run that has not shown the first sync line by then is reported as failed (a hang guard)."""


@dataclass(frozen=True)
class Run:
    seconds: float
    longest_silence: float
    silence_ended_by: str


def first_line(clone: Path, env: dict[str, str]) -> Run:
    """Start ./scripts/demo.sh in `clone`; seconds to its first sync line and its longest silent phase."""
    start = time.monotonic()
    last = start
    longest, ended_by = 0.0, ""
    process = subprocess.Popen(["./scripts/demo.sh"], cwd=clone, env=env, stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True, start_new_session=True)
    assert process.stdout is not None
    try:
        for line in process.stdout:
            now = time.monotonic()
            if now - last > longest:
                longest, ended_by = now - last, line.strip()[:100]
            last = now
            if FIRST_SYNC in line:
                return Run(now - start, longest, ended_by)
            if now - start > LIMIT_SECONDS:
                break
        raise SystemExit(f"cold_start: no first sync line within {LIMIT_SECONDS:g} s (exit {process.poll()})")
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args(argv)
    cold: list[Run] = []
    warm: list[Run] = []
    for number in range(1, args.runs + 1):
        with tempfile.TemporaryDirectory(prefix="cold-start-") as scratch:
            clone = Path(scratch) / "gpu-autoscaler"
            subprocess.run(["git", "clone", "--quiet", str(ROOT), str(clone)], check=True)
            env = {**os.environ, "UV_CACHE_DIR": str(Path(scratch) / "uv-cache"), "PIP_NO_CACHE_DIR": "1",
                   "PYTHONUNBUFFERED": "1"}
            env.pop("VIRTUAL_ENV", None)
            cold.append(first_line(clone, env))
            warm.append(first_line(clone, env))
        last = cold[-1]
        print(f"run {number}: cold {last.seconds:.1f} s (longest silence {last.longest_silence:.1f} s, "
              f"ended by {last.silence_ended_by!r}); installed {warm[-1].seconds:.1f} s", file=sys.stderr)
    cold_median = statistics.median(r.seconds for r in cold)
    warm_median = statistics.median(r.seconds for r in warm)
    print(f"fresh clone to the first demo line: median {cold_median:.1f} s over {args.runs} run(s) "
          f"(min {min(r.seconds for r in cold):.1f}, max {max(r.seconds for r in cold):.1f})")
    print(f"  the same clone, installed: median {warm_median:.1f} s; set-up costs "
          f"{cold_median - warm_median:.1f} s ({cold_median / warm_median:.2f}x)")
    print(f"  longest silent phase: median {statistics.median(r.longest_silence for r in cold):.1f} s, "
          f"max {max(r.longest_silence for r in cold):.1f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
