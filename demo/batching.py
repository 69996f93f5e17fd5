"""One replica of a continuous-batching LLM server: a pure discrete-event model driven by a serving profile.

Why: capacity per replica is a property of batch, context and KV cache (docs/llm-signals.md). This model
serves individual requests (prompt and output lengths) the way vLLM's scheduler does, with the times of a
measured profile (demo.serving_profile), so a benchmark can score autoscaling by each request's time to first
token (TTFT) and inter-token latency (ITL). No wall clock: `advance(until)` runs the server's iterations up
to a simulated time, so a day of traffic replays in seconds.

The scheduler, per iteration:
- waiting requests are admitted in arrival order while the batch has room (`max_num_seqs`), the KV cache
  holds their tokens, and the iteration's prefill budget (`max_prefill_tokens`) is not spent; admitted ones
  are prefilled together in the profile's time for their tokens, which emits each one's first token;
- otherwise one decode step serves the whole batch, one token per running request, in the profile's step
  time for that batch size and mean context. Steps with nothing changing in between are taken together (a
  leap ends at the next finish, the next KV overflow, or `until`);
- when the next step's tokens would not fit in the KV cache, the newest running request is preempted: its
  KV cache is dropped and it waits at the head of the queue, to be prefilled again (recomputed) with the
  tokens it had generated.
"""

from __future__ import annotations

import heapq
import math
from collections import deque
from collections.abc import Callable, Sequence

from demo.serving_profile import ServingProfile

MAX_PREFILL_TOKENS = 8_192
"""Prompt tokens one iteration prefills at most (vLLM's max_num_batched_tokens with chunked prefill)."""


class Request:
    """One request's lengths and, once served, its timings; mutable, as the server moves it along."""

    __slots__ = (
        "_sequence",
        "_start_step",
        "arrival",
        "finished",
        "first_token",
        "generated",
        "output_tokens",
        "preemptions",
        "prompt_tokens",
        "refused",
    )

    def __init__(self, arrival: float, prompt_tokens: int, output_tokens: int) -> None:
        if prompt_tokens < 1 or output_tokens < 1:
            raise ValueError(f"a request needs >= 1 prompt and output token (got {prompt_tokens}, "
                             f"{output_tokens})")
        self.arrival = arrival
        self.prompt_tokens = prompt_tokens
        self.output_tokens = output_tokens
        self.generated = 0
        """Tokens generated when it was last admitted (the decode steps since then add to it)."""
        self.first_token: float | None = None
        self.finished: float | None = None
        self.preemptions = 0
        self.refused = False
        """Never served: its prompt and output cannot fit the KV cache together (vLLM refuses it too)."""
        self._start_step = 0
        self._sequence = 0

    @property
    def ttft(self) -> float | None:
        """Time to first token in seconds (None until it has one)."""
        return None if self.first_token is None else self.first_token - self.arrival

    @property
    def mean_itl(self) -> float | None:
        """Mean inter-token latency in seconds over its output (0 for a one-token output; None unfinished)."""
        if self.finished is None or self.first_token is None:
            return None
        return (self.finished - self.first_token) / max(1, self.output_tokens - 1)


FinishHook = Callable[[Request], None]


class BatchingReplica:
    """One replica's queue, batch and KV cache; `advance(until)` serves up to simulated time `until`."""

    def __init__(self, profile: ServingProfile, now: float = 0.0, on_finish: FinishHook | None = None,
                 max_prefill_tokens: int = MAX_PREFILL_TOKENS) -> None:
        self.profile = profile
        self.now = now
        self.on_finish = on_finish
        self.max_prefill_tokens = max_prefill_tokens
        self.waiting: deque[Request] = deque()
        self.running: dict[int, Request] = {}
        """In admission order: the last is the newest (the one preempted first)."""
        self.kv_tokens = 0
        """KV-cache tokens held by the running requests."""
        self.busy_seconds = 0.0
        """Time spent in prefill or decode since creation (what NVML's utilization counts)."""
        self.preemptions = 0
        self._steps = 0
        self._sequence = 0
        self._finishes: list[tuple[int, int, Request]] = []
        """(decode step at which it finishes, admission sequence, request): a heap; stale entries skipped."""

    @property
    def in_flight(self) -> int:
        return len(self.running) + len(self.waiting)

    @property
    def kv_cache_usage(self) -> float:
        """Share of the KV cache in use, 0..1 (vllm:kv_cache_usage_perc)."""
        return min(1.0, self.kv_tokens / self.profile.kv_cache_tokens)

    def submit(self, request: Request) -> None:
        """A request arrives now: it waits for the next iteration (call `advance` to its arrival first). One
        whose prompt and output can never fit the KV cache together is refused at once (finished, `refused`,
        no first token: it meets no objective), as vLLM refuses a request longer than it can hold; waiting,
        it would hold the queue, or be preempted by itself without end."""
        if request.prompt_tokens + request.output_tokens > self.profile.kv_cache_tokens:
            request.refused = True
            request.finished = self.now
            if self.on_finish is not None:
                self.on_finish(request)
            return
        self.waiting.append(request)

    def take_all(self) -> list[Request]:
        """Remove every request in flight (the replica is deleted): what a scale-down cuts."""
        cut = [*self.running.values(), *self.waiting]
        self.running.clear()
        self.waiting.clear()
        self._finishes.clear()
        self.kv_tokens = 0
        return cut

    def advance(self, until: float) -> None:
        """Run iterations that start before `until` (the last may end after it: an iteration is atomic)."""
        profile = self.profile
        while self.now < until:
            if self.waiting and self._admit():
                continue
            running = len(self.running)
            if not running:
                self.now = until  # idle until then
                return
            room = (profile.kv_cache_tokens - self.kv_tokens) // running
            if room < 1:
                self._preempt_newest()
                continue
            step = profile.step_seconds(running, self.kv_tokens / running)
            leap = min(self._finishes[0][0] - self._steps, room, max(1, math.ceil((until - self.now) / step)))
            self.now += leap * step
            self.busy_seconds += leap * step
            self._steps += leap
            self.kv_tokens += leap * running
            self._finish_due()

    def _admit(self) -> bool:
        """Prefill the waiting requests that fit, in order; False when the first one does not."""
        profile = self.profile
        admitted: list[Request] = []
        tokens = 0
        kv = self.kv_tokens
        while self.waiting and len(self.running) + len(admitted) < profile.max_num_seqs:
            request = self.waiting[0]
            need = request.prompt_tokens + request.generated  # a preempted one recomputes what it generated
            if kv + need + 1 > profile.kv_cache_tokens:
                break
            if admitted and tokens + need > self.max_prefill_tokens:
                break
            self.waiting.popleft()
            admitted.append(request)
            tokens += need
            kv += need
        if not admitted:
            return False
        seconds = profile.prefill_seconds(tokens)
        self.now += seconds
        self.busy_seconds += seconds
        for request in admitted:
            self.kv_tokens += request.prompt_tokens + request.generated + 1
            request.generated += 1  # the prefill emits the next token
            if request.first_token is None:
                request.first_token = self.now
            if request.generated >= request.output_tokens:
                self.kv_tokens -= request.prompt_tokens + request.generated
                self._finish(request)
                continue
            self._sequence += 1
            request._sequence = self._sequence
            request._start_step = self._steps
            self.running[self._sequence] = request
            heapq.heappush(self._finishes, (self._steps + request.output_tokens - request.generated,
                                            self._sequence, request))
        return True

    def _finish_due(self) -> None:
        finishes = self.running
        while self._finishes and self._finishes[0][0] <= self._steps:
            _, sequence, request = heapq.heappop(self._finishes)
            if finishes.pop(sequence, None) is None:
                continue  # preempted since: a stale entry
            request.generated = request.output_tokens
            self.kv_tokens -= request.prompt_tokens + request.output_tokens
            self._finish(request)

    def _finish(self, request: Request) -> None:
        request.finished = self.now
        if self.on_finish is not None:
            self.on_finish(request)

    def _preempt_newest(self) -> None:
        sequence = next(reversed(self.running))
        request = self.running.pop(sequence)
        request.generated += self._steps - request._start_step
        self.kv_tokens -= request.prompt_tokens + request.generated
        request.preemptions += 1
        self.preemptions += 1
        self.waiting.appendleft(request)


def least_in_flight(replicas: Sequence[BatchingReplica], now: float) -> BatchingReplica:
    """The replica a least-request router sends a request arriving at `now` to: every replica is first run up
    to `now`, since a count left stale reads busier than it is and starves that replica; the first of equals.
    """
    for replica in replicas:
        replica.advance(now)
    return min(replicas, key=lambda r: r.in_flight)

