"""Benchmark: one recommended rule, chosen on the training traces, reported on held-out ones.

    .venv/bin/python -m benchmarks.held_out            # about 3 minutes of one core
    .venv/bin/python -m benchmarks.held_out --no-front # the pick and the step row only

The training traces are the six of the autoscaling-quality benchmark (`demo.traces.benchmark_traces`), on
which every shipped setting was chosen; the held-out traces (`demo.traces.held_out_traces`) are other seeds,
levels and timings of the same kinds of load, never used to choose. Every candidate is a rules file (the
rule recommended before, (c), with other targets, scale-up, panic and scale-down), replayed by `demo.replay`
as in the quality benchmark. The pick: among the candidates within 1.05x (c)'s GPU-hours on every training
trace and with enough replicas ready at most 150 s after the burst trace's step (2.5 to 7 GPUs' worth, 120 s
start-up), the fewest overloaded minutes relative to (c)'s, summed over the training traces. It is shipped
as examples/gpu-inference-rules.yaml (the command says whether the example still is the pick). Then it is
replayed on the held-out traces against (c) (the bar: half its overloaded minutes at no more than 1.05x its
GPU-hours), with the Pareto front of all candidates on each held-out trace: how close any of them comes.
"""

from __future__ import annotations

import argparse
import dataclasses
import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass

from autoscaler.config.rules import load_rules, parse_rules
from autoscaler.policy import Rule
from autoscaler.policy.spec import OverloadBudget
from benchmarks.autoscaling_quality import PANIC_RULES, RECOMMENDED_RULES, SHIPPED_RULES, _ratio
from demo.replay import Figures, ReplayResult, ReplaySettings, replay
from demo.traces import Trace, benchmark_traces, held_out_traces, sudden_burst

REQUEST_TARGETS = (9.0, 8.5)
"""The request target per replica (9: one replica at 90 % GPU; 8.5: 5 % headroom)."""
SCALE_UPS = {
    "up as (c)": "stabilizationWindowSeconds: 60, tolerance: 0.02, selectPolicy: Max, "
                 "policies: [{type: Pods, value: 4, periodSeconds: 60}, {type: Percent, value: 100, "
                 "periodSeconds: 60}]",
    "up in one sync": "stabilizationWindowSeconds: 0, tolerance: 0.02, "
                      "policies: [{type: Percent, value: 900, periodSeconds: 15}]",
}
"""(c)'s scale-up, and one that may add every replica asked for at the next sync."""
PANICS = {"no panic": "", "panic 30s/110%": "{windowSeconds: 30, thresholdPercent: 110}",
          "panic 15s/110%": "{windowSeconds: 15, thresholdPercent: 110}"}
DOWN_WINDOWS = (60, 120, 300)
"""scaleDown.stabilizationWindowSeconds: short ones release a swing's replicas sooner."""
GPU_HOURS_BAR = 1.05
OVERLOAD_BAR = 0.5
STEP_READY_BAR_SECONDS = 150.0


@dataclass(frozen=True)
class Candidate:
    label: str
    rule: Rule


def candidate_rules(target: float, scale_up: str, panic: str, down_window: int) -> str:
    """A rules file of the recommended rule with these settings."""
    panic_line = f"\n      panic: {panic}" if panic else ""
    return f"""\
rules:
  - name: embedding-service
    target: {{kind: Deployment, namespace: medical-kg, name: embedding-service}}
    minReplicas: 2
    maxReplicas: 10
    metrics:
      - name: requests_per_second
        query: sum(rate(service_requests_total{{namespace="medical-kg", service="embedding-service"}}[1m]))
        type: Total
        target: {target:g}
      - name: gpu_utilization
        query: 100 * avg(gpu_utilization_ratio{{namespace="medical-kg", pod=~"embedding-service-.*"}})
        type: Average
        target: {10 * target:g}
    behavior:
      scaleUp: {{{scale_up}}}
      scaleDown:
        stabilizationWindowSeconds: {down_window}
        tolerance: 0.1
        selectPolicy: Max
        policies: [{{type: Percent, value: 50, periodSeconds: 60}}]{panic_line}
"""


def candidates() -> list[Candidate]:
    """Every combination of the grid, each parsed by the rules loader."""
    out = []
    for target in REQUEST_TARGETS:
        for up_label, up in SCALE_UPS.items():
            for panic_label, panic in PANICS.items():
                for window in DOWN_WINDOWS:
                    label = f"target {target:g}, {up_label}, {panic_label}, down {window}s"
                    text = candidate_rules(target, up, panic, window)
                    out.append(Candidate(label, parse_rules(text, f"<{label}>").rules[0]))
    return out


def same_settings(a: Rule, b: Rule) -> bool:
    """Whether two rules scale the same way (their behavior, metrics and bounds; not their file lines)."""
    def settings(rule: Rule) -> tuple[object, ...]:
        return (rule.behavior, rule.min_replicas, rule.max_replicas,
                tuple((m.name, m.query, m.type, m.target, m.panic_query) for m in rule.metrics))
    return settings(a) == settings(b)


def step_ready_seconds(result: ReplayResult, settings: ReplaySettings) -> float:
    """Seconds from the first rise of the load to the first sample with enough ready replicas for the load
    after it (under the overload line); inf if never."""
    samples = result.samples
    start = next(after for s, after in itertools.pairwise(samples) if after.load > s.load)
    needed = math.ceil(start.load / settings.overload_line - 1e-9)
    return next((s.t - start.t for s in samples if s.t >= start.t and s.ready >= needed), math.inf)


def step_ready(rule: Rule, settings: ReplaySettings) -> float:
    """`step_ready_seconds` on the burst trace (2.5 -> 7 GPUs' worth)."""
    return step_ready_seconds(replay(rule, sudden_burst(), settings), settings)


@dataclass(frozen=True)
class Scored:
    candidate: Candidate
    figures: dict[str, Figures]
    step_ready: float


def score(found: Sequence[Candidate], traces: Sequence[Trace], settings: ReplaySettings) -> list[Scored]:
    return [Scored(c, {t.name: replay(c.rule, t, settings).figures for t in traces},
                   step_ready(c.rule, settings)) for c in found]


def relative_overload(f: Figures, base: Figures) -> float:
    """Overloaded minutes as a share of the base's (0 where both are 0, 1 where only the base has none)."""
    if base.overloaded_minutes == 0:
        return 0.0 if f.overloaded_minutes == 0 else 1.0 + f.overloaded_minutes
    return f.overloaded_minutes / base.overloaded_minutes


def meets_bar(f: Figures, base: Figures) -> bool:
    return (f.gpu_hours <= GPU_HOURS_BAR * base.gpu_hours
            and (f.overloaded_minutes <= OVERLOAD_BAR * base.overloaded_minutes or f.overloaded_minutes == 0))


def pick(scored: Sequence[Scored], base: dict[str, Figures]) -> Scored | None:
    """The training pick (see the module docstring); None when no candidate is eligible."""
    eligible = [s for s in scored if s.step_ready <= STEP_READY_BAR_SECONDS
                and all(s.figures[name].gpu_hours <= GPU_HOURS_BAR * b.gpu_hours for name, b in base.items())]
    if not eligible:
        return None
    return min(eligible, key=lambda s: (sum(relative_overload(s.figures[n], b) for n, b in base.items()),
                                        sum(s.figures[n].gpu_hours for n in base)))


def pareto(points: Sequence[tuple[str, Figures]]) -> list[tuple[str, Figures]]:
    """The points no other beats on both GPU-hours and overloaded minutes, cheapest first."""
    front: list[tuple[str, Figures]] = []
    for label, f in sorted(points, key=lambda p: (p[1].gpu_hours, p[1].overloaded_minutes)):
        if not front or f.overloaded_minutes < front[-1][1].overloaded_minutes:
            front.append((label, f))
    return front


def comparison_table(rows: Sequence[tuple[str, str, Figures, Figures]]) -> str:
    """(trace, role, (c), pick) rows: the pick against (c), and the bar."""
    lines = ["| trace | role | (c): GPU-hours, overloaded min | pick: GPU-hours, overloaded min "
             "| GPU-hours vs (c) | overloaded min vs (c) | bar |", "|---|---|---|---|---:|---:|---|"]
    for name, role, c, p in rows:
        overload = _ratio(p.overloaded_minutes, c.overloaded_minutes) if c.overloaded_minutes else "-"
        lines.append(f"| {name} | {role} | {c.gpu_hours:.2f}, {c.overloaded_minutes:.1f} | "
                     f"{p.gpu_hours:.2f}, {p.overloaded_minutes:.1f} | {_ratio(p.gpu_hours, c.gpu_hours)} | "
                     f"{overload} | "
                     f"{'met' if meets_bar(p, c) else 'not met'} |")
    return "\n".join(lines)


def front_table(trace: Trace, base: Figures, scored: Sequence[Scored]) -> str:
    """The Pareto front of the candidates on one trace, as ratios to (c)."""
    front = pareto([(s.candidate.label, s.figures[trace.name]) for s in scored])
    lines = [f"| {trace.name}: candidate on the front | GPU-hours vs (c) | overloaded min | vs (c) |",
             "|---|---:|---:|---:|"]
    for label, f in front:
        overload = _ratio(f.overloaded_minutes, base.overloaded_minutes) if base.overloaded_minutes else "-"
        lines.append(f"| {label} | {_ratio(f.gpu_hours, base.gpu_hours)} | {f.overloaded_minutes:.1f} | "
                     f"{overload} |")
    return "\n".join(lines)


def tuned_table(configs: Sequence[tuple[str, Rule]], traces: Sequence[Trace], settings: ReplaySettings,
                base: dict[str, Figures]) -> str:
    """Each configuration whose settings were tuned on the training traces, on each held-out trace, against
    (c) (`base`, by trace name)."""
    lines = ["| held-out trace | configuration | GPU-hours | vs (c) | overloaded min | vs (c) |",
             "|---|---|---:|---:|---:|---:|"]
    for trace in traces:
        b = base[trace.name]
        for label, rule in configs:
            f = replay(rule, trace, settings).figures
            overload = _ratio(f.overloaded_minutes, b.overloaded_minutes) if b.overloaded_minutes else "-"
            lines.append(f"| {trace.name} | {label} | {f.gpu_hours:.2f} | "
                         f"{_ratio(f.gpu_hours, b.gpu_hours)} | {f.overloaded_minutes:.1f} | {overload} |")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.held_out", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--no-front", action="store_true",
                        help="skip the Pareto front of every candidate on the held-out traces")
    args = parser.parse_args(argv)
    settings = ReplaySettings()
    training, held_out = benchmark_traces(), held_out_traces()
    c = load_rules(RECOMMENDED_RULES).rules[0]
    d = load_rules(PANIC_RULES).rules[0]
    base = {t.name: replay(c, t, settings).figures for t in training}
    found = candidates()
    scored = score(found, training, settings)
    best = pick(scored, base)
    print(f"training traces: {', '.join(t.name for t in training)}")
    print(f"held-out traces: {', '.join(t.name for t in held_out)} (step-2: a single unannounced step)")
    print(f"{len(found)} candidates; pick on the training traces: {best.candidate.label if best else 'none'}")
    shipped = load_rules(SHIPPED_RULES).rules[0]
    print(f"{SHIPPED_RULES.relative_to(SHIPPED_RULES.parent.parent)} is the pick: "
          f"{'yes' if best and same_settings(shipped, best.candidate.rule) else 'NO'}")
    print()
    print("After a step from 2.5 to 7 GPUs' worth (120 s start-up), enough replicas ready after:")
    print("| configuration | seconds |\n|---|---:|")
    for label, rule in (("(c) previous recommended", c), ("(d) previous + panic", d)):
        print(f"| {label} | {step_ready(rule, settings):.0f} |")
    if best is not None:
        print(f"| pick: {best.candidate.label} | {best.step_ready:.0f} |")
    print(f"| idealized reactive (demo/reactive_floor.py) | {settings.cluster.startup_delay_seconds:.0f} |")
    if best is None:
        return 0
    rows = [(t.name, "training", base[t.name], best.figures[t.name]) for t in training]
    held = {t.name: replay(c, t, settings).figures for t in held_out}
    mine = {t.name: replay(best.candidate.rule, t, settings).figures for t in held_out}
    rows += [(t.name, "held out", held[t.name], mine[t.name]) for t in held_out]
    print()
    print(comparison_table(rows))
    budget = dataclasses.replace(d, overload_budget=OverloadBudget(10.0, 120))
    print()
    print("The settings tuned on the training traces (panic's 110 %, the budget), on the held-out traces:")
    tuned = [("(c) previous recommended", c), ("(d) previous + panic", d),
             ("(d) + overloadBudget 10 %", budget), ("pick", best.candidate.rule)]
    print(tuned_table(tuned, held_out, settings, held))
    if not args.no_front:
        everyone = score(found, held_out, settings)
        for trace in held_out:
            print()
            print(front_table(trace, held[trace.name], everyone))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
