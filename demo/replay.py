"""Replay a load trace through the policy engine in simulated time, and score the autoscaling it produced.

No Prometheus, no Kubernetes, no wall clock: a virtual clock steps through the trace, the simulated Deployment
(demo.cluster) serves the load, and every `sync_period_seconds` the rule's metrics are computed from the
cluster as its queries would return them and planned by the controller's own code
(`autoscaler.planning.plan.plan_replicas`: target at zero, fallback, the engine, the capacity guard; then
`RuleHistory.with_scale` for every change applied). The benchmark of autoscaling quality runs this for each
configuration on each trace. A trace with `others` shares the pool with another tenant; every sync feeds the
capacity guard what the rule's capacity query and the Pending pods would show: the GPUs no pod holds, and
since when each Pending replica is unschedulable.

What the metrics return (the simulated answers to the rule's queries, by metric name):
- `gpu_utilization`: mean GPU utilization in percent over every GPU held by a replica of the target, as
  `100 * avg(gpu_utilization_ratio{pod=~"<target>-.*"})` returns it: replicas still loading their model hold
  a GPU that reads ~0 %, so they pull the mean down while they start. That is the counterpart of the HPA
  treating not-yet-ready pods as 0 % for scale-up, and it keeps an Average rule from piling more replicas on
  while the first ones load; a scale-down window longer than the start-up delay keeps it from scaling down.
- `requests_per_second`: the request rate the service receives (load x `requests_per_gpu_second`), as
  `sum(rate(service_requests_total[1m]))` returns it: the mean over the query's range window (the largest
  `[...]` in the query; the rate at that instant when it has none), so a one-minute rate lags a burst by about
  half a minute and smooths the jitter. Unlike utilization it does not saturate at 100 %. With
  `behavior.panic` its panic-window query is answered the same way over the shorter window.
- `queue`, `running` and `kv_cache`: the emulated LLM server's `sum(vllm:num_requests_waiting)`,
  `sum(vllm:num_requests_running)` and `avg(vllm:kv_cache_usage_perc)` over the ready replicas
  (demo/llm_server.py's fluid `LlmQueue`, stepped with the load at every step: arrivals beyond what the ready
  replicas serve wait, and drain at the spare capacity; a batch holds throughput x its service time).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from autoscaler.planning.overload import OVERLOAD_LINE, overloaded_minutes
from autoscaler.planning.plan import count_all_failed, plan_replicas
from autoscaler.policy import Decision, MetricObservation, Reason, Rule, RuleHistory, decide
from autoscaler.policy.capacity import CapacityObservation
from demo.cluster import ClusterSettings, ClusterSnapshot, SimulatedDeployment
from demo.llm_server import LlmQueue
from demo.traces import Trace
from plumbing.prometheus.syntax import largest_range_seconds

DecideFunction = Callable[[Rule, int, Sequence[MetricObservation], RuleHistory, float], Decision]

GPU_UTILIZATION = "gpu_utilization"
REQUESTS_PER_SECOND = "requests_per_second"
QUEUE = "queue"
RUNNING = "running"
KV_CACHE = "kv_cache"
KNOWN_METRICS = (GPU_UTILIZATION, REQUESTS_PER_SECOND, QUEUE, RUNNING, KV_CACHE)

def query_range_seconds(query: str) -> float:
    """The largest range selector of a PromQL query in seconds (`rate(x[1m])` -> 60, `[1h30m]` -> 5400, a
    subquery `[30m:1m]` -> 1800), 0 when it has none."""
    return largest_range_seconds(query)


@dataclass(frozen=True)
class ReplaySettings:
    """How the replay steps and what it counts as overload."""

    sync_period_seconds: float = 15.0
    """The controller's interval (the HPA's default --horizontal-pod-autoscaler-sync-period)."""
    step_seconds: float = 5.0
    """Resolution of the accounting (GPU-hours, overloaded minutes); divides the sync period."""
    warmup_seconds: float = 3_600.0
    """Played before t=0 and not scored, so every configuration starts settled in its own state. The warm-up
    plays the trace mirrored (load(-t)), continuous at t=0 and with the same statistics."""
    overload_line: float = OVERLOAD_LINE
    """Overloaded when the ready GPUs would need to be busier than this (0..1): near saturation inference
    latency climbs steeply and requests queue (`autoscaler.planning.overload`, the one definition `tune` and
    `simulate` count too)."""
    requests_per_gpu_second: float = 10.0
    """Requests per second one GPU serves at 100 % utilization (scales the requests_per_second metric)."""
    cluster: ClusterSettings = field(default_factory=ClusterSettings)

    def __post_init__(self) -> None:
        ratio = self.sync_period_seconds / self.step_seconds if self.step_seconds > 0 else 0.0
        if ratio < 1 or abs(ratio - round(ratio)) > 1e-9:
            raise ValueError(f"step_seconds ({self.step_seconds}) must be > 0 and divide sync_period_seconds "
                             f"({self.sync_period_seconds})")
        if self.warmup_seconds < 0 or not 0 < self.overload_line <= 1:
            raise ValueError("warmup_seconds must be >= 0 and overload_line in (0, 1]")


@dataclass(frozen=True)
class Sample:
    """The cluster at one accounting step."""

    t: float
    load: float
    replicas: int
    gpus_held: int
    """Replicas holding a GPU (ready or loading; not Pending): what GPU-hours count."""
    ready: int
    utilization: float | None
    """Mean over GPUs held by replicas, 0..1 (the gpu_utilization metric / 100)."""
    demand_per_ready: float
    """Load per ready GPU; above 1.0 the service cannot keep up (inf with no replica ready)."""
    pending: int = 0
    """Replicas Pending: no free GPU in the pool (they hold none and serve nothing)."""
    others_waiting: int = 0
    """GPUs the other tenant wants but cannot get (the pool is full)."""


@dataclass(frozen=True)
class SyncRecord:
    """One sync of the engine: what it saw and what it decided."""

    t: float
    current: int
    replicas: int
    reason: str
    message: str


@dataclass(frozen=True)
class Figures:
    """The quality of one configuration on one trace, over the scored part (t >= 0)."""

    gpu_hours: float
    overloaded_minutes: float
    not_ready_minutes: float
    scale_changes: int
    reversals: int
    pending_replica_minutes: float = 0.0
    """Replica-minutes spent Pending (no GPU to run on)."""
    peak_pending: int = 0
    capacity_limited_syncs: int = 0
    """Syncs whose scale-up the capacity guard limited (reason CapacityLimited)."""
    others_waiting_gpu_minutes: float = 0.0
    """GPU-minutes the other tenant wanted and could not get."""


@dataclass(frozen=True)
class ReplayResult:
    rule: str
    trace: str
    samples: tuple[Sample, ...]
    syncs: tuple[SyncRecord, ...]
    figures: Figures


def observations(rule: Rule, snapshot: ClusterSnapshot, settings: ReplaySettings,
                 mean_load: Callable[[float], float] | None = None,
                 llm: LlmQueue | None = None) -> list[MetricObservation]:
    """What each of the rule's queries would return for this cluster state (see the module docstring).

    `mean_load(window_seconds)`: the trace's mean load over the last `window_seconds` (the snapshot's load
    when not given, or for a query without a range). `llm`: the emulated LLM server's queue (a fresh, empty
    one when not given).
    """
    llm = llm or LlmQueue(capacity=settings.requests_per_gpu_second)
    result = []
    for metric in rule.metrics:
        if metric.name == GPU_UTILIZATION:
            mean = snapshot.mean_utilization(include_loading=True)
            if mean is None:
                result.append(MetricObservation(metric.name, None, "no GPU held by the target"))
            else:
                result.append(MetricObservation(metric.name, 100.0 * mean))
        elif metric.name == REQUESTS_PER_SECOND:
            rate = _rate(metric.query, snapshot, mean_load) * settings.requests_per_gpu_second
            short = (_rate(metric.panic_query, snapshot, mean_load) * settings.requests_per_gpu_second
                     if metric.panic_query else None)
            result.append(MetricObservation(metric.name, rate, panic_value=short))
        elif metric.name == QUEUE:
            result.append(MetricObservation(metric.name, llm.waiting))
        elif metric.name == RUNNING:
            result.append(MetricObservation(metric.name, llm.running_per_replica * snapshot.ready))
        elif metric.name == KV_CACHE:
            if snapshot.ready == 0:
                result.append(MetricObservation(metric.name, None, "no ready replica"))
            else:
                result.append(MetricObservation(metric.name, llm.kv_cache_usage))
        else:
            raise ValueError(f"rule {rule.name}: metric {metric.name!r} has no simulated signal; the replay "
                             f"knows {', '.join(KNOWN_METRICS)}")
    return result


def _rate(query: str, snapshot: ClusterSnapshot, mean_load: Callable[[float], float] | None) -> float:
    """The load as a rate() over the query's window returns it (the load now for a query without one)."""
    window = query_range_seconds(query)
    return mean_load(window) if mean_load is not None and window > 0 else snapshot.load


class _VirtualClock:
    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def replay(rule: Rule, trace: Trace, settings: ReplaySettings | None = None,
           decide_fn: DecideFunction = decide, previous: Trace | None = None) -> ReplayResult:
    """Play `trace` (after a mirrored warm-up) through `rule`; the Deployment starts at minReplicas, ready.

    `previous`: the period before the trace (another draw of the same day, say): the warm-up plays its end
    instead of the mirror, so a rule that learns from earlier seasons (`forecast`) sees a real one.
    """
    settings = settings or ReplaySettings()
    step = settings.step_seconds
    steps_per_sync = round(settings.sync_period_seconds / step)
    warmup_steps = math.ceil(settings.warmup_seconds / step)
    total_steps = warmup_steps + int(trace.duration_seconds // step)
    clock = _VirtualClock(-warmup_steps * step)
    deployment = SimulatedDeployment(rule.target.namespace, rule.target.name, rule.min_replicas, clock,
                                     settings.cluster)
    history = RuleHistory()
    all_failed_syncs = 0
    llm = LlmQueue(capacity=settings.requests_per_gpu_second)

    loads: dict[int, float] = {}
    """The load at each step index (t = index * step), computed once: every sync's rate() windows read the
    same steps again, and a trace's load is a sum of curves and noise."""

    def load_at_step(index: int) -> float:
        """The load at step index * step; before 0 the warm-up: the end of `previous`, else the trace
        mirrored."""
        load = loads.get(index)
        if load is None:
            t = index * step
            load = trace(abs(t)) if t >= 0 or previous is None else previous(previous.duration_seconds + t)
            loads[index] = load
        return load

    def mean_load_until(now_index: int) -> Callable[[float], float]:
        """The mean of the load sampled every step over (now - window, now], as a rate() over the window."""
        def mean(window: float) -> float:
            count = max(1, round(window / step))
            return sum(load_at_step(now_index - k) for k in range(count)) / count
        return mean

    samples: list[Sample] = []
    syncs: list[SyncRecord] = []
    for index in range(total_steps + 1):
        now = (index - warmup_steps) * step
        clock.now = now
        load = load_at_step(index - warmup_steps)
        others = trace.others_at(abs(now))
        deployment.set_others(others)
        snapshot = deployment.snapshot(load)
        llm.step(load * settings.requests_per_gpu_second, snapshot.ready, step)
        if index % steps_per_sync == 0:
            current = deployment.spec_replicas
            seen = observations(rule, snapshot, settings, mean_load_until(index - warmup_steps), llm)
            all_failed_syncs = count_all_failed(all_failed_syncs, seen)
            plan = plan_replicas(
                rule=rule,
                current=current,
                observations=seen,
                history=history,
                all_failed_syncs=all_failed_syncs,
                now=now,
                decide_fn=decide_fn,
                capacity=capacity_seen(deployment, snapshot),
            )
            history = plan.history
            if plan.replicas != current:
                deployment.scale_to(plan.replicas)
                history = history.with_scale(now, current, plan.replicas)
                snapshot = deployment.snapshot(load)
            if now >= 0:
                syncs.append(SyncRecord(now, current, plan.replicas, str(plan.reason), plan.message))
        if now >= 0:
            samples.append(Sample(now, load, snapshot.spec_replicas, snapshot.gpus_held, snapshot.ready,
                                  snapshot.mean_utilization(include_loading=True), snapshot.demand_per_ready,
                                  snapshot.pending, others - snapshot.others))
    return ReplayResult(rule.name, trace.name, tuple(samples), tuple(syncs),
                        score(samples, syncs, step, settings.overload_line))


def capacity_seen(deployment: SimulatedDeployment, snapshot: ClusterSnapshot) -> CapacityObservation:
    """What the capacity guard sees this sync: the GPUs no pod holds (the rule's capacity query), and since
    when each Pending replica is unschedulable (what the scale backend lists), on the replay's clock."""
    return CapacityObservation(float(snapshot.free_gpus), deployment.unschedulable_since())


def score(samples: Sequence[Sample], syncs: Sequence[SyncRecord], step_seconds: float,
          overload_line: float) -> Figures:
    """GPU-hours (replicas hold their GPU while loading; Pending ones hold none), overloaded, not-ready and
    Pending replica-minutes, changes and reversals (a change in the opposite direction of the previous
    change)."""
    gpu_hours = sum(s.gpus_held for s in samples) * step_seconds / 3_600.0
    pending = sum(s.pending for s in samples) * step_seconds / 60.0
    peak_pending = max((s.pending for s in samples), default=0)
    limited = sum(1 for sync in syncs if sync.reason == Reason.CapacityLimited.value)
    others_waiting = sum(s.others_waiting for s in samples) * step_seconds / 60.0
    overloaded = overloaded_minutes((s.demand_per_ready for s in samples), step_seconds, overload_line)
    not_ready = sum(1 for s in samples if s.ready < s.replicas) * step_seconds / 60.0
    changes = reversals = 0
    last_direction = 0
    for sync in syncs:
        if sync.replicas == sync.current:
            continue
        changes += 1
        direction = 1 if sync.replicas > sync.current else -1
        if last_direction and direction != last_direction:
            reversals += 1
        last_direction = direction
    return Figures(gpu_hours, overloaded, not_ready, changes, reversals, pending, peak_pending, limited,
                   others_waiting)
