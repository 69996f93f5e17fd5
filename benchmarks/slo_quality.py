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
  llm example  - examples/llm-vllm-rules.yaml: queue and KV cache (and its podDeletionCost)
  learned slo  - examples/llm-vllm-slo-rules.yaml as `load_rules` reads it, its target learned by the
                 controller's own code (below); three ways of scaling down: as shipped (podDeletionCost: the
                 idlest replica goes, its requests are aborted, vLLM's default), without deletion costs (the
                 newest goes), and with deletion costs and a drain of `GRACE_SECONDS`
  planner      - in the manner of Dynamo's SLA planner: every 60 s, the next interval's request rate
                 predicted as the last interval's, replicas = prediction / the profile's capacity at the
                 objective
and, per configuration, the clairvoyant bound on GPU-hours (demo.clairvoyant) at that configuration's own
overloaded minutes (load per ready replica above the capacity at the objective). Every configuration runs
2..16 replicas on a pool of 16 GPUs.

The learned target. The slo rule's `slo` block is learned as `gpu-autoscaler run` learns it:
`autoscaler.controller.slo_learning.learn` (read_samples, then autoscaler.policy.slo.learn_target) reads
`ServiceHistory`, a `HistorySource` over the service's own history, and `SloLearning.rule` puts the target
into the rule. The history is the example rule itself, with its configured target, serving a day that none of
the scored traces is (the held-out day of demo.traces, `daily-2`: other bursts, another seed); it answers the
three queries the learning asks, one point a minute, and refuses any other.
"""

from __future__ import annotations

import argparse
import bisect
import dataclasses
import math
import random
import re
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from autoscaler.config.rules import load_rules, parse_rules
from autoscaler.controller.past import recorded_query
from autoscaler.controller.slo_learning import SloLearning, learn
from autoscaler.planning.plan import count_all_failed, plan_replicas
from autoscaler.policy import MetricObservation, Rule, RuleHistory
from autoscaler.policy.slo import Learned
from benchmarks.example_rules import USERS_HPA
from demo.batching import BatchingReplica, Request
from demo.clairvoyant import min_gpu_hours
from demo.cluster import ClusterSettings
from demo.replay import ReplaySettings
from demo.serving_profile import ServingProfile, load_profile
from demo.slo_replay import FleetView, ScaleDown, Scaler, SloFigures, SloSettings, ceil_replicas, serve
from demo.traces import Trace, benchmark_traces, held_out_traces
from plumbing.prometheus.range_query import RangeSeries
from plumbing.prometheus.syntax import largest_range_seconds

ROOT = Path(__file__).resolve().parent.parent
RECOMMENDED_RULES = ROOT / "examples" / "gpu-inference-rules.yaml"
LLM_RULES = ROOT / "examples" / "llm-vllm-rules.yaml"
SLO_RULES = ROOT / "examples" / "llm-vllm-slo-rules.yaml"
MAX_REPLICAS = 16
PLANNER_INTERVAL_SECONDS = 60.0
GRACE_SECONDS = 60.0
"""The drain's grace period: longer than the longest generation within the objective (960 tokens at 50 ms)."""
CONFIG_KEYS = ("users", "recommended", "llm", "slo", "slo-newest", "slo-drain", "planner")
TRAINING_TRACE = "daily-2"
"""The held-out day the learned target is trained on (demo.traces.held_out_traces)."""
TTFT = "vllm:time_to_first_token_seconds"
ITL = "vllm:time_per_output_token_seconds"
BUCKETS = {
    TTFT: (0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0,
           40.0, 80.0, 160.0, 640.0, 2560.0),
    ITL: (0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0,
          80.0),
}
"""vLLM's histogram bounds (vllm/v1/metrics): what histogram_quantile reads."""


@dataclass(frozen=True)
class Configuration:
    key: str
    label: str
    scaler: Callable[[], Scaler]
    """A fresh scaler for one run (a rule's keeps its history)."""
    min_replicas: int = 2
    scale_down: ScaleDown = field(default_factory=ScaleDown)


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
        # vLLM's success counter counts a request when it finishes; the gateway's when it arrives
        rates = view.success_rates if "vllm:request_success_total" in query else view.request_rates
        panic = rates(largest_range_seconds(panic_query)) if panic_query else None
        return MetricObservation(name, rates(largest_range_seconds(query) or 15.0), panic_value=panic)
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


class UnaskedQuery(ValueError):
    """A query the service's emulated history does not hold: the learning asked for something else."""


@dataclass(frozen=True)
class LatencyTerm:
    """One `histogram_quantile(q, sum by (le) (rate(NAME_bucket{...}[W]))) / divisor` of a latency query."""

    name: str
    quantile: float
    window_minutes: int
    divisor: float


_TERM = (r"histogram_quantile\(\s*([0-9.]+)\s*,\s*sum by \(le\) \(rate\((vllm:[a-z_]+)_bucket\{[^}]*\}"
         r"\[(\w+)\]\)\)\)(?:\s*/\s*([0-9.]+))?")


def latency_terms(query: str) -> tuple[LatencyTerm, ...]:
    """The terms of a latency query the emulated service answers: one histogram quantile of vLLM's TTFT or
    inter-token latency, or the worse of two as shares of their objectives (`A / a > B / b or B / b`); a
    ValueError for any other query."""
    one = re.fullmatch(rf"\s*{_TERM}\s*", query)
    worse = re.fullmatch(rf"\s*({_TERM})\s*>\s*({_TERM})\s*or\s*({_TERM})\s*", query)
    if one is not None:
        groups = [one.groups()]
    elif worse is not None and " ".join(worse.group(6).split()) == " ".join(worse.group(11).split()):
        groups = [worse.groups()[1:5], worse.groups()[6:10]]
    else:
        raise ValueError(f"latency query {query!r}: the emulated service answers histogram_quantile(q, sum "
                         f"by (le) (rate({TTFT}_bucket or {ITL}_bucket[W]))), or the worse of two as "
                         "'A / a > B / b or B / b'")
    terms = []
    for quantile, name, window, divisor in groups:
        if name not in BUCKETS:
            raise ValueError(f"latency query {query!r}: {name} is not a histogram the emulated server keeps")
        minutes = _window_minutes(f"x[{window}]")
        terms.append(LatencyTerm(name, float(quantile), minutes, float(divisor or 1.0)))
    return tuple(terms)


class ServiceHistory:
    """The service's own history as Prometheus holds it: one point a minute of the three series the
    controller's learning reads for `rule` (its `slo.latency` query, its `slo.learn` metric's query and the
    replicas the controller recorded, by which a `Total` metric is divided and by which the learning knows
    the minutes the replicas held), recorded from a run of `serve`; a
    `HistorySource` that refuses any other query.

    Each point is what the query returns at that minute: a latency term is `histogram_quantile` over vLLM's
    buckets of the observations in its window (linear within a bucket, as Prometheus interpolates; none: no
    point); TTFT is observed at the first token, inter-token latency as the request's mean, once per token
    after the first, when it finishes (the emulated server keeps no per-token times). A request-rate term is
    its counter's increase over its window, and the replica count the one the controller read at its last
    sync before that minute. Pass `record` the scaler and `observe` every finished request."""

    def __init__(self, rule: Rule) -> None:
        slo = rule.slo
        if slo is None:
            raise ValueError(f"rule {rule.name!r} has no slo block: nothing to learn")
        metric = next(m for m in rule.metrics if m.name == slo.learn)
        self.rule = rule
        self.terms = latency_terms(slo.latency)
        self.counts = counter_of(metric.query)
        self.latency_query, self.metric_query = slo.latency, metric.query
        self.replicas_query = recorded_query(rule)
        self.rate_minutes = _window_minutes(metric.query)
        self._observed: dict[str, dict[int, list[int]]] = {name: {} for name in BUCKETS}
        """Histogram -> minute -> observations per bucket (the last: +Inf)."""
        self._successes: dict[int, int] = {}
        self._arrived: dict[int, int] = {}
        self._recorded: dict[int, int] = {}
        """Minute -> the replicas the controller read at its last sync of that minute."""

    def observe(self, request: Request) -> None:
        if request.first_token is not None and request.ttft is not None:
            self._add(TTFT, request.first_token, request.ttft, 1)
        if request.finished is not None and request.mean_itl is not None and request.output_tokens > 1:
            self._add(ITL, request.finished, request.mean_itl, request.output_tokens - 1)
        if request.finished is not None and not request.refused:
            minute = math.floor(request.finished / 60)
            self._successes[minute] = self._successes.get(minute, 0) + 1

    def _add(self, name: str, t: float, value: float, times: int) -> None:
        bounds = BUCKETS[name]
        counts = self._observed[name].setdefault(math.floor(t / 60), [0] * (len(bounds) + 1))
        counts[bisect.bisect_left(bounds, value)] += times

    def record(self, scaler: Scaler) -> Scaler:
        def recording(view: FleetView) -> int:
            minute = math.floor(view.t / 60)
            self._recorded[minute] = view.spec_replicas
            if view.t == minute * 60:
                self._arrived[minute - 1] = round(view.request_rates(60.0) * 60)
            return scaler(view)
        return recording

    @property
    def last_minute(self) -> int:
        return max(self._recorded, default=0)

    def run_range(self, query: str, start: float, end: float, step: float) -> RangeSeries:
        """The query's points at start + k * step up to `end`; UnaskedQuery for any query but the three."""
        if query == self.latency_query:
            at: Callable[[int], float | None] = self._latency
        elif query == self.metric_query:
            at = self._rate
        elif query == self.replicas_query:
            at = self._replicas
        else:
            raise UnaskedQuery(f"the service's history holds no series for {query!r}")
        if step % 60 or start % 60:
            raise UnaskedQuery(f"the history is kept a minute apart (asked: from {start:g} every {step:g} s)")
        first = min(self._recorded, default=0)
        minutes = range(max(first, math.ceil(start / 60)), min(self.last_minute, math.floor(end / 60)) + 1,
                        round(step / 60))
        values = {minute * 60.0: at(minute) for minute in minutes}
        return RangeSeries(query, {t: v for t, v in values.items() if v is not None})

    def _latency(self, minute: int) -> float | None:
        values = []
        for term in self.terms:
            bounds = BUCKETS[term.name]
            counts = [0] * (len(bounds) + 1)
            for m in range(minute - term.window_minutes, minute):
                for index, count in enumerate(self._observed[term.name].get(m, ())):
                    counts[index] += count
            value = histogram_quantile(term.quantile, bounds, counts)
            if value is not None:
                values.append(value / term.divisor)
        return max(values, default=None)

    def _rate(self, minute: int) -> float | None:
        per_minute = self._successes if self.counts == "finished" else self._arrived
        return sum(per_minute.get(m, 0) for m in range(minute - self.rate_minutes, minute)) / (
            self.rate_minutes * 60.0)

    def _replicas(self, minute: int) -> float | None:
        count = self._recorded.get(minute - 1)
        return None if count is None else float(count)


ARRIVALS_COUNTER = "envoy_cluster_upstream_rq_total"
"""The gateway's counter of requests sent to the replicas, counted when a request starts."""


def counter_of(query: str) -> str:
    """Which counter a request-rate query reads: 'arrived' (the gateway's) or 'finished' (vLLM's
    vllm:request_success_total); a ValueError for any other."""
    if ARRIVALS_COUNTER in query:
        return "arrived"
    if "vllm:request_success_total" in query:
        return "finished"
    raise ValueError(f"query {query!r}: the emulated service answers the rate of {ARRIVALS_COUNTER} or of "
                     "vllm:request_success_total only")


def _window_minutes(query: str) -> int:
    seconds = largest_range_seconds(query)
    if seconds < 60 or seconds % 60:
        raise ValueError(f"query {query!r}: the emulated history keeps whole minutes (range {seconds:g} s)")
    return int(seconds // 60)


def histogram_quantile(q: float, bounds: Sequence[float], counts: Sequence[int]) -> float | None:
    """Prometheus's histogram_quantile over per-bucket `counts` (`bounds`, then +Inf): linear within the
    bucket holding the rank; the highest finite bound when the rank falls in +Inf; None without counts."""
    total = sum(counts)
    if total == 0:
        return None
    rank = q * total
    below = 0
    for index, count in enumerate(counts):
        if below + count >= rank and count > 0:
            if index == len(bounds):
                return bounds[-1]
            lower = 0.0 if index == 0 else bounds[index - 1]
            return lower + (bounds[index] - lower) * (rank - below) / count
        below += count
    return bounds[-1]


@dataclass(frozen=True)
class Training:
    """What the slo rule learned, and from what."""

    trace: Trace
    learned: Learned
    rule: Rule
    """The rule as it decides: the learned target in place of the configured one (unchanged without one)."""
    figures: SloFigures
    """The training run itself, scored as any other."""


def train(rule: Rule, trace: Trace, profile: ServingProfile, settings: SloSettings) -> Training:
    """The example rule, with its configured target, serving `trace`; then the controller's learning over
    that history, as `gpu-autoscaler run` learns it an hour later."""
    history = ServiceHistory(rule)
    figures = serve(trace, history.record(rule_scaler(rule)), rule.min_replicas, profile, settings,
                    observe=history.observe, scale_down=deletion_costs(rule))
    assert rule.slo is not None
    learned = learn(rule, rule.slo, history, now=(history.last_minute + 2) * 60.0)
    return Training(trace, learned, SloLearning(learned=learned).rule(rule), figures)


def describe(training: Training) -> str:
    """What was learned, from what: the lines the benchmark prints before its table."""
    rule, learned, figures = training.rule, training.learned, training.figures
    assert rule.slo is not None
    target = next(m.target for m in rule.metrics if m.name == rule.slo.learn)
    return (f"trained on {training.trace.name} ({training.trace.description}, "
            f"{training.trace.duration_seconds / 3600:g} h), served by {SLO_RULES.name} with its configured "
            f"target: attainment {figures.attainment:.2%}, {figures.gpu_hours:.2f} GPU-h\n"
            f"learned: {learned.reason} ({learned.message}); {rule.slo.learn} target {target:.4g} per "
            "replica in every run below")


def training_trace() -> Trace:
    return next(t for t in held_out_traces() if t.name == TRAINING_TRACE)


# -------------------------------------------------------------------------------------------------- the run

def configurations(settings: SloSettings, capacity: float, slo: Rule) -> tuple[Configuration, ...]:
    """`slo`: the slo example as it decides (its learned target in place)."""
    users = _bounded(parse_rules(USERS_HPA, "<users-hpa>").rules[0])
    recommended = _bounded(_with_rate_target(load_rules(RECOMMENDED_RULES).rules[0],
                                             0.9 * settings.requests_per_load))
    llm = _bounded(load_rules(LLM_RULES).rules[0])
    target = next(m.target for m in slo.metrics if slo.slo is not None and m.name == slo.slo.learn)
    costs = deletion_costs(slo)
    return (Configuration("users", "users' HPA (GPU utilization)", lambda: rule_scaler(users)),
            Configuration("recommended", "recommended rule", lambda: rule_scaler(recommended)),
            Configuration("llm", "LLM example (queue + KV cache)", lambda: rule_scaler(llm),
                          scale_down=deletion_costs(llm)),
            Configuration("slo", f"slo example, learned target {target:.4g} req/s per replica, deletion "
                          "cost", lambda: rule_scaler(slo), scale_down=costs),
            Configuration("slo-newest", "the same, no deletion cost (the newest replica goes)",
                          lambda: rule_scaler(slo), scale_down=ScaleDown()),
            Configuration("slo-drain", f"the same, deletion cost + drain ({GRACE_SECONDS:g} s grace)",
                          lambda: rule_scaler(slo),
                          scale_down=dataclasses.replace(costs, grace_seconds=GRACE_SECONDS)),
            Configuration("planner", f"planner (Dynamo-like, {capacity:.2f} req/s per replica)",
                          lambda: planner_scaler(capacity)))


def deletion_costs(rule: Rule) -> ScaleDown:
    """A scale-down as the controller runs it for `rule`: with its podDeletionCost query, if it has one."""
    return ScaleDown(rule.pod_deletion_cost.query if rule.pod_deletion_cost else None)


def _bounded(rule: Rule) -> Rule:
    return dataclasses.replace(rule, min_replicas=2, max_replicas=MAX_REPLICAS)


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
            figures = serve(trace, config.scaler(), config.min_replicas, profile, settings, capacity_load,
                            scale_down=config.scale_down)
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
        for key in ("slo", "slo-drain"):
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
        cuts = [f"{key} {by[(trace, key)].cut:,}" for key in ("slo", "slo-newest", "slo-drain")
                if (trace, key) in by]
        if cuts:
            lines.append(f"- {trace}: cut by scale-down: " + ", ".join(cuts))
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
    keys = {key.strip() for key in args.configs.split(",") if key.strip()}
    if sorted(keys - set(CONFIG_KEYS)):
        parser.error(f"--configs: unknown {', '.join(sorted(keys - set(CONFIG_KEYS)))}; known: "
                     f"{', '.join(CONFIG_KEYS)}")
    settings = SloSettings(cluster=ClusterSettings(startup_delay_seconds=args.startup_delay))
    profile = load_profile()
    capacity = capacity_at_objective(profile, settings)
    print(f"profile {profile.name}: capacity at the objective {capacity:.2f} req/s per replica", flush=True)
    training = train(load_rules(SLO_RULES).rules[0], training_trace(), profile, settings)
    print(describe(training), flush=True)
    configs = configurations(settings, capacity, training.rule)
    if keys:
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
