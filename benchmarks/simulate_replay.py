"""Benchmark: `gpu-autoscaler simulate` replaying a month of 15-second syncs (172,800 rows) of one rule.

Run: .venv/bin/python -m benchmarks.simulate_replay [--rows N] [--runs N]

Baseline measured in the same run: reading and validating the CSV alone (the floor any replay pays). Reported:
median seconds of reading, of the engine replay, of the whole command in-process (read + replay + write
the output CSV), per-sync cost, the ratio of each to the baseline, the largest history the engine carried
(bounded by pruning, so the cost per sync does not grow with the trace), and one end-to-end run of the
installed script.
"""

from __future__ import annotations

import argparse
import io
import math
import random
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from autoscaler.rules import load_rules
from autoscaler.simulate import read_trace, replay, write_output
from benchmarks.example_rules import embedding_service_rules

SYNC_SECONDS = 15
MONTH_ROWS = 172_800  # 30 days of 15-second syncs

RULES = embedding_service_rules(metrics="""\
      - {name: gpu_utilization, query: 'avg(x)', type: Average, target: 80}
      - {name: queue, query: 'sum(q)', type: Total, target: 50}
""", behavior="""\
    behavior:
      scaleUp: {stabilizationWindowSeconds: 60, policies: [{type: Percent, value: 100, periodSeconds: 60}]}
      scaleDown: {stabilizationWindowSeconds: 300, policies: [{type: Percent, value: 50, periodSeconds: 60}]}
""")


def write_trace(path: Path, rows: int, seed: int = 7) -> None:
    """A daily load curve with noise, bursts and an occasional failed query (empty cell)."""
    rng = random.Random(seed)
    with path.open("w") as out:
        out.write("t,gpu_utilization,queue\n")
        for i in range(rows):
            t = i * SYNC_SECONDS
            day = 0.5 - 0.45 * math.cos(2 * math.pi * t / 86_400)
            burst = 1.8 if (t // 3600) % 17 == 3 else 1.0
            load = max(0.0, day * burst + rng.gauss(0, 0.05))
            util = "" if rng.random() < 0.002 else f"{min(100.0, 40 + 60 * load):.1f}"
            queue = "" if rng.random() < 0.002 else f"{400 * load:.1f}"
            out.write(f"{t},{util},{queue}\n")


def median_seconds(fn: Callable[[], object], runs: int) -> float:
    samples = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=MONTH_ROWS)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="simulate-bench-") as tmp:
        rules_path, trace_path = Path(tmp, "rules.yaml"), Path(tmp, "trace.csv")
        rules_path.write_text(RULES)
        write_trace(trace_path, args.rows)
        rule = load_rules(rules_path).rules[0]
        rows = read_trace(str(trace_path), rule)

        def replay_only() -> int:
            longest = 0
            for _, decision in replay(rule, rows, rule.min_replicas):
                longest = max(longest, len(decision.history.recommendations))
            return longest

        def whole_command() -> None:
            out = io.StringIO()
            write_output(out, replay(rule, read_trace(str(trace_path), rule), rule.min_replicas))

        read_s = median_seconds(lambda: read_trace(str(trace_path), rule), args.runs)
        replay_s = median_seconds(replay_only, args.runs)
        whole_s = median_seconds(whole_command, args.runs)
        longest_history = replay_only()
        start = time.perf_counter()
        script = Path(sys.executable).parent / "gpu-autoscaler"
        done = subprocess.run([str(script), "simulate", str(rules_path), str(trace_path)],
                              capture_output=True, check=False, timeout=300)
        script_s = time.perf_counter() - start
        assert done.returncode == 0, done.stderr
    n = len(rows)
    days = n * SYNC_SECONDS / 86_400
    print(f"simulate replay benchmark: {n} rows ({days:.0f} days of {SYNC_SECONDS} s syncs), 1 rule, "
          f"2 metrics, median of {args.runs} runs")
    print(f"  baseline: read + validate CSV     {read_s:7.3f} s   1.00x")
    print(f"  engine replay (decide per row)   {replay_s:7.3f} s   {replay_s / read_s:5.2f}x   "
          f"{replay_s / n * 1e6:5.1f} us/sync")
    print(f"  whole command in-process         {whole_s:7.3f} s   {whole_s / read_s:5.2f}x")
    print(f"  installed script, end to end     {script_s:7.3f} s   (1 run, incl. interpreter start)")
    print(f"  largest history carried: {longest_history} recommendations (bounded by pruning)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
