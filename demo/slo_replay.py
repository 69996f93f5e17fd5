"""Replay a load trace as requests through a fleet of emulated LLM replicas, and score it in SLO terms.

Why: an LLM service is judged by the share of its requests that meet the latency objective (time to first
token and inter-token latency) per GPU-hour, not by GPU-equivalents. This replay turns a trace's load
(demo.traces) into Poisson arrivals of `requests_per_load` requests a second per unit of load, with prompt and
output lengths drawn from stated distributions, routes each to the ready replica with the fewest requests in
flight, and serves them with `demo.batching.BatchingReplica` (the profile's step and prefill times). Replicas
come and go through `demo.cluster.SimulatedDeployment`, so a new one serves only after the start-up delay and
holds its GPU while loading. Every `sync_seconds` a scaler (a rule through the controller's own planning, or a
baseline) sees the fleet's signals and sets the replica count. Pure simulated time: no wall clock.

A scale-down (`ScaleDown`) removes replicas as the controller and the ReplicaSet do: with a rule's
`podDeletionCost`, each ready replica first gets the cost the controller would set from that per-pod query
(`autoscaler.kube.deletion_cost`), so the idlest go; without it, the newest go. A removed replica's requests
in flight are cut at once (and miss the objective), as vLLM aborts them on SIGTERM by default
(`--shutdown-timeout=0`); with `grace_seconds` it drains instead (`--shutdown-timeout` within the pod's
`terminationGracePeriodSeconds`): it gets no new request, keeps its GPU (counted in GPU-hours) until its last
request finishes or the grace period ends, and only what is unfinished then is cut.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable
from dataclasses import dataclass, field

from autoscaler.kube.backend import PodMeta
from autoscaler.kube.deletion_cost import cost_patches
from demo.batching import BatchingReplica, Request, least_in_flight
from demo.cluster import ClusterSettings, SimulatedDeployment
from demo.scale_backend import merge_pod_annotations
from demo.serving_profile import ServingProfile
from demo.traces import Trace


@dataclass(frozen=True)
class Objective:
    """Per request: TTFT within `ttft_seconds` and mean inter-token latency within `itl_seconds`."""

    ttft_seconds: float = 0.5
    itl_seconds: float = 0.05

    def met(self, request: Request) -> bool:
        ttft, itl = request.ttft, request.mean_itl
        return ttft is not None and itl is not None and ttft <= self.ttft_seconds and itl <= self.itl_seconds


@dataclass(frozen=True)
class Lengths:
    """Prompt and output lengths in tokens, each uniform between its bounds (the traces carry none; these
    are the stated defaults: 512 tokens of each on average)."""

    prompt: tuple[int, int] = (128, 896)
    output: tuple[int, int] = (64, 960)

    def draw(self, rng: random.Random) -> tuple[int, int]:
        return rng.randint(*self.prompt), rng.randint(*self.output)


@dataclass(frozen=True)
class SloSettings:
    requests_per_load: float = 8.0
    """Requests a second per unit of the trace's load: about what one replica serves flat out with the default
    profile and lengths, so a trace's load reads as in the other benchmarks (1.0 = one busy GPU)."""
    sync_seconds: float = 15.0
    step_seconds: float = 5.0
    """Resolution of arrivals' rate and of the accounting; divides sync_seconds."""
    warmup_seconds: float = 1_800.0
    """Played (the trace mirrored) before t=0 and not scored."""
    drain_seconds: float = 600.0
    """Played after the trace with no arrivals, so the requests still in flight finish and are scored."""
    objective: Objective = field(default_factory=Objective)
    lengths: Lengths = field(default_factory=Lengths)
    cluster: ClusterSettings = field(default_factory=ClusterSettings)
    seed: int = 7


@dataclass(frozen=True)
class FleetView:
    """What a scaler sees at a sync: the fleet's signals as the rules' queries would return them."""

    t: float
    spec_replicas: int
    ready: int
    request_rates: Callable[[float], float]
    """Mean arrival rate (requests a second) over the last `window` seconds, as rate(...[window])."""
    success_rates: Callable[[float], float]
    """Mean rate of requests finished (vllm:request_success_total) over the last `window` seconds: the
    arrival rate a generation later while the replicas keep up, their throughput when they do not."""
    waiting: int
    running: int
    kv_cache_usage: float | None
    """Mean over the ready replicas (None with none ready)."""
    gpu_utilization: float | None
    """Percent, mean over the GPUs held (loading ones read 0), over the last sync."""


Scaler = Callable[[FleetView], int]


@dataclass(frozen=True)
class ScaleDown:
    """Which replicas a scale-down removes and what becomes of their requests in flight."""

    deletion_cost_query: str | None = None
    """The rule's `podDeletionCost.query` (None: no costs are set, the ReplicaSet removes the newest)."""
    grace_seconds: float | None = None
    """None: a removed replica's requests are cut at once (vLLM's default, `--shutdown-timeout=0`); else it
    drains for at most this long (`--shutdown-timeout` with `terminationGracePeriodSeconds` above it)."""

    def __post_init__(self) -> None:
        if self.grace_seconds is not None and not self.grace_seconds >= 0:
            raise ValueError(f"grace_seconds must be >= 0 (got {self.grace_seconds})")
        if self.deletion_cost_query is not None:
            counted(self.deletion_cost_query)


def counted(query: str) -> tuple[bool, bool]:
    """Whether a per-pod `podDeletionCost` query counts a replica's requests running
    (`vllm:num_requests_running`) and its requests waiting (`..._waiting`); a ValueError for a query that
    names neither (the emulated server has no other per-pod series)."""
    running, waiting = "running" in query, "waiting" in query
    if not (running or waiting):
        raise ValueError(f"podDeletionCost query {query!r}: the emulated server answers only its requests "
                         "running and waiting per pod")
    return running, waiting


def pod_value(query: str, server: BatchingReplica) -> int:
    """What the per-pod `query` returns for one replica."""
    running, waiting = counted(query)
    return (len(server.running) if running else 0) + (len(server.waiting) if waiting else 0)


@dataclass(frozen=True)
class SloFigures:
    requests: int
    met: int
    cut: int
    gpu_hours: float
    preemptions: int
    overloaded_minutes: float
    """Minutes in which the load per ready replica exceeded `capacity_load` (for the clairvoyant bound)."""
    ready_profile: tuple[int, ...] = ()

    @property
    def attainment(self) -> float:
        return self.met / self.requests if self.requests else 1.0


def serve(trace: Trace, scaler: Scaler, min_replicas: int, profile: ServingProfile, settings: SloSettings,
          capacity_load: float = 1.0, observe: Callable[[Request], None] | None = None,
          scale_down: ScaleDown = ScaleDown()) -> SloFigures:
    """Play `trace` (after a mirrored warm-up) with the replica count set by `scaler` at every sync.

    `capacity_load`: the load one replica serves within the objective; samples whose load per ready replica
    exceeds it count as overloaded minutes (what the clairvoyant bound is computed against). `observe` sees
    every finished request (a training history's latencies). `scale_down`: deletion costs and draining."""
    step = settings.step_seconds
    per_sync = round(settings.sync_seconds / step)
    if per_sync < 1 or abs(settings.sync_seconds / step - per_sync) > 1e-9:
        raise ValueError(f"step_seconds ({step}) must divide sync_seconds ({settings.sync_seconds})")
    clock_now = [-settings.warmup_seconds]
    deployment = SimulatedDeployment("slo", "llm", min_replicas, lambda: clock_now[0], settings.cluster)
    rng = random.Random(settings.seed)
    scored = {"requests": 0, "met": 0}
    objective = settings.objective

    def finished(request: Request) -> None:
        if observe is not None:
            observe(request)
        if not request.refused:
            finishing[0] += 1
        if request.arrival >= 0:
            scored["requests"] += 1
            scored["met"] += objective.met(request)

    servers: dict[str, BatchingReplica] = {}
    annotations: dict[str, dict[str, str]] = {}
    """Each replica's pod annotations as the controller left them (its deletion costs)."""
    draining: list[tuple[BatchingReplica, float]] = []
    """Removed replicas still finishing their requests, each with the end of its grace period."""
    cut = preemptions = 0
    arrivals: list[int] = []
    """Arrivals per step, for rate windows."""
    successes: list[int] = []
    """Requests finished per step."""
    finishing = [0]
    """Requests finished so far in the current step."""
    busy_at_sync: dict[str, float] = {}
    gpu_samples = overloaded = 0
    ready_profile: list[int] = []

    def cut_all(server: BatchingReplica) -> None:
        nonlocal cut, preemptions
        preemptions += server.preemptions  # counted before the replica goes
        lost = sum(1 for request in server.take_all() if request.arrival >= 0)
        cut += lost
        scored["requests"] += lost

    steps = int((settings.warmup_seconds + trace.duration_seconds + settings.drain_seconds) // step)
    for index in range(steps):
        start = -settings.warmup_seconds + index * step
        clock_now[0] = start
        load = trace(abs(start)) if start <= trace.duration_seconds else 0.0
        rate = load * settings.requests_per_load
        ready_names = [r.name for r in deployment.replicas() if r.gpu is not None and r.ready(start)]
        for name in ready_names:
            if name not in servers:
                servers[name] = BatchingReplica(profile, start, finished)
        ready = [servers[name] for name in ready_names]
        count = 0
        t = start
        while ready and rate > 0:
            t += rng.expovariate(rate)
            if t >= start + step:
                break
            target = least_in_flight(ready, t)
            prompt, output = settings.lengths.draw(rng)
            target.submit(Request(t, prompt, output))
            count += 1
        for server in ready:
            server.advance(start + step)
        holding = len(draining)  # a replica draining at the step's start holds its GPU in that sample
        still = []
        for server, deadline in draining:
            server.advance(min(deadline, start + step))
            if server.in_flight and deadline > start + step:
                still.append((server, deadline))
            elif server.in_flight:
                cut_all(server)  # the grace period is over: the kubelet kills what is left
            else:
                preemptions += server.preemptions
        draining = still
        arrivals.append(count)
        successes.append(finishing[0])
        finishing[0] = 0
        if 0 <= start <= trace.duration_seconds:  # the samples demo.clairvoyant's bound counts
            held = sum(1 for r in deployment.replicas() if r.gpu is not None) + holding
            gpu_samples += held
            ready_profile.append(len(ready))
            if load > capacity_load * len(ready):
                overloaded += 1
        if index % per_sync == per_sync - 1:
            end = start + step
            clock_now[0] = end
            view = _view(end, deployment, servers, arrivals, successes, step, busy_at_sync,
                         settings.sync_seconds)
            wanted = scaler(view)
            if wanted < deployment.spec_replicas and scale_down.deletion_cost_query is not None:
                set_costs_before_scale_down(deployment, servers, annotations, scale_down.deletion_cost_query,
                                            end)
            if wanted != deployment.spec_replicas:
                before = set(servers)
                deployment.scale_to(wanted)
                kept = {r.name for r in deployment.replicas()}
                for name in before - kept:
                    removed = servers.pop(name)
                    annotations.pop(name, None)
                    if scale_down.grace_seconds is None or not removed.in_flight:
                        cut_all(removed)
                    else:
                        draining.append((removed, end + scale_down.grace_seconds))
    for server, _ in draining:  # the run ended within their grace period (a drain longer than the run)
        cut_all(server)
    preemptions += sum(server.preemptions for server in servers.values())
    return SloFigures(scored["requests"], scored["met"], cut, gpu_samples * step / 3_600.0, preemptions,
                      overloaded * step / 60.0, tuple(ready_profile))


def set_costs_before_scale_down(deployment: SimulatedDeployment, servers: dict[str, BatchingReplica],
                                annotations: dict[str, dict[str, str]], query: str, now: float) -> None:
    """What the controller does before a scale-down patch: each pod's cost from the per-pod query (what a
    ready replica's server exports; a loading one exports nothing), patched where it changes, the ranking
    handed to the simulated ReplicaSet."""
    pods = deployment.replicas()
    in_flight = {r.name: float(pod_value(query, servers[r.name])) for r in pods
                 if r.gpu is not None and r.ready(now) and r.name in servers}
    metas = [PodMeta(r.name, annotations.get(r.name, {})) for r in pods]
    for name, patch in cost_patches(metas, in_flight).items():
        deployment.set_deletion_cost(name, merge_pod_annotations(annotations.setdefault(name, {}), patch))


def _view(now: float, deployment: SimulatedDeployment, servers: dict[str, BatchingReplica],
          arrivals: list[int], successes: list[int], step: float, busy_at_sync: dict[str, float],
          sync_seconds: float) -> FleetView:
    replicas = deployment.replicas()
    held = [r for r in replicas if r.gpu is not None]
    ready = [servers[r.name] for r in held if r.ready(now) and r.name in servers]

    def rate_of(counts: list[int]) -> Callable[[float], float]:
        def rate(window: float) -> float:
            count = max(1, round(window / step))
            recent = counts[-count:]
            return sum(recent) / (len(recent) * step) if recent else 0.0
        return rate

    busy = 0.0
    for replica in held:
        server = servers.get(replica.name)
        if server is not None and replica.ready(now):
            before = busy_at_sync.get(replica.name, 0.0)
            busy += min(1.0, (server.busy_seconds - before) / sync_seconds)
            busy_at_sync[replica.name] = server.busy_seconds
    return FleetView(
        t=now, spec_replicas=len(replicas), ready=len(ready), request_rates=rate_of(arrivals),
        success_rates=rate_of(successes),
        waiting=sum(len(s.waiting) for s in ready), running=sum(len(s.running) for s in ready),
        kv_cache_usage=sum(s.kv_cache_usage for s in ready) / len(ready) if ready else None,
        gpu_utilization=100.0 * busy / len(held) if held else None)


def ceil_replicas(value: float) -> int:
    return max(0, math.ceil(value - 1e-9))
