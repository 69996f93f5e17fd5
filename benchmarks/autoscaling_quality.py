"""Benchmark of autoscaling quality: three configurations replayed on five load traces, in simulated time.

    .venv/bin/python -m benchmarks.autoscaling_quality [--images DIR] [--startup-delay 120] [--seeds 5]
                                                       [--noisy-levels 3,3.5,4.5] [--reactive-floor]

Every configuration is a rules file parsed by the real rules loader and decided by the real engine
(`autoscaler.policy.decide`), replayed by `demo.replay` against the simulated GPU Deployment of
`demo.cluster`: a sync every 15 s, replicas ready only after the start-up delay. Compared, on the same traces:
  (a) users' HPA  - the set-up our users run today (GPU utilization target 80, scale-up window 300 s with
                    100 %/60 s, scale-down window 600 s with 50 %/60 s, min 2, max 10)
  (b) HPA default - the same metric, target and bounds with the HPA's default behavior
  (c) previous recommended - benchmarks/previous-recommended-rules.yaml, what
                    examples/gpu-inference-rules.yaml recommended until issue 37 (the new one is chosen
                    and reported in benchmarks.held_out)
The baseline of every ratio is (a), measured in the same run. Prints a markdown table and the verdict, writes
one PNG per trace. Then the capacity guard (benchmarks.capacity_quality): each configuration without and with
it on the `capacity` trace, a pool of 8 GPUs shared with another tenant (its PNG: quality-capacity.png).
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from pathlib import Path

from autoscaler.config.rules import load_rules, parse_rules
from autoscaler.errors import RulesError
from autoscaler.policy import Rule
from autoscaler.policy.spec import Forecast, OverloadBudget
from benchmarks.capacity_quality import capacity_table, capacity_verdict, run_capacity
from benchmarks.example_rules import USERS_HPA, embedding_service_rules
from demo.clairvoyant import Bound, min_gpu_hours
from demo.cluster import ClusterSettings
from demo.reactive_floor import fewest_overloaded, idealized_reactive
from demo.replay import Figures, ReplayResult, ReplaySettings, replay
from demo.traces import Trace, benchmark_traces, bursty, daily, held_out_traces, noisy, steady

ROOT = Path(__file__).resolve().parent.parent
RECOMMENDED_RULES = ROOT / "benchmarks" / "previous-recommended-rules.yaml"
"""Configuration (c): the rule examples/gpu-inference-rules.yaml recommended until issue 37; every figure of
this benchmark's tables is about it, and benchmarks.held_out measures the recommended example against it."""
SHIPPED_RULES = ROOT / "examples" / "gpu-inference-rules.yaml"
PANIC_RULES = ROOT / "examples" / "gpu-inference-panic-rules.yaml"


HPA_DEFAULTS = embedding_service_rules(name="hpa-defaults")


@dataclass(frozen=True)
class Configuration:
    key: str
    label: str
    rule: Rule


def configurations(recommended: Path = RECOMMENDED_RULES) -> tuple[Configuration, ...]:
    """(a), (b), (c), (d), each parsed by the rules loader: what is compared is expressible in a rules file.
    (d) is (c) plus panic mode, as shipped; `recommended` replaces (c) only."""
    users = parse_rules(USERS_HPA, "<users-hpa>").rules[0]
    defaults = parse_rules(HPA_DEFAULTS, "<hpa-defaults>").rules[0]
    ours = load_rules(recommended).rules[0]
    panicky = load_rules(PANIC_RULES).rules[0]
    label = ("(c) previous recommended" if recommended == RECOMMENDED_RULES
             else f"(c) {Path(recommended).name}")
    return (Configuration("a", "(a) users' HPA", users), Configuration("b", "(b) HPA defaults", defaults),
            Configuration("c", label, ours), Configuration("d", "(d) previous + panic", panicky))


@dataclass(frozen=True)
class TraceOutcome:
    trace: Trace
    results: dict[str, ReplayResult]
    bounds: dict[str, Bound] = dataclasses.field(default_factory=dict)
    """Per configuration: the fewest GPU-hours any policy (even a clairvoyant one) could spend on the trace
    while overloaded for no longer than that configuration (demo.clairvoyant)."""

    @property
    def target_met(self) -> bool:
        """(c) spends fewer GPU-hours than (a) with no more overloaded minutes."""
        a, c = self.results["a"].figures, self.results["c"].figures
        return c.gpu_hours < a.gpu_hours and c.overloaded_minutes <= a.overloaded_minutes


def run(configs: Sequence[Configuration], traces: Sequence[Trace], settings: ReplaySettings,
        with_bounds: bool = True, bounded: Collection[str] | None = None) -> list[TraceOutcome]:
    """Each configuration replayed on each trace; with the bounds of every configuration, or of those whose
    keys are in `bounded` (the bound is the slow part)."""
    outcomes = []
    for trace in traces:
        results = {c.key: replay(c.rule, trace, settings) for c in configs}
        bounds = {c.key: min_gpu_hours(trace, results[c.key].figures.overloaded_minutes, c.rule.min_replicas,
                                       c.rule.max_replicas, settings)
                  for c in configs if bounded is None or c.key in bounded} if with_bounds else {}
        outcomes.append(TraceOutcome(trace, results, bounds))
    return outcomes


def _ratio(value: float, baseline: float) -> str:
    return f"{value / baseline:.2f}x" if baseline else "-"


def markdown_table(configs: Sequence[Configuration], outcomes: Sequence[TraceOutcome]) -> str:
    """One row per trace and configuration; GPU-hours also as a ratio to (a) of the same trace and to the
    fewest any policy could spend with no more overloaded minutes (when the outcome has its bounds)."""
    lines = ["| trace | configuration | GPU-hours | vs (a) | vs fewest possible | overloaded min "
             "| not-ready min | scale changes | reversals |", "|---|---|---:|---:|---:|---:|---:|---:|---:|"]
    for outcome in outcomes:
        base = outcome.results["a"].figures
        for config in configs:
            f: Figures = outcome.results[config.key].figures
            bound = outcome.bounds.get(config.key)
            lines.append(f"| {outcome.trace.name} | {config.label} | {f.gpu_hours:.2f} | "
                         f"{_ratio(f.gpu_hours, base.gpu_hours)} | "
                         f"{_ratio(f.gpu_hours, bound.gpu_hours) if bound else '-'} | "
                         f"{f.overloaded_minutes:.1f} | "
                         f"{f.not_ready_minutes:.1f} | {f.scale_changes} | {f.reversals} |")
    return "\n".join(lines)


def verdict(outcomes: Sequence[TraceOutcome]) -> str:
    lines = []
    for outcome in outcomes:
        a, c = outcome.results["a"].figures, outcome.results["c"].figures
        mark = "met" if outcome.target_met else "NOT met"
        line = (f"- {outcome.trace.name}: {mark}: GPU-hours {c.gpu_hours:.2f} vs {a.gpu_hours:.2f} "
                f"({_ratio(c.gpu_hours, a.gpu_hours)}), overloaded minutes "
                f"{c.overloaded_minutes:.1f} vs {a.overloaded_minutes:.1f}")
        if "a" in outcome.bounds:
            line += (f"; no policy, even knowing the trace in advance, spends fewer than "
                     f"{outcome.bounds['a'].gpu_hours:.2f} with at most {a.overloaded_minutes:.1f} "
                     f"overloaded minutes")
        lines.append(line)
    return "\n".join(lines)


def panic_verdict(outcomes: Sequence[TraceOutcome]) -> str:
    """(d) against (c) per trace: the overloaded minutes panic mode saves, and the GPU-hours it costs."""
    lines = []
    for outcome in outcomes:
        c, d = outcome.results["c"].figures, outcome.results["d"].figures
        saved = (1.0 - d.overloaded_minutes / c.overloaded_minutes) if c.overloaded_minutes else 0.0
        lines.append(f"- {outcome.trace.name}: overloaded minutes {d.overloaded_minutes:.1f} vs "
                     f"{c.overloaded_minutes:.1f} ({saved:.0%} fewer), GPU-hours {d.gpu_hours:.2f} vs "
                     f"{c.gpu_hours:.2f} ({_ratio(d.gpu_hours, c.gpu_hours)})")
    return "\n".join(lines)


def budget_dial(rule: Rule, traces: Sequence[Trace], percents: Sequence[float], startup_seconds: int,
                settings: ReplaySettings) -> str:
    """`rule` without and with `overloadBudget` at each share of minutes: the overloaded minutes each budget
    buys and the GPU-hours it costs, per trace (a table)."""
    lines = ["| trace | overloadBudget | GPU-hours | vs none | overloaded min | vs none |",
             "|---|---|---:|---:|---:|---:|"]
    for trace in traces:
        base = replay(rule, trace, settings).figures
        lines.append(f"| {trace.name} | none | {base.gpu_hours:.2f} | 1.00x | "
                     f"{base.overloaded_minutes:.1f} | 1.00x |")
        for percent in percents:
            budget = OverloadBudget(percent_of_minutes=percent, startup_seconds=startup_seconds)
            f = replay(dataclasses.replace(rule, overload_budget=budget), trace, settings).figures
            lines.append(f"| {trace.name} | {percent:g} % of minutes | {f.gpu_hours:.2f} | "
                         f"{_ratio(f.gpu_hours, base.gpu_hours)} | {f.overloaded_minutes:.1f} | "
                         f"{_ratio(f.overloaded_minutes, base.overloaded_minutes)} |")
    return "\n".join(lines)


FORECAST_LEADS = (120, 300, 600)
"""forecast.leadSeconds compared: the start-up time, and longer."""


def forecast_table(recommended: Rule, panicky: Rule, days: Sequence[tuple[Trace, Trace]],
                   settings: ReplaySettings) -> str:
    """(c), (d) and (d) with a daily forecast at each lead, on each trace played after `previous` (another
    draw of the same day: the season the forecast learns from; the warm-up is that day and an hour)."""
    longest = max(trace.duration_seconds for trace, _ in days)
    settings = dataclasses.replace(settings, warmup_seconds=longest + 3_600.0)
    lines = ["| trace | configuration | GPU-hours | vs (c) | overloaded min | vs (c) |",
             "|---|---|---:|---:|---:|---:|"]
    for trace, previous in days:
        season = round(trace.duration_seconds)
        variants = [("(c) previous recommended", recommended), ("(d) previous + panic", panicky)]
        variants += [(f"(d) + forecast, lead {lead} s",
                      dataclasses.replace(panicky, forecast=Forecast(season, lead, 1, "scaleUp")))
                     for lead in FORECAST_LEADS if 2 * lead <= season]
        base: Figures | None = None
        for label, rule in variants:
            f = replay(rule, trace, settings, previous=previous).figures
            base = base or f
            lines.append(f"| {trace.name} | {label} | {f.gpu_hours:.2f} | "
                         f"{_ratio(f.gpu_hours, base.gpu_hours)} | {f.overloaded_minutes:.1f} | "
                         f"{_ratio(f.overloaded_minutes, base.overloaded_minutes)} |")
    return "\n".join(lines)


def reactive_floor_table(rule: Rule, outcomes: Sequence[TraceOutcome], settings: ReplaySettings) -> str:
    """Per trace, (c) against the idealized reactive policy (demo.reactive_floor) with the fewest overloaded
    minutes within 1.05x (c)'s GPU-hours."""
    lines = ["| trace | (c): GPU-hours, overloaded min | idealized reactive within 1.05x | GPU-hours vs (c) "
             "| overloaded min | vs (c) |", "|---|---|---|---:|---:|---:|"]
    for outcome in outcomes:
        c = outcome.results["c"].figures
        points = idealized_reactive(outcome.trace, rule.min_replicas, rule.max_replicas, settings)
        best = fewest_overloaded(points, 1.05 * c.gpu_hours)
        row = f"| {outcome.trace.name} | {c.gpu_hours:.2f}, {c.overloaded_minutes:.1f} | "
        if best is None:
            lines.append(row + "none | - | - | - |")
            continue
        lines.append(row + f"{best.policy} | {_ratio(best.gpu_hours, c.gpu_hours)} | "
                     f"{best.overloaded_minutes:.1f} | "
                     f"{_ratio(best.overloaded_minutes, c.overloaded_minutes)} |")
    return "\n".join(lines)


def reseeded_traces(seeds: Sequence[int]) -> list[Trace]:
    """The random traces again with other seeds: does the verdict hold beyond the one draw in the table?"""
    traces = []
    for seed in seeds:
        for make in (steady, daily, noisy):
            trace = make(seed=seed)
            traces.append(dataclasses.replace(trace, name=f"{trace.name} (seed {seed})"))
    return traces


def noisy_levels(levels: Sequence[float]) -> list[Trace]:
    """The noisy trace around other mean loads: is (a)'s fixed count cheap only where it happens to fit?"""
    traces = []
    for level in levels:
        trace = noisy(level=level)
        traces.append(dataclasses.replace(trace, name=f"{trace.name} (level {level:g})"))
    return traces


def robustness_table(outcomes: Sequence[TraceOutcome]) -> str:
    """(c) against (a) per trace; with the bounds, also how far each is from the fewest possible GPU-hours."""
    with_bounds = all(outcome.bounds for outcome in outcomes)
    extra = (" (a) / (c) vs fewest possible |", "---:|") if with_bounds else ("", "")
    lines = [f"| trace | (c) GPU-hours vs (a) | overloaded min (c) / (a) |{extra[0]} target |",
             f"|---|---:|---:|{extra[1]}---|"]
    for outcome in outcomes:
        a, c = outcome.results["a"].figures, outcome.results["c"].figures
        bounds = (f" {_ratio(a.gpu_hours, outcome.bounds['a'].gpu_hours)} / "
                  f"{_ratio(c.gpu_hours, outcome.bounds['c'].gpu_hours)} |") if with_bounds else ""
        lines.append(f"| {outcome.trace.name} | {_ratio(c.gpu_hours, a.gpu_hours)} | "
                     f"{c.overloaded_minutes:.1f} / {a.overloaded_minutes:.1f} |{bounds} "
                     f"{'met' if outcome.target_met else 'not met'} |")
    return "\n".join(lines)


def _levels(text: str) -> tuple[float, ...]:
    try:
        levels = tuple(float(part) for part in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated loads such as 3,4.5 (got {text!r})") \
            from None
    if not all(level > 0 for level in levels):
        raise argparse.ArgumentTypeError(f"loads must be > 0 (got {text!r})")
    return levels


def _percents(text: str) -> tuple[float, ...]:
    """--budgets: shares of minutes in (0, 50], comma-separated."""
    try:
        percents = tuple(float(part) for part in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated percentages such as 1,5 (got {text!r})") \
            from None
    if not all(0 < percent <= 50 for percent in percents):
        raise argparse.ArgumentTypeError(f"percentages must be in (0, 50] (got {text!r})")
    return percents


def _trace_names(text: str) -> frozenset[str]:
    """--traces: names of the benchmark's traces, comma-separated."""
    names = frozenset(name.strip() for name in text.split(","))
    known = {trace.name for trace in benchmark_traces()}
    unknown = sorted(names - known)
    if unknown:
        raise argparse.ArgumentTypeError(
            f"no trace named {', '.join(unknown)} (traces: {', '.join(sorted(known))})")
    return names


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.autoscaling_quality", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--images", type=Path, default=ROOT / "docs" / "images",
                        help="directory for the PNG plots (default docs/images)")
    parser.add_argument("--no-plots", action="store_true", help="print the table only")
    parser.add_argument("--rules", type=Path, default=RECOMMENDED_RULES,
                        help="configuration (c): a rules file, its first rule (default %(default)s)")
    parser.add_argument("--startup-delay", type=float, default=120.0,
                        help="seconds a new replica loads its model before serving (default %(default)s)")
    parser.add_argument("--seeds", type=int, default=0, metavar="N",
                        help="also replay the random traces with N other seeds (11, 12, ...) and print "
                             "the verdicts")
    parser.add_argument("--noisy-levels", type=_levels, default=(), metavar="L1,L2,...",
                        help="also replay the noisy trace around these mean loads (GPUs' worth) and print "
                             "the verdicts, e.g. 3,3.5,4.5")
    parser.add_argument("--budgets", type=_percents, default=(), metavar="P1,P2,...",
                        help="also replay (d) with overloadBudget at these percentages of minutes (the "
                             "start-up delay as startupSeconds) on the traces and print the dial, e.g. "
                             "1,5,20")
    parser.add_argument("--forecast", action="store_true",
                        help="also replay daily and bursty after another draw of the same day, with (d) plus "
                             "a daily forecast at several leads, and print the table")
    parser.add_argument("--reactive-floor", action="store_true",
                        help="also replay the idealized reactive policy (demo.reactive_floor) on the traces "
                             "and print its best within 1.05x (c)'s GPU-hours")
    parser.add_argument("--traces", type=_trace_names, default=None, metavar="NAME,...",
                        help="replay only these traces (default all: "
                             f"{', '.join(t.name for t in benchmark_traces())})")
    parser.add_argument("--held-out", action="store_true",
                        help="replay the held-out traces (demo.traces.held_out_traces: no setting was chosen "
                             "on them) instead of the six training traces")
    args = parser.parse_args(argv)
    if args.held_out and args.traces is not None:
        parser.error("--held-out replays the held-out traces: give it or --traces, not both")
    if args.seeds < 0:
        parser.error(f"--seeds: expected a count >= 0 (got {args.seeds})")
    if args.startup_delay < 0:
        parser.error(f"--startup-delay: expected seconds >= 0 (got {args.startup_delay:g})")
    try:
        configs = configurations(args.rules)
    except RulesError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    settings = ReplaySettings(cluster=dataclasses.replace(ClusterSettings(),
                                                          startup_delay_seconds=args.startup_delay))
    traces = list(held_out_traces()) if args.held_out else [
        t for t in benchmark_traces() if args.traces is None or t.name in args.traces]
    outcomes = run(configs, traces, settings)
    print(f"Start-up delay {args.startup_delay:g} s, sync every {settings.sync_period_seconds:g} s, overload "
          f"line {settings.overload_line:.0%} of a GPU per ready replica; "
          f"{'held-out' if args.held_out else 'training'} traces:")
    for outcome in outcomes:
        trace = outcome.trace
        print(f"- {trace.name}: {trace.description}, {trace.duration_seconds / 3600:g} h")
    print()
    print(markdown_table(configs, outcomes))
    print()
    print("Target, (c) fewer GPU-hours than (a) with no more overloaded minutes:")
    print(verdict(outcomes))
    print()
    print("Panic mode, (d) against (c):")
    print(panic_verdict(outcomes))
    if args.seeds:
        print()
        print(f"The random traces with {args.seeds} other seed(s):")
        print(robustness_table(run(configs, reseeded_traces(range(11, 11 + args.seeds)), settings,
                                   with_bounds=False)))
    if args.forecast:
        print()
        print("Forecast, each day played after another draw of the same day (daily repeats its bursts at the "
              "same hours; daily-2, held out, comes after a daily day whose bursts came at other hours):")
        held_daily = next(t for t in held_out_traces() if t.name == "daily-2")
        days = [(daily(), daily(seed=12)), (bursty(), bursty(seed=16)), (held_daily, daily(seed=12))]
        print(forecast_table(configs[2].rule, configs[3].rule, days, settings))
    if args.reactive_floor:
        print()
        print("The idealized reactive policy (sees the load at once, scales exactly, releases at once):")
        print(reactive_floor_table(configs[2].rule, outcomes, settings))
    if args.budgets:
        print()
        print("The overload budget as a dial, (d) without and with it:")
        print(budget_dial(configs[3].rule, traces, args.budgets, round(args.startup_delay), settings))
    if args.noisy_levels:
        print()
        print("The noisy trace around other mean loads:")
        print(robustness_table(run(configs, noisy_levels(args.noisy_levels), settings)))
    capacity = [run_capacity(c.label, c.rule, settings) for c in configs]
    pool = capacity[0].pool
    print()
    print(f"The capacity guard on a pool of {pool.gpu_count} GPUs shared with another tenant "
          f"({capacity[0].trace.name}: {capacity[0].trace.description}, "
          f"{capacity[0].trace.duration_seconds / 3600:g} h), each configuration without and with it:")
    print()
    print(capacity_table(capacity))
    print()
    print("Target, Pending replicas without the guard, none with it, no more overloaded minutes:")
    print(capacity_verdict(capacity))
    if not args.no_plots:
        from demo.plots import plot_comparison  # matplotlib only when plotting

        args.images.mkdir(parents=True, exist_ok=True)
        for outcome in outcomes:
            path = args.images / f"quality-{outcome.trace.name}.png"
            plot_comparison(outcome.trace, [(c.label, outcome.results[c.key]) for c in configs], path,
                            settings.overload_line)
            print(f"wrote {path}")
        recommended = capacity[-1]
        path = args.images / f"quality-{recommended.trace.name}.png"
        plot_comparison(recommended.trace, [(f"{recommended.label}, guard off", recommended.off),
                                            (f"{recommended.label}, guard on", recommended.on)],
                        path, settings.overload_line, pool_gpus=pool.gpu_count)
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
