"""Benchmark of autoscaling in SLO terms: the benchmark's traces as requests to emulated LLM replicas.

    .venv/bin/python -m benchmarks.slo_quality [--images DIR] [--startup-delay 120] [--traces steady,ramp]

Each trace (demo.traces, as request rates: `SloSettings.requests_per_load` requests a second per unit of
load) is served by replicas of the emulated continuous-batching server (demo.batching, with the measured
profile demo/profiles/h100-llama1b-cudagraph.json), started through the simulated Deployment with the
start-up delay, and scored by SLO attainment (the share of requests whose TTFT <= 0.5 s and mean
inter-token latency <= 50 ms), GPU-hours, and requests cut by a scale-down. Configurations, each deciding
every 15 s (the rules through the controller's own planning, `autoscaler.planning.plan.plan_replicas`):
  users' HPA   - GPU utilization, target 80 (the users' set-up of benchmarks.autoscaling_quality)
  recommended  - examples/gpu-inference-rules.yaml; its request-rate target is the README's recipe, 90 % of
                 what one replica serves flat out (0.9 x requests_per_load)
  llm example  - examples/llm-vllm-rules.yaml: queue and KV cache
  learned slo  - the recommended rule's request-rate metric and behavior, its target learned from a training
                 history (below); without the GPU-utilization metric, which reads ~100 % at any batch
  planner      - in the manner of Dynamo's SLA planner: every 60 s, the next interval's request rate
                 predicted as the last interval's, replicas = prediction / the profile's capacity at the
                 objective
and, per configuration, the clairvoyant bound on GPU-hours (demo.clairvoyant) at that configuration's own
overloaded minutes (load per ready replica above the capacity at the objective). Every configuration runs
2..16 replicas on a pool of 16 GPUs.

The learned target. The `slo` rules-file block is not in this branch: the benchmark models it as the method
the issue states, applied to a training history that none of the scored traces is: the `noisy` trace drawn
with another seed, served by 4 fixed replicas (so it crosses the knee), one sample a minute of (requests a
second per ready replica, p90 TTFT of that minute's requests); samples binned by load; the target is the
highest bin whose 0.9-quantile of p90 TTFT is within the objective, every lower bin within it too, and at
least `MIN_BIN_SAMPLES` samples in it.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import random
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from autoscaler.config.rules import load_rules, parse_rules
from autoscaler.planning.plan import count_all_failed, plan_replicas
from autoscaler.policy import MetricObservation, Rule, RuleHistory
from benchmarks.example_rules import USERS_HPA
from demo.batching import BatchingReplica, Request
from demo.clairvoyant import min_gpu_hours
from demo.cluster import ClusterSettings
from demo.replay import ReplaySettings
from demo.serving_profile import ServingProfile, load_profile
from demo.slo_replay import FleetView, Scaler, SloFigures, SloSettings, ceil_replicas, serve
from demo.traces import Trace, benchmark_traces, noisy
from plumbing.prometheus.syntax import largest_range_seconds

ROOT = Path(__file__).resolve().parent.parent
RECOMMENDED_RULES = ROOT / "examples" / "gpu-inference-rules.yaml"
LLM_RULES = ROOT / "examples" / "llm-vllm-rules.yaml"
PANIC_RULES = ROOT / "examples" / "gpu-inference-panic-rules.yaml"
MAX_REPLICAS = 16
PLANNER_INTERVAL_SECONDS = 60.0
MIN_BIN_SAMPLES = 5
BIN_WIDTH = 0.25
"""Requests a second per replica: the width of the learning's load bins."""
TRAINING_REPLICAS = 4


@dataclass(frozen=True)
class Configuration:
    key: str
    label: str
    scaler: Callable[[], Scaler]
    """A fresh scaler for one run (a rule's keeps its history)."""
    min_replicas: int = 2


@dataclass(frozen=True)
class Outcome:
    trace: str
    key: str
    figures: SloFigures
    bound_gpu_hours: float


# ---------------------------------------------------------------------------------------------- the scalers

def rule_scaler(rule: Rule) -> Scaler:
    """The controller's planning of `rule`, fed what its queries would return from the fleet."""
    state: dict[str, object] = {"history": RuleHistory(), "failed": 0}

    def scale(view: FleetView) -> int:
        seen = [_observe(metric.name, metric.query, metric.panic_query, view) for metric in rule.metrics]
        failed = count_all_failed(int(str(state["failed"])), seen)
        history = state["history"]
        assert isinstance(history, RuleHistory)
        plan = plan_replicas(rule=rule, current=view.spec_replicas, observations=seen, history=history,
                             all_failed_syncs=failed, now=view.t)
        history = plan.history
        if plan.replicas != view.spec_replicas:
            history = history.with_scale(view.t, view.spec_replicas, plan.replicas)
        state["history"], state["failed"] = history, failed
        return plan.replicas

    return scale


def _observe(name: str, query: str, panic_query: str | None, view: FleetView) -> MetricObservation:
    """The rule's metric as the emulated fleet answers it (names as demo.replay knows them)."""
    if name == "requests_per_second":
        panic = view.request_rates(largest_range_seconds(panic_query)) if panic_query else None
        return MetricObservation(name, view.request_rates(largest_range_seconds(query) or 15.0),
                                 panic_value=panic)
    if name == "gpu_utilization":
        return MetricObservation(name, view.gpu_utilization, None if view.gpu_utilization is not None
                                 else "no GPU held")
    if name == "queue":
        return MetricObservation(name, float(view.waiting))
    if name == "kv_cache":
        return MetricObservation(name, view.kv_cache_usage, None if view.kv_cache_usage is not None
                                 else "no ready replica")
    raise ValueError(f"metric {name!r} has no emulated signal (requests_per_second, gpu_utilization, queue, "
                     "kv_cache)")


def planner_scaler(capacity: float, min_replicas: int = 2, max_replicas: int = MAX_REPLICAS,
                   interval_seconds: float = PLANNER_INTERVAL_SECONDS) -> Scaler:
    """Dynamo's SLA planner's way: at every interval, replicas = predicted rate / capacity per replica at the
    objective; the prediction is the last interval's rate (its `constant` predictor)."""
    last: dict[str, float] = {}

    def scale(view: FleetView) -> int:
        due = last.get("t")
        if due is not None and view.t < due + interval_seconds - 1e-9:
            return view.spec_replicas
        last["t"] = view.t
        wanted = ceil_replicas(view.request_rates(interval_seconds) / capacity)
        return min(max_replicas, max(min_replicas, wanted))

    return scale


def clairvoyant_scaler(trace: Trace, settings: SloSettings, capacity: float, min_replicas: int = 2,
                       max_replicas: int = MAX_REPLICAS) -> Scaler:
    """Knows the trace: keeps enough replicas for the highest rate until a replica started now is ready."""
    ahead = settings.cluster.startup_delay_seconds + settings.sync_seconds

    def scale(view: FleetView) -> int:
        points = [view.t + k * settings.step_seconds
                  for k in range(int(ahead // settings.step_seconds) + 1)]
        peak = max(trace(abs(t)) for t in points) * settings.requests_per_load
        return min(max_replicas, max(min_replicas, ceil_replicas(peak / capacity)))

    return scale


# ------------------------------------------------------------------------------------- capacity, learning

def capacity_at_objective(profile: ServingProfile, settings: SloSettings, seconds: float = 900.0) -> float:
    """The highest constant request rate one replica serves with p90 TTFT and p90 mean ITL within the
    objective (bisection on runs of `seconds` of Poisson arrivals, the first third not scored)."""
    low, high = 0.1, 64.0
    for _ in range(14):
        middle = (low + high) / 2
        ttfts, itls = _constant_rate(profile, settings, middle, seconds)
        if _quantile(ttfts, 0.9) <= settings.objective.ttft_seconds and \
                _quantile(itls, 0.9) <= settings.objective.itl_seconds:
            low = middle
        else:
            high = middle
    return low


def _constant_rate(profile: ServingProfile, settings: SloSettings, rate: float,
                   seconds: float) -> tuple[list[float], list[float]]:
    rng = random.Random(settings.seed)
    done: list[Request] = []
    replica = BatchingReplica(profile, on_finish=done.append)
    t = 0.0
    while True:
        t += rng.expovariate(rate)
        if t >= seconds:
            break
        replica.advance(t)
        replica.submit(Request(t, *settings.lengths.draw(rng)))
    replica.advance(seconds * 4)
    scored = [r for r in done if r.arrival >= seconds / 3]
    return ([r.ttft for r in scored if r.ttft is not None],
            [r.mean_itl for r in scored if r.mean_itl is not None])


def _quantile(values: Sequence[float], q: float) -> float:
    if not values:
        return math.inf
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def training_history(profile: ServingProfile, settings: SloSettings) -> list[tuple[float, float]]:
    """(requests a second per ready replica, p90 TTFT) per minute of the training trace (see the module)."""
    trace = noisy(level=3.5, seed=11)
    finished: list[Request] = []
    serve(trace, lambda view: TRAINING_REPLICAS, TRAINING_REPLICAS, profile,
          dataclasses.replace(settings, warmup_seconds=0.0), observe=finished.append)
    minutes: dict[int, list[float]] = {}
    for request in finished:
        if request.ttft is not None and 0 <= request.arrival < trace.duration_seconds:
            minutes.setdefault(int(request.arrival // 60), []).append(request.ttft)
    return [(len(ttfts) / 60.0 / TRAINING_REPLICAS, _quantile(ttfts, 0.9))
            for _, ttfts in sorted(minutes.items()) if len(ttfts) >= 10]


def learn_target(samples: Sequence[tuple[float, float]], objective_seconds: float,
                 quantile: float = 0.9) -> float | None:
    """The highest per-replica load bin (its lower edge) whose `quantile` of latency samples stays within the
    objective, with every lower bin within it too; None when no bin qualifies or none came close (no bin
    with enough samples above the objective: the service never showed where its limit is)."""
    bins: dict[int, list[float]] = {}
    for value, latency in samples:
        bins.setdefault(int(value // BIN_WIDTH), []).append(latency)
    learned: float | None = None
    came_close = False
    for index in sorted(bins):
        latencies = bins[index]
        if len(latencies) < MIN_BIN_SAMPLES:
            continue
        if _quantile(latencies, quantile) <= objective_seconds:
            if not came_close:
                learned = index * BIN_WIDTH
        else:
            came_close = True
    return learned if came_close else None


# -------------------------------------------------------------------------------------------------- the run

def configurations(profile: ServingProfile, settings: SloSettings,
                   capacity: float, learned: float) -> tuple[Configuration, ...]:
    users = _bounded(parse_rules(USERS_HPA, "<users-hpa>").rules[0])
    recommended = _bounded(_with_rate_target(load_rules(RECOMMENDED_RULES).rules[0],
                                             0.9 * settings.requests_per_load))
    llm = _bounded(load_rules(LLM_RULES).rules[0])
    slo = _bounded(_rate_only(_with_rate_target(load_rules(RECOMMENDED_RULES).rules[0], learned)))
    slo_panic = _bounded(_rate_only(_with_rate_target(load_rules(PANIC_RULES).rules[0], learned)))
    return (Configuration("users", "users' HPA (GPU utilization)", lambda: rule_scaler(users)),
            Configuration("recommended", "recommended rule", lambda: rule_scaler(recommended)),
            Configuration("llm", "LLM example (queue + KV cache)", lambda: rule_scaler(llm)),
            Configuration("slo", f"learned slo rule ({learned:g} req/s per replica)",
                          lambda: rule_scaler(slo)),
            Configuration("slo-panic", "learned slo rule + panic (examples/gpu-inference-panic-rules.yaml)",
                          lambda: rule_scaler(slo_panic)),
            Configuration("planner", f"planner (Dynamo-like, {capacity:.2f} req/s per replica)",
                          lambda: planner_scaler(capacity)))


def _bounded(rule: Rule) -> Rule:
    return dataclasses.replace(rule, min_replicas=2, max_replicas=MAX_REPLICAS)


def _rate_only(rule: Rule) -> Rule:
    """The rule without its GPU-utilization metric: on an LLM server it reads ~100 % at any batch (the
    profile's NVML column), so it says nothing of the capacity the learned target is about."""
    return dataclasses.replace(rule, metrics=tuple(m for m in rule.metrics if m.name != "gpu_utilization"))


def _with_rate_target(rule: Rule, target: float) -> Rule:
    metrics = tuple(dataclasses.replace(m, target=target) if m.name == "requests_per_second" else m
                    for m in rule.metrics)
    return dataclasses.replace(rule, metrics=metrics)


def run(traces: Sequence[Trace], profile: ServingProfile, settings: SloSettings,
        configs: Sequence[Configuration], capacity: float) -> list[Outcome]:
    capacity_load = capacity / settings.requests_per_load
    # The bound counts a sample overloaded when load > overload_line x ready: in units of the capacity at the
    # objective (the trace divided by it, the line at 1), exactly the samples `serve` counts.
    replay_settings = ReplaySettings(sync_period_seconds=settings.sync_seconds,
                                     step_seconds=settings.step_seconds, overload_line=1.0,
                                     cluster=settings.cluster)
    outcomes = []
    for trace in traces:
        in_capacities = Trace(trace.name, trace.description, trace.duration_seconds,
                              lambda t, load=trace: load(t) / capacity_load)
        for config in (*configs, Configuration("clairvoyant", "clairvoyant",
                                               lambda t=trace: clairvoyant_scaler(t, settings, capacity))):
            figures = serve(trace, config.scaler(), config.min_replicas, profile, settings, capacity_load)
            bound = min_gpu_hours(in_capacities, figures.overloaded_minutes, config.min_replicas,
                                  MAX_REPLICAS, replay_settings).gpu_hours
            outcomes.append(Outcome(trace.name, config.key, figures, bound))
            print(f"  {trace.name:8} {config.key:12} attainment {figures.attainment:7.2%}  "
                  f"GPU-h {figures.gpu_hours:7.2f}  cut {figures.cut}", file=sys.stderr, flush=True)
    return outcomes


def markdown_table(outcomes: Sequence[Outcome], labels: dict[str, str]) -> str:
    lines = ["| trace | configuration | SLO attainment | GPU-hours | clairvoyant GPU-h (same overload) "
             "| requests | cut by scale-down | preemptions |",
             "|---|---|---:|---:|---:|---:|---:|---:|"]
    for o in outcomes:
        f = o.figures
        lines.append(f"| {o.trace} | {labels.get(o.key, o.key)} | {f.attainment:.2%} | {f.gpu_hours:.2f} | "
                     f"{o.bound_gpu_hours:.2f} | {f.requests:,} | {f.cut:,} | {f.preemptions:,} |")
    return "\n".join(lines)


def dominates(a: SloFigures, b: SloFigures) -> bool:
    """a's (attainment, GPU-hours) point is better: no lower attainment, no more GPU-hours, one strictly."""
    return (a.attainment >= b.attainment and a.gpu_hours <= b.gpu_hours
            and (a.attainment > b.attainment or a.gpu_hours < b.gpu_hours))


def verdict(outcomes: Sequence[Outcome]) -> str:
    by = {(o.trace, o.key): o.figures for o in outcomes}
    lines = []
    for trace in dict.fromkeys(o.trace for o in outcomes):
        for key in ("slo", "slo-panic"):
            slo = by.get((trace, key))
            if slo is None:
                continue
            notes = []
            if trace in ("steady", "daily", "ramp"):
                meets = "meets" if slo.attainment >= 0.99 else "MISSES"
                notes.append(f"attainment {slo.attainment:.2%} {meets} 99 %")
            for other in ("planner", "recommended"):
                if (trace, other) in by:
                    better = "better than" if dominates(slo, by[(trace, other)]) else "NOT better than"
                    notes.append(f"{better} {other}")
            lines.append(f"- {trace}: {key} " + "; ".join(notes))
    return "\n".join(lines)


def plot(outcomes: Sequence[Outcome], traces: Sequence[Trace], labels: dict[str, str], settings: SloSettings,
         directory: Path) -> list[Path]:
    """One PNG per trace: the load (in replicas' worth at the objective) and each configuration's ready
    replicas."""
    from matplotlib.figure import Figure
    written = []
    for trace in traces:
        figure = Figure(figsize=(9.0, 4.5), dpi=100)
        axes = figure.subplots()
        for o in outcomes:
            if o.trace != trace.name:
                continue
            ready = o.figures.ready_profile
            thin = max(1, len(ready) // 1_500)
            hours = [i * settings.step_seconds / 3_600 for i in range(0, len(ready), thin)]
            axes.step(hours, ready[::thin], where="post", label=labels.get(o.key, o.key), linewidth=1)
        axes.set_xlabel("hours")
        axes.set_ylabel("ready replicas")
        axes.set_title(f"{trace.name}: ready replicas per configuration (SLO benchmark)")
        axes.legend(fontsize=7, loc="upper left")
        path = directory / f"slo-{trace.name}.png"
        figure.savefig(path)
        written.append(path)
    return written


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.slo_quality",
                                     description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--images", type=Path, help="write one PNG per trace into this directory")
    parser.add_argument("--startup-delay", type=float, default=120.0, help="seconds before a replica serves")
    parser.add_argument("--traces", default="", help="comma-separated trace names (default: all six)")
    parser.add_argument("--configs", default="", help="comma-separated configuration keys (default: all)")
    args = parser.parse_args(argv)
    if args.startup_delay < 0:
        parser.error("--startup-delay must be >= 0")
    traces = list(benchmark_traces())
    if args.traces:
        wanted = [name.strip() for name in args.traces.split(",") if name.strip()]
        unknown = sorted(set(wanted) - {t.name for t in traces})
        if unknown:
            parser.error(f"--traces: unknown trace(s) {', '.join(unknown)}; known: "
                         f"{', '.join(t.name for t in traces)}")
        traces = [t for t in traces if t.name in wanted]
    settings = SloSettings(cluster=ClusterSettings(startup_delay_seconds=args.startup_delay))
    profile = load_profile()
    capacity = capacity_at_objective(profile, settings)
    learned = learn_target(training_history(profile, settings), settings.objective.ttft_seconds)
    print(f"profile {profile.name}: capacity at the objective {capacity:.2f} req/s per replica; "
          f"learned target {learned} req/s per replica", flush=True)
    if learned is None:
        print("the training history never came close to the objective: nothing learned", file=sys.stderr)
        return 1
    configs = configurations(profile, settings, capacity, learned)
    if args.configs:
        keys = {key.strip() for key in args.configs.split(",") if key.strip()}
        unknown = sorted(keys - {c.key for c in configs})
        if unknown:
            known = ", ".join(c.key for c in configs)
            parser.error(f"--configs: unknown {', '.join(unknown)}; known: {known}")
        configs = tuple(c for c in configs if c.key in keys)
    labels = {c.key: c.label for c in configs} | {"clairvoyant": "clairvoyant (knows the trace)"}
    outcomes = run(traces, profile, settings, configs, capacity)
    print(markdown_table(outcomes, labels))
    print()
    print(verdict(outcomes))
    if args.images:
        args.images.mkdir(parents=True, exist_ok=True)
        for path in plot(outcomes, traces, labels, settings, args.images):
            print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
