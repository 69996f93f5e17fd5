"""The demo's inference service as an LLM server: vLLM's metric names, from a queue that fills with load.

A continuous-batching server saturates on its batch and KV cache, not on GPU utilization: this emulation
gives the demo the signals an LLM service is scaled on (docs/llm-signals.md), under vLLM's names, per ready
replica (`namespace`, `pod`, `model_name` labels):

- `vllm:num_requests_running`: requests in the batch. By Little's law, throughput x `service_seconds`; the
  batch holds at most `capacity x service_seconds` (a replica serves `capacity` requests a second).
- `vllm:num_requests_waiting`: the queue. Arrivals beyond what the ready replicas serve accumulate in it,
  and it drains at the spare capacity; it is shared evenly by the ready replicas.
- `vllm:kv_cache_usage_perc`: the batch's share of the KV cache, 0..1 (full when the batch is).
- `vllm:time_to_first_token_seconds`: a histogram; each request of a step observes the prefill time plus the
  queue's wait at that step (queue / throughput).

`LlmQueue` is the model, pure and stepped by the demo's clock; `LlmServerCollector` exposes its state at
scrape time, as prometheus_client's custom collectors do.

`BatchingServerCollector` is the same endpoint over the per-request model of demo.batching (one emulated
continuous-batching replica per ready pod, with a measured serving profile's times): the same series, read
from each replica's own queue, batch and KV cache, its histograms observing each request's own time to first
token and mean inter-token latency (`vllm:time_per_output_token_seconds`). It takes the same `update` calls.
"""

from __future__ import annotations

import bisect
import random
import threading
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

from prometheus_client.core import GaugeMetricFamily, HistogramMetricFamily, Metric

from demo.batching import BatchingReplica, Request
from demo.serving_profile import ServingProfile

WAITING = "vllm:num_requests_waiting"
RUNNING = "vllm:num_requests_running"
KV_CACHE = "vllm:kv_cache_usage_perc"
TTFT = "vllm:time_to_first_token_seconds"
ITL = "vllm:time_per_output_token_seconds"
SERVED_NAMES = frozenset({WAITING, RUNNING, KV_CACHE, f"{TTFT}_bucket", f"{TTFT}_sum", f"{TTFT}_count"})
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


class LlmServerCollector:
    """Exposes an `LlmQueue` as vLLM's series, one of each per ready replica; thread-safe. Each replica's
    histogram counts the requests it answered, so its series only grow while the replica lives."""

    def __init__(self, queue: LlmQueue, namespace: str) -> None:
        self._queue = queue
        self._namespace = namespace
        self._pods: tuple[str, ...] = ()
        self._histograms: dict[str, _Histogram] = {}
        self._lock = threading.Lock()

    def update(self, arrivals_per_second: float, ready_pods: Sequence[str], seconds: float,
               backlog: bool = True) -> None:
        with self._lock:
            ttft = self._queue.step(arrivals_per_second, len(ready_pods), seconds, backlog)
            self._pods = tuple(ready_pods)
            self._histograms = {pod: self._histograms.get(pod, _Histogram()) for pod in self._pods}
            requests = arrivals_per_second * max(seconds, 0.0)
            for histogram in self._histograms.values():  # the step's requests, shared evenly
                histogram.observe(ttft, requests / len(self._pods))

    def collect(self) -> Iterable[Metric]:
        with self._lock:
            queue, pods = self._queue, self._pods
            waiting = queue.waiting / len(pods) if pods else 0.0
            families = [GaugeMetricFamily(WAITING, "Requests waiting to be processed.", labels=_LABELS),
                        GaugeMetricFamily(RUNNING, "Requests in the running batch.", labels=_LABELS),
                        GaugeMetricFamily(KV_CACHE, "KV-cache usage; 1 means 100 percent.", labels=_LABELS)]
            ttft = HistogramMetricFamily(TTFT, "Time to first token in seconds.", labels=_LABELS)
            for pod in pods:
                values = [self._namespace, pod, MODEL_NAME]
                families[0].add_metric(values, waiting)
                families[1].add_metric(values, queue.running_per_replica)
                families[2].add_metric(values, queue.kv_cache_usage)
                histogram = self._histograms[pod]
                ttft.add_metric(values, histogram.cumulative(), histogram.total)
        yield from families
        yield ttft


_LABELS = ("namespace", "pod", "model_name")


class BatchingServerCollector:
    """vLLM's series from one emulated continuous-batching replica per ready pod (demo.batching); thread-safe.

    `update` plays `seconds` of Poisson arrivals at `arrivals_per_second` (prompt and output lengths uniform
    in `prompt_tokens` and `output_tokens`), each to the ready replica with the fewest requests in flight, in
    simulated time; a pod that stops being ready loses its requests in flight (counted in `cut`)."""

    def __init__(self, profile: ServingProfile, namespace: str, prompt_tokens: tuple[int, int] = (128, 896),
                 output_tokens: tuple[int, int] = (64, 960), seed: int = 7) -> None:
        self._profile = profile
        self._namespace = namespace
        self._lengths = (prompt_tokens, output_tokens)
        self._rng = random.Random(seed)
        self._now = 0.0
        self._replicas: dict[str, BatchingReplica] = {}
        self._histograms: dict[str, tuple[_Histogram, _Histogram]] = {}
        self._lock = threading.Lock()
        self.cut = 0
        """Requests in flight on replicas that went away."""

    def update(self, arrivals_per_second: float, ready_pods: Sequence[str], seconds: float,
               backlog: bool = True) -> None:
        """`backlog` False: requests the replicas cannot start at once are turned away, not queued."""
        with self._lock:
            for pod in [pod for pod in self._replicas if pod not in ready_pods]:
                self.cut += len(self._replicas.pop(pod).take_all())
                del self._histograms[pod]
            for pod in ready_pods:
                if pod not in self._replicas:
                    self._replicas[pod] = BatchingReplica(self._profile, self._now, self._observer(pod))
                    self._histograms[pod] = (_Histogram(), _Histogram(counts=[0.0] * (len(ITL_BUCKETS) + 1),
                                                                      buckets=ITL_BUCKETS))
            end = self._now + max(seconds, 0.0)
            replicas = list(self._replicas.values())
            t = self._now
            while replicas and arrivals_per_second > 0:
                t += self._rng.expovariate(arrivals_per_second)
                if t >= end:
                    break
                replica = min(replicas, key=lambda r: r.in_flight)
                replica.advance(t)
                prompt, output = (self._rng.randint(*self._lengths[0]), self._rng.randint(*self._lengths[1]))
                replica.submit(Request(t, prompt, output))
            for replica in replicas:
                replica.advance(end)
                if not backlog:
                    replica.waiting.clear()
            self._now = end

    def _observer(self, pod: str) -> Callable[[Request], None]:
        def finished(request: Request) -> None:  # called under the lock, from update
            histograms = self._histograms.get(pod)
            if histograms is not None and request.ttft is not None and request.mean_itl is not None:
                histograms[0].observe(request.ttft, 1.0)
                histograms[1].observe(request.mean_itl, 1.0)
        return finished

    def collect(self) -> Iterable[Metric]:
        with self._lock:
            families = [GaugeMetricFamily(WAITING, "Requests waiting to be processed.", labels=_LABELS),
                        GaugeMetricFamily(RUNNING, "Requests in the running batch.", labels=_LABELS),
                        GaugeMetricFamily(KV_CACHE, "KV-cache usage; 1 means 100 percent.", labels=_LABELS)]
            ttft = HistogramMetricFamily(TTFT, "Time to first token in seconds.", labels=_LABELS)
            itl = HistogramMetricFamily(ITL, "Mean time per output token of each request, in seconds.",
                                        labels=_LABELS)
            for pod, replica in self._replicas.items():
                values = [self._namespace, pod, MODEL_NAME]
                families[0].add_metric(values, len(replica.waiting))
                families[1].add_metric(values, len(replica.running))
                families[2].add_metric(values, replica.kv_cache_usage)
                first, per_token = self._histograms[pod]
                ttft.add_metric(values, first.cumulative(), first.total)
                itl.add_metric(values, per_token.cumulative(), per_token.total)
        yield from families
        yield ttft
        yield itl
