"""Benchmark: `gpu-fleet`'s peak memory on the largest fleets, against its bound of 256 MiB.

Run: .venv/bin/python -m benchmarks.fleet_memory [--runs 3]

Each case runs the installed `gpu-fleet` against a fake Prometheus (tests/big_answers.py) answering for a
fleet of that size, and reads the command's peak resident memory from its own rusage (tests/measure.py: a
small launcher in between, so the figure is the command's, not this process's). The baseline measured in the
same run is `gpu-fleet status` on a fleet of 8 GPUs: what the interpreter and the imports take.

- a week's `report` of 3,000 GPUs (the step grows with the GPUs counted: one point every 5 h);
- an `export` of two hours every minute of 4,000 GPUs (484,000 rows, in chunks of at most 50,000);
- `status` of 25,000 GPUs (one 5 MB answer per query, parsed one at a time).

The suite (tests/integration/fleet/test_memory_bounded.py) runs the same bounds on smaller fleets and on the
hostile answers; these are the sizes the docs quote. Exit status 1 if a case exceeds 256 MiB or fails.
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from tests.big_answers import report_server, serving, vector
from tests.measure import Measured, run_measured

FLEET = str(Path(sys.executable).parent / "gpu-fleet")
BOUND_MIB = 256.0


@dataclass(frozen=True)
class Case:
    name: str
    server: Callable[[], contextlib.AbstractContextManager[str]]
    args: Callable[[str, Path], list[str]]
    """The command's arguments, given the fake Prometheus' URL and a scratch directory."""


def _cases() -> list[Case]:
    return [
        Case("baseline: status of 8 GPUs", lambda: serving(vector(8)),
             lambda url, _: ["status", "--prometheus", url]),
        Case("report: a week of 3,000 GPUs", lambda: report_server(3000, 3000),
             lambda url, scratch: ["report", "--prometheus", url, "--since", "7d", "--query-timeout", "60s",
                                   "--out", str(scratch / "report")]),
        Case("export: 2 h every minute of 4,000 GPUs", lambda: report_server(4000, 4000),
             lambda url, _: ["export", "--prometheus", url, "--since", "2h", "--step", "60s", "--series",
                             "utilization", "--query-timeout", "60s"]),
        Case("status: 25,000 GPUs", lambda: serving(vector(25_000)),
             lambda url, _: ["status", "--prometheus", url, "--query-timeout", "60s"]),
    ]


def measure(case: Case) -> Measured:
    with tempfile.TemporaryDirectory() as scratch, case.server() as url:
        return run_measured([FLEET, *case.args(url, Path(scratch))], Path(scratch), timeout=300)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.fleet_memory",
                                     description="gpu-fleet's peak memory on the largest fleets")
    parser.add_argument("--runs", type=int, default=3, help="runs of each case; the median is reported")
    args = parser.parse_args(argv)
    if args.runs < 1:
        parser.error("--runs must be >= 1")
    failed = False
    baseline = None
    print(f"| case | peak MiB (median of {args.runs}) | x baseline | seconds | under {BOUND_MIB:g} MiB |")
    print("|---|---:|---:|---:|---|")
    for case in _cases():
        runs = [measure(case) for _ in range(args.runs)]
        bad = [run for run in runs if run.returncode != 0]
        if bad:
            print(f"{case.name}: exit {bad[0].returncode}: {bad[0].stderr[-500:]}", file=sys.stderr)
            failed = True
            continue
        peak = statistics.median(run.max_rss_mib for run in runs)
        seconds = statistics.median(run.seconds for run in runs)
        baseline = baseline or peak
        within = peak < BOUND_MIB
        failed |= not within
        verdict = "yes" if within else "NO"
        print(f"| {case.name} | {peak:.0f} | {peak / baseline:.2f} | {seconds:.1f} | {verdict} |")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
