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

It also keeps the demo's score (`ServedTally`): requests that met the objective, and those a scale-down cut,
with the pod-deletion costs and, per scale-down, without them.

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
    """Requests in flight (running or waiting) on the replicas scale-downs removed: what happened."""
    cut_without_costs: int = 0
    """At each scale-down, the requests in flight on the replicas the ReplicaSet's order without pod-deletion
    costs (newest first) would have removed instead: a counterfactual per event, not a second run."""
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
    simulated time. A pod that a scale-down removes (`scale_down`, the Deployment's `on_removed`) or that
    stops being ready loses its requests in flight (counted as cut); its name never serves again."""

    def __init__(self, profile: ServingProfile, namespace: str, prompt_tokens: tuple[int, int] = (128, 896),
                 output_tokens: tuple[int, int] = (64, 960), seed: int = 7,
                 objective: Objective | None = None) -> None:
        self._profile = profile
        self._namespace = namespace
        self._lengths = (prompt_tokens, output_tokens)
        self._rng = random.Random(seed)
        self._objective = objective or Objective()
        self._now = 0.0
        self._replicas: dict[str, BatchingReplica] = {}
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
    def cut(self) -> int:
        """Requests in flight on replicas that went away."""
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
            self._now = end

    def scale_down(self, event: ScaleDown) -> None:
        """The Deployment removed `event.removed`: their requests in flight are cut. Also counts those on the
        replicas the order without deletion costs would have removed, as they are at this instant."""
        with self._lock:
            instead = sum(replica.in_flight for pod in event.without_costs
                          if (replica := self._replicas.get(pod)) is not None)
            tally = self._tally
            self._tally = dataclasses.replace(tally, cut_without_costs=tally.cut_without_costs + instead,
                                              scale_downs=tally.scale_downs + 1,
                                              scale_downs_with_costs=tally.scale_downs_with_costs
                                              + event.costs_set)
            for pod in event.removed:
                self._remove(pod)

    def _remove(self, pod: str) -> None:
        self._gone.add(pod)
        replica = self._replicas.pop(pod, None)
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
                                              met=tally.met + self._objective.met(request))
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
            for pod, replica in self._replicas.items():
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
