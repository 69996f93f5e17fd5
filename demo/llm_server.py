"""The demo's inference service as an LLM server: vLLM's metric names, per ready replica.

A continuous-batching server saturates on its batch and KV cache, not on GPU utilization
(docs/llm-signals.md).
`BatchingServerCollector` serves the demo's world: one emulated continuous-batching replica per ready pod
(demo.batching, with a measured serving profile's times), exposed at scrape time under vLLM's names
(`namespace`, `pod`, `model_name` labels), as prometheus_client's custom collectors do:

- `vllm:num_requests_running`, `vllm:num_requests_waiting`: the replica's batch and queue;
- `vllm:kv_cache_usage_perc`: the share of its KV cache its batch holds, 0..1;
- `vllm:request_success_total{finished_reason="stop"}`: requests it served to their last token;
- `vllm:time_to_first_token_seconds`, `vllm:time_per_output_token_seconds`: histograms of each served
  request's own time to first token and mean inter-token latency.

A pod that a scale-down removes drains, as vLLM does with `--shutdown-timeout` (docs/rules.md, "Scale-down
that cuts no generation"): it gets no new request and serves those in flight until they end or its grace
period (`drain_seconds`) does; what is left then is cut. With `drain_seconds` 0 it is cut at once (vLLM's
default, `--shutdown-timeout=0`). A draining pod keeps serving its series, as a real one is scraped until it
exits.

It also keeps the demo's score (`ServedTally`): requests that met the objective, those cut, those finished
while draining, and, at each scale-down, what an abort would have cut there with the pod-deletion costs and
without them.

`LlmQueue` is the fluid model the quality replays (demo.replay) still step: a queue that fills when the load
outgrows the ready replicas and drains at their spare capacity.
"""

from __future__ import annotations

import bisect
import dataclasses
import random
import threading
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric

from demo.batching import BatchingReplica, Request, least_in_flight
from demo.cluster import ScaleDown
from demo.serving_profile import ServingProfile
from demo.slo_replay import Objective

WAITING = "vllm:num_requests_waiting"
RUNNING = "vllm:num_requests_running"
KV_CACHE = "vllm:kv_cache_usage_perc"
TTFT = "vllm:time_to_first_token_seconds"
ITL = "vllm:time_per_output_token_seconds"
SUCCESS = "vllm:request_success_total"
SERVED_NAMES = frozenset({WAITING, RUNNING, KV_CACHE, SUCCESS,
                          *(f"{name}_{part}" for name in (TTFT, ITL) for part in ("bucket", "sum", "count"))})
TTFT_BUCKETS = (0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
"""Upper bounds in seconds (vLLM's own buckets are finer; these cover the demo's range)."""
ITL_BUCKETS = (0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 1.0)
MODEL_NAME = "demo-llm"
DRAIN_SECONDS = 60.0
"""A removed replica's grace period by default: longer than the longest generation within the objective (960
tokens at 50 ms = 48 s), as the drain recipe sets `--shutdown-timeout` (docs/rules.md)."""


@dataclass
class LlmQueue:
    """The service's queue and batch, stepped with the arrival rate and the ready replicas."""

    capacity: float
    """Requests a second one ready replica serves at most."""
    service_seconds: float = 2.0
    """A request's time in the batch."""
    prefill_seconds: float = 0.05
    waiting: float = 0.0
    running_per_replica: float = 0.0

    def step(self, arrivals_per_second: float, ready: int, seconds: float, backlog: bool = True) -> float:
        """`seconds` of `arrivals_per_second` requests against `ready` replicas; the time to first token of
        the step's requests. `backlog` False: what the replicas cannot serve is turned away, not queued (the
        demo's wait for Prometheus before the day starts, which no autoscaler could have acted on)."""
        if seconds <= 0:
            return self.prefill_seconds
        served_at_most = self.capacity * ready
        offered = arrivals_per_second + self.waiting / seconds  # what came in plus what waited
        throughput = min(offered, served_at_most)
        queued = self.waiting + (arrivals_per_second - throughput) * seconds
        self.waiting = max(0.0, queued) if backlog else 0.0
        self.running_per_replica = throughput / ready * self.service_seconds if ready else 0.0
        wait = self.waiting / throughput if throughput > 0 else TTFT_BUCKETS[-1] * 2
        return self.prefill_seconds + wait

    @property
    def batch_size(self) -> float:
        """The most requests one replica's batch holds."""
        return self.capacity * self.service_seconds

    @property
    def kv_cache_usage(self) -> float:
        return min(1.0, self.running_per_replica / self.batch_size) if self.batch_size > 0 else 0.0


@dataclass
class _Histogram:
    """One replica's observations per bucket (the last past every bound), their sum."""

    counts: list[float] = field(default_factory=lambda: [0.0] * (len(TTFT_BUCKETS) + 1))
    total: float = 0.0
    buckets: tuple[float, ...] = TTFT_BUCKETS

    def observe(self, seconds: float, requests: float) -> None:
        self.counts[bisect.bisect_left(self.buckets, seconds)] += requests
        self.total += seconds * requests

    def cumulative(self) -> list[tuple[str, float]]:
        out, running = [], 0.0
        for bound, count in zip((*map(str, self.buckets), "+Inf"), self.counts, strict=True):
            running += count
            out.append((bound, running))
        return out


_LABELS = ("namespace", "pod", "model_name")


@dataclass(frozen=True)
class ServedTally:
    """The emulated server's requests since it started, as the demo scores them (subtract two for a span)."""

    finished: int = 0
    """Requests that ended: served to their last token, or refused (too long for the KV cache)."""
    met: int = 0
    """Of those, the ones within the objective (time to first token and mean inter-token latency)."""
    cut: int = 0
    """Requests a scale-down cut: those still in flight (running or waiting) on a removed replica when its
    drain's grace period ended, or when it was removed without a drain. What happened."""
    cut_without_drain: int = 0
    """At each scale-down, the requests in flight on the replicas it removed: what it would have cut without
    the drain (vLLM's default abort), with the replicas the pod-deletion costs chose."""
    cut_without_drain_or_costs: int = 0
    """At each scale-down, the requests in flight on the replicas the ReplicaSet's order without pod-deletion
    costs (newest first) would have removed instead: what an abort would have cut by the default order. Both
    are counterfactuals per event, not a second run."""
    drained: int = 0
    """Requests a removed replica served to their end while draining (also counted in `finished`)."""
    scale_downs: int = 0
    scale_downs_with_costs: int = 0
    """Scale-downs at which some replica had a pod-deletion cost when the ReplicaSet chose."""

    @property
    def requests(self) -> int:
        """Requests scored: those that ended and those cut (a cut request meets no objective)."""
        return self.finished + self.cut

    @property
    def attainment(self) -> float | None:
        """Share of the requests scored that met the objective (None: none scored)."""
        return self.met / self.requests if self.requests else None

    def __sub__(self, other: ServedTally) -> ServedTally:
        return ServedTally(*(mine - theirs for mine, theirs in zip(dataclasses.astuple(self),
                                                                  dataclasses.astuple(other), strict=True)))


class BatchingServerCollector:
    """vLLM's series from one emulated continuous-batching replica per ready pod (demo.batching); thread-safe.

    `update` plays `seconds` of Poisson arrivals at `arrivals_per_second` (prompt and output lengths uniform
    in `prompt_tokens` and `output_tokens`), each to the ready replica with the fewest requests in flight, in
    simulated time. A pod that a scale-down removes (`scale_down`, the Deployment's `on_removed`) drains for
    up to `drain_seconds` of that time (0: its requests in flight are cut at once); one that stops being
    ready without a scale-down (none does in the demo's world) loses its requests at once, as a crash would.
    Either way its name never takes a request again."""

    def __init__(self, profile: ServingProfile, namespace: str, prompt_tokens: tuple[int, int] = (128, 896),
                 output_tokens: tuple[int, int] = (64, 960), seed: int = 7,
                 objective: Objective | None = None, drain_seconds: float = DRAIN_SECONDS) -> None:
        if not drain_seconds >= 0:
            raise ValueError(f"drain_seconds must be >= 0 (got {drain_seconds})")
        self._profile = profile
        self._namespace = namespace
        self._lengths = (prompt_tokens, output_tokens)
        self._rng = random.Random(seed)
        self._objective = objective or Objective()
        self._drain_seconds = drain_seconds
        self._now = 0.0
        self._replicas: dict[str, BatchingReplica] = {}
        self._draining: dict[str, tuple[BatchingReplica, float]] = {}
        """Pods removed while serving, each with the end of its grace period (simulated time)."""
        self._histograms: dict[str, tuple[_Histogram, _Histogram]] = {}
        self._succeeded: dict[str, int] = {}
        self._gone: set[str] = set()
        """Pods removed: a driver tick that read the Deployment just before a scale-down still names them."""
        self._lock = threading.Lock()
        self._tally = ServedTally()

    @property
    def objective(self) -> Objective:
        """What a request must meet to count as `met`."""
        return self._objective

    @property
    def drain_seconds(self) -> float:
        """The grace period a removed pod serves its requests in flight for (0: they are cut at once)."""
        return self._drain_seconds

    def draining(self) -> tuple[str, ...]:
        """The pods removed that still serve requests in flight."""
        with self._lock:
            return tuple(self._draining)

    @property
    def cut(self) -> int:
        """Requests cut: in flight on replicas that went away, or left when a drain's grace period ended."""
        return self.tally().cut

    def tally(self) -> ServedTally:
        with self._lock:
            return self._tally

    def update(self, arrivals_per_second: float, ready_pods: Sequence[str], seconds: float,
               backlog: bool = True) -> None:
        """`backlog` False: requests the replicas cannot start at once are turned away, not queued."""
        with self._lock:
            for pod in [pod for pod in self._replicas if pod not in ready_pods]:
                self._remove(pod)
            for pod in ready_pods:
                if pod not in self._replicas and pod not in self._gone:
                    self._replicas[pod] = BatchingReplica(self._profile, self._now, self._observer(pod))
                    self._histograms[pod] = (_Histogram(), _Histogram(counts=[0.0] * (len(ITL_BUCKETS) + 1),
                                                                      buckets=ITL_BUCKETS))
                    self._succeeded[pod] = 0
            end = self._now + max(seconds, 0.0)
            replicas = list(self._replicas.values())
            t = self._now
            while replicas and arrivals_per_second > 0:
                t += self._rng.expovariate(arrivals_per_second)
                if t >= end:
                    break
                replica = least_in_flight(replicas, t)
                prompt, output = (self._rng.randint(*self._lengths[0]), self._rng.randint(*self._lengths[1]))
                replica.submit(Request(t, prompt, output))
            for replica in replicas:
                replica.advance(end)
                if not backlog:
                    replica.waiting.clear()
            for pod, (replica, deadline) in list(self._draining.items()):
                replica.advance(min(deadline, end))
                if not replica.in_flight or deadline <= end:
                    self._remove(pod)  # drained, or the grace period is over: the kubelet kills what is left
            self._now = end

    def scale_down(self, event: ScaleDown) -> None:
        """The Deployment removed `event.removed`: they drain (or, without a drain, their requests in flight
        are cut). Also counts what an abort would cut now: the requests in flight on the replicas removed, and
        on those the order without deletion costs would have removed."""
        with self._lock:
            def in_flight(pods: tuple[str, ...]) -> int:
                return sum(replica.in_flight for pod in pods
                           if (replica := self._replicas.get(pod)) is not None)

            tally = self._tally
            self._tally = dataclasses.replace(
                tally, cut_without_drain=tally.cut_without_drain + in_flight(event.removed),
                cut_without_drain_or_costs=tally.cut_without_drain_or_costs + in_flight(event.without_costs),
                scale_downs=tally.scale_downs + 1,
                scale_downs_with_costs=tally.scale_downs_with_costs + event.costs_set)
            for pod in event.removed:
                replica = self._replicas.get(pod)
                if replica is not None and replica.in_flight and self._drain_seconds > 0:
                    del self._replicas[pod]  # takes no new request from now on
                    self._gone.add(pod)
                    self._draining[pod] = (replica, self._now + self._drain_seconds)
                else:
                    self._remove(pod)

    def _remove(self, pod: str) -> None:
        """The pod is gone: what it still had in flight is cut, its series end."""
        self._gone.add(pod)
        replica = self._replicas.pop(pod, None)
        if replica is None:
            replica, _ = self._draining.pop(pod, (None, 0.0))
        if replica is None:
            return
        cut = len(replica.take_all())
        self._tally = dataclasses.replace(self._tally, cut=self._tally.cut + cut)
        del self._histograms[pod]
        del self._succeeded[pod]

    def _observer(self, pod: str) -> Callable[[Request], None]:
        def finished(request: Request) -> None:  # called under the lock, from update
            tally = self._tally
            self._tally = dataclasses.replace(tally, finished=tally.finished + 1,
                                              met=tally.met + self._objective.met(request),
                                              drained=tally.drained + (pod in self._draining))
            histograms = self._histograms.get(pod)
            if histograms is not None and request.ttft is not None and request.mean_itl is not None:
                histograms[0].observe(request.ttft, 1.0)
                histograms[1].observe(request.mean_itl, 1.0)
                self._succeeded[pod] += 1
        return finished

    def collect(self) -> Iterable[Metric]:
        with self._lock:
            families = [GaugeMetricFamily(WAITING, "Requests waiting to be processed.", labels=_LABELS),
                        GaugeMetricFamily(RUNNING, "Requests in the running batch.", labels=_LABELS),
                        GaugeMetricFamily(KV_CACHE, "KV-cache usage; 1 means 100 percent.", labels=_LABELS)]
            success = CounterMetricFamily(SUCCESS.removesuffix("_total"), "Requests served to their end.",
                                          labels=[*_LABELS, "finished_reason"])
            ttft = HistogramMetricFamily(TTFT, "Time to first token in seconds.", labels=_LABELS)
            itl = HistogramMetricFamily(ITL, "Mean time per output token of each request, in seconds.",
                                        labels=_LABELS)
            serving = [*self._replicas.items(),
                       *((pod, replica) for pod, (replica, _) in self._draining.items())]
            for pod, replica in serving:
                values = [self._namespace, pod, MODEL_NAME]
                families[0].add_metric(values, len(replica.waiting))
                families[1].add_metric(values, len(replica.running))
                families[2].add_metric(values, replica.kv_cache_usage)
                success.add_metric([*values, "stop"], self._succeeded[pod])
                first, per_token = self._histograms[pod]
                ttft.add_metric(values, first.cumulative(), first.total)
                itl.add_metric(values, per_token.cumulative(), per_token.total)
        yield from families
        yield success
        yield ttft
        yield itl
