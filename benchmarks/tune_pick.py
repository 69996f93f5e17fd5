"""Benchmark: tune's pick from a week of history, replayed on the autoscaling-quality traces.

What a user does: run the recommended configuration (c) for a week, then `gpu-autoscaler tune` on that week
with an overload budget of half its overloaded minutes, and ship the pick. Here the week is played in the
replay's model (demo.replay) under (c), and what Prometheus would hold is taken from it every 15 s, as tune
fetches it: the request rate over the query's minute and over the panic window's 30 s, the mean GPU
utilization of the replicas, the replicas the controller ran. `autoscaler.planning.tuning.recommend` (what
`tune` runs once it has fetched) picks from its candidates, trained on six days and checked on the seventh;
the pick is then replayed on every trace of the quality benchmark, and on the held-out traces, against (c).
Two weeks are tried: seven draws of the daily curve, and seven of the bursty day (the swings fall elsewhere
each day).

    .venv/bin/python -m benchmarks.tune_pick               # both weeks, about 3 minutes of one core
    .venv/bin/python -m benchmarks.tune_pick --week bursty
"""

from __future__ import annotations

import argparse
import dataclasses
from collections.abc import Callable, Sequence

from autoscaler.planning.counterfactual import HistoryStep, ReplaySetup, score
from autoscaler.planning.tuning import PANIC, Recommendation, recommend
from autoscaler.policy import MetricObservation, Rule
from benchmarks.autoscaling_quality import _ratio, configurations
from demo.replay import GPU_UTILIZATION, REQUESTS_PER_SECOND, ReplayResult, ReplaySettings, Sample, replay
from demo.traces import DAY_SECONDS, Trace, benchmark_traces, bursty, daily, held_out_traces

WEEK_SEEDS = range(31, 38)
"""The seven days of a training week: draws no trace of the quality benchmark uses."""
STARTUP_SECONDS = 120.0
PANIC_WINDOW_SECONDS = float(PANIC.window_seconds)
"""What tune fetches for a rule without panic of its own: each query over the panic candidate's window."""
"""The replay's model loading, given to tune as --startup-seconds would be."""

WEEKS: dict[str, Callable[[int], Trace]] = {"daily": lambda seed: daily(seed=seed),
                                            "bursty": lambda seed: bursty(seed=seed)}


def week(name: str) -> Trace:
    """Seven draws of one day, played one after the other."""
    days = [WEEKS[name](seed) for seed in WEEK_SEEDS]

    def load(t: float) -> float:
        index = min(int(t // DAY_SECONDS), len(days) - 1)
        return days[index](t - index * DAY_SECONDS)

    return Trace(f"{name} week", f"seven draws of {days[0].description}", len(days) * DAY_SECONDS, load)


def recorded_history(rule: Rule, result: ReplayResult, settings: ReplaySettings) -> list[HistoryStep]:
    """What Prometheus holds of a replay, every sync: each metric as its query returns it, the replicas."""
    per_sync = round(settings.sync_period_seconds / settings.step_seconds)
    samples = result.samples
    history = []
    for index in range(0, len(samples), per_sync):
        sample = samples[index]
        observations = []
        for metric in rule.metrics:
            if metric.name == REQUESTS_PER_SECOND:  # rate(...[1m]), and over tune's 30 s panic window
                per_gpu = settings.requests_per_gpu_second
                rate, short = (_mean_load(samples, index, seconds, settings) * per_gpu
                               for seconds in (60.0, PANIC_WINDOW_SECONDS))
                observations.append(MetricObservation(metric.name, rate, panic_value=short))
            elif metric.name == GPU_UTILIZATION and sample.utilization is not None:
                observations.append(MetricObservation(metric.name, 100.0 * sample.utilization))
            else:
                observations.append(MetricObservation(metric.name, None, "no sample"))
        history.append(HistoryStep(sample.t, tuple(observations), sample.replicas))
    return history


def _mean_load(samples: Sequence[Sample], index: int, seconds: float, settings: ReplaySettings) -> float:
    """The mean load of the steps in the last `seconds` up to `index`: what a rate() over them returns."""
    window = samples[max(0, index - round(seconds / settings.step_seconds) + 1):index + 1]
    return sum(s.load for s in window) / len(window)


@dataclasses.dataclass(frozen=True)
class Pick:
    week: str
    recommendation: Recommendation
    budget_minutes: float
    rule: Rule


def tune_on_week(name: str, current: Rule, settings: ReplaySettings) -> Pick:
    """tune's pick for `current` from a week of its own history, within half its overloaded minutes."""
    history = recorded_history(current, replay(current, week(name), settings), settings)
    setup = ReplaySetup(settings.sync_period_seconds, history[0].recorded_replicas or current.min_replicas,
                        STARTUP_SECONDS)
    budget = score(current, current, history, setup).overloaded_minutes / 2
    result = recommend(current, history, setup, budget)
    return Pick(name, result, budget, result.best.candidate.rule if result.best else current)


def pick_table(picks: Sequence[Pick], current: Rule, traces: Sequence[Trace], settings: ReplaySettings,
               ) -> str:
    """Each pick against (c) on each trace, with the issue's bar: at most half the overloaded minutes for at
    most 5 % more GPU-hours."""
    lines = ["| trained on | pick | trace | GPU-hours vs (c) | overloaded min, pick / (c) | bar |",
             "|---|---|---|---:|---:|---|"]
    baseline = {trace.name: replay(current, trace, settings).figures for trace in traces}
    for pick in picks:
        label = pick.recommendation.best.candidate.label if pick.recommendation.best else "(c) kept"
        for trace in traces:
            c = baseline[trace.name]
            f = replay(pick.rule, trace, settings).figures
            met = f.gpu_hours <= 1.05 * c.gpu_hours and f.overloaded_minutes <= c.overloaded_minutes / 2
            lines.append(f"| {pick.week} | {label} | {trace.name} | {_ratio(f.gpu_hours, c.gpu_hours)} | "
                         f"{f.overloaded_minutes:.1f} / {c.overloaded_minutes:.1f} | "
                         f"{'met' if met else 'not met'} |")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.tune_pick", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--week", choices=sorted(WEEKS), action="append",
                        help="train on this week only (repeatable; default both)")
    args = parser.parse_args(argv)
    settings = ReplaySettings()
    current = configurations()[2].rule
    picks = [tune_on_week(name, current, settings) for name in (args.week or sorted(WEEKS))]
    for pick in picks:
        held = pick.recommendation.held_out
        print(f"{pick.week} week: {len(pick.recommendation.scores)} candidates, budget "
              f"{pick.budget_minutes:.1f} overloaded min (half of (c)'s in tune's replay of the week); pick: "
              f"{pick.recommendation.best.candidate.label if pick.recommendation.best else '(c) kept'}"
              + (f"; held-out day: pick {held.pick.overloaded_minutes:.1f} min / {held.pick.gpu_hours:.1f} "
                 f"GPU-h, (c) {held.current.overloaded_minutes:.1f} / {held.current.gpu_hours:.1f}"
                 if held else ""))
    print()
    print(pick_table(picks, current, (*benchmark_traces(), *held_out_traces()), settings))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
