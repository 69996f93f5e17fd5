"""Benchmark: `gpu-autoscaler simulate` replaying a month of 15-second syncs (172,800 rows) of one rule.

Run: .venv/bin/python -m benchmarks.simulate_replay [--rows N] [--runs N]

Baseline measured in the same run: reading and validating the CSV alone (the floor any replay pays). Reported:
median seconds of reading, of the controller's plan row by row (the replay of earlier versions, the
reference), of the whole-trace replay `simulate` uses (`autoscaler.planning.trace_replay`), of the whole
command in-process (read + replay + write the output CSV) and of the installed script end to end; per-sync
costs, ratios, and the largest history the row-by-row engine carried. It fails if the two replays differ on
any row, or if the installed script prints something else than the in-process command.

Two rules the whole-trace replay does not cover go row by row, each at two lengths so a cost that grows
faster than the rows shows as a per-row cost that grows: the same rule with panic mode over a trace whose rows
are 10 ms apart (every row inside the windows: the history must not carry them all), and with an overload
budget over 15 s rows (a headroom recomputed every minute from a day of rises).
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

from autoscaler.cli.simulate import replay, replay_trace, write_output
from autoscaler.config.rules import load_rules
from autoscaler.planning.trace_csv import read_trace
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


PANIC = "      panic: {windowSeconds: 30, thresholdPercent: 110}\n"
BUDGET = "    overloadBudget: {percentOfMinutes: 5, startupSeconds: 120}\n"
PANIC_ROWS = (10_000, 25_000)
DENSE_SECONDS = 0.01
BUDGET_ROWS = (20_000, 60_000)


def write_trace(path: Path, rows: int, seed: int = 7, t_step: float = SYNC_SECONDS) -> None:
    """A daily load curve with noise, bursts and an occasional failed query (empty cell); row i is written at
    t = i * t_step, its load that of i 15 s syncs."""
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
            out.write(f"{round(i * t_step, 6):g},{util},{queue}\n" if t_step != SYNC_SECONDS
                      else f"{t},{util},{queue}\n")


def median_seconds(fn: Callable[[], object], runs: int) -> float:
    samples = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)


def row_by_row_seconds(tmp: str, extra: str, rows: int, t_step: float, runs: int) -> tuple[float, int]:
    """Median seconds of replaying `rows` rows of RULES plus `extra` (a rule `trace_replay` does not cover, so
    `simulate` goes row by row), and the largest history carried."""
    rules_path, trace_path = Path(tmp, "rules-extra.yaml"), Path(tmp, "trace-extra.csv")
    rules_path.write_text(RULES + extra)
    write_trace(trace_path, rows, t_step=t_step)
    rule = load_rules(rules_path).rules[0]
    trace = read_trace(str(trace_path), rule)
    seconds = median_seconds(lambda: replay_trace(rule, trace, rule.min_replicas), runs)
    plans = replay(rule, trace.rows(rule), rule.min_replicas)
    longest = max(len(p.history.recommendations) for _, p in plans)
    return seconds, longest


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
        trace = read_trace(str(trace_path), rule)
        rows = trace.rows(rule)

        def row_by_row() -> list[tuple[int, int | None, str]]:
            plans = replay(rule, rows, rule.min_replicas)
            return [(p.replicas, p.desired_raw, p.reason.value) for _, p in plans]

        def whole_command() -> str:
            out = io.StringIO()
            read = read_trace(str(trace_path), rule)
            write_output(out, read, replay_trace(rule, read, rule.min_replicas))
            return out.getvalue()

        read_s = median_seconds(lambda: read_trace(str(trace_path), rule), args.runs)
        plan_s = median_seconds(row_by_row, max(1, args.runs // 2))
        replay_s = median_seconds(lambda: replay_trace(rule, trace, rule.min_replicas), args.runs)
        whole_s = median_seconds(whole_command, args.runs)
        replayed = replay_trace(rule, trace, rule.min_replicas)
        identical = row_by_row() == list(zip(replayed.replicas, replayed.desired,
                                             [r.value for r in replayed.reasons], strict=True))
        plans = replay(rule, rows, rule.min_replicas)
        longest_history = max(len(p.history.recommendations) for _, p in plans)
        script = Path(sys.executable).parent / "gpu-autoscaler"
        script_runs = []
        for _ in range(args.runs):
            start = time.perf_counter()
            done = subprocess.run([str(script), "simulate", str(rules_path), str(trace_path)],
                                  capture_output=True, check=False, timeout=300, text=True)
            script_runs.append(time.perf_counter() - start)
            assert done.returncode == 0, done.stderr
        assert done.stdout == whole_command(), "the installed script printed something else"
        extra_runs = max(1, args.runs // 2)
        panic = [row_by_row_seconds(tmp, PANIC, n, DENSE_SECONDS, extra_runs) for n in PANIC_ROWS]
        budget = [row_by_row_seconds(tmp, BUDGET, n, SYNC_SECONDS, extra_runs) for n in BUDGET_ROWS]
    assert identical, "the incremental replay differs from the controller's plan row by row"
    script_s = statistics.median(script_runs)
    n = len(rows)
    days = n * SYNC_SECONDS / 86_400
    print(f"simulate replay benchmark: {n} rows ({days:.0f} days of {SYNC_SECONDS} s syncs), 1 rule, "
          f"2 metrics, median of {args.runs} runs")
    print(f"  baseline: read + validate CSV        {read_s:7.3f} s   1.00x")
    print(f"  engine, plan_replicas row by row    {plan_s:7.3f} s   {plan_s / read_s:5.2f}x   "
          f"{plan_s / n * 1e6:5.1f} us/sync")
    print(f"  engine, incremental replay          {replay_s:7.3f} s   {replay_s / read_s:5.2f}x   "
          f"{replay_s / n * 1e6:5.1f} us/sync   ({plan_s / replay_s:.1f}x faster, identical output: "
          f"{identical})")
    print(f"  whole command in-process            {whole_s:7.3f} s   {whole_s / read_s:5.2f}x")
    print(f"  installed script, end to end        {script_s:7.3f} s   (incl. interpreter start and imports)")
    print(f"  largest history carried row by row: {longest_history} recommendations (bounded by pruning)")
    read_per_row = read_s / n
    for label, sizes, results in (
            (f"panic rule, rows {DENSE_SECONDS * 1000:g} ms apart", PANIC_ROWS, panic),
            ("overloadBudget rule, 15 s rows", BUDGET_ROWS, budget)):
        for rows_n, (seconds, longest) in zip(sizes, results, strict=True):
            per_row = seconds / rows_n
            print(f"  {label}: {rows_n:>6} rows {seconds:7.3f} s   {per_row * 1e6:5.1f} us/sync   "
                  f"{per_row / read_per_row:5.1f}x the baseline's per row   "
                  f"{per_row / (plan_s / n):4.2f}x the plan row by row above   history <= {longest}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
