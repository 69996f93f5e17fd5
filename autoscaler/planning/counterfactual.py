"""A candidate rule replayed on a recorded history as if it had run instead: what `tune` scores.

The history holds what each metric's query returned and the replicas the real controller ran. A replay that
fed the candidate those values unchanged would pretend the load did not depend on the replica count. Here:

- a **Total** metric (a demand: requests, a queue) is fed as recorded: it does not depend on the replicas;
- an **Average** metric is turned into load (value x the recorded *ready* replicas) and divided by the
  candidate's own ready replicas, so a candidate that runs fewer replicas sees them busier;
- a new replica counts as ready only after `startup_seconds` (a count serves once it has held for a whole
  start-up), for the real controller's replicas and the candidate's alike;
- **overloaded** are the steps counted as the benchmarks count them (`overload`, docs/rules.md#overloaded-
  minutes): the work the metrics say the service receives, with what one replica serves read from the
  *current* rule's targets (a candidate cannot hide overload behind a higher target), above 95 % of what the
  candidate's ready replicas serve.

Each step's plan is the controller's own (`plan_replicas`), applied at once. Where nothing depends on the
candidate's count (no Average metric rescaled) and `trace_replay` covers the rule, the whole history is
replayed at once instead, with the same counts.
"""

from __future__ import annotations

import itertools
import math
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, replace

from autoscaler.planning.overload import (
    BUSY_AT_TARGET,
    OVERLOAD_LINE,
    metric_work,
    overloaded_minutes,
    work_per_ready,
)
from autoscaler.planning.plan import count_all_failed, plan_replicas
from autoscaler.planning.trace_replay import covers, replay_columns
from autoscaler.policy import MetricObservation, Rule, RuleHistory

__all__ = ["HistoryStep", "ReplaySetup", "Scored", "overloaded", "ready_counts", "replay", "score",
           "score_ranges", "step_work", "trace_overloaded_minutes"]


@dataclass(frozen=True, slots=True)
class HistoryStep:
    """One step of the history: the time, what each metric's query returned, and the recorded replicas."""

    t: float
    observations: tuple[MetricObservation, ...]
    recorded_replicas: int | None = None
    sampled: bool = True
    """Some metric had a sample at this step (a `whenEmpty: zero` metric without one reads 0, which is no
    sample: `tuning.coverage` counts these)."""


@dataclass(frozen=True, slots=True)
class ReplaySetup:
    step_seconds: float
    start_replicas: int
    startup_seconds: float = 0.0

    @property
    def startup_steps(self) -> int:
        return math.ceil(self.startup_seconds / self.step_seconds - 1e-9) if self.startup_seconds > 0 else 0


@dataclass(frozen=True, slots=True)
class Scored:
    """A replay's figures over a range of steps."""

    gpu_hours: float
    overloaded_minutes: float
    scale_changes: int


class ReadyCounter:
    """Ready replicas, step by step: the least count over the last start-up (and this step)."""

    def __init__(self, start: int, startup_steps: int) -> None:
        self._window: deque[tuple[int, int]] = deque([(-1, start)])
        self._steps = startup_steps
        self._index = -1

    def push(self, count: int) -> int:
        self._index += 1
        while self._window and self._window[-1][1] >= count:
            self._window.pop()
        self._window.append((self._index, count))
        while self._window[0][0] < self._index - self._steps:
            self._window.popleft()
        return self._window[0][1]


def ready_counts(counts: Sequence[int], start: int, startup_steps: int) -> list[int]:
    ready = ReadyCounter(start, startup_steps)
    return [ready.push(count) for count in counts]


def replay(rule: Rule, history: Sequence[HistoryStep], setup: ReplaySetup) -> list[int]:
    """The candidate's replica count after each step's plan (see the module docstring)."""
    rescaled = any(m.type == "Average" for m in rule.metrics) and any(
        s.recorded_replicas is not None for s in history)
    if covers(rule) and not rescaled:
        values = [{o.name: o.value for o in step.observations} for step in history]
        columns = [[step.get(m.name) for step in values] for m in rule.metrics]
        return replay_columns(rule, [step.t for step in history], columns, setup.start_replicas).replicas
    averages = {m.name for m in rule.metrics if m.type == "Average"}
    recorded = _recorded_ready(history, setup)
    ready = ReadyCounter(setup.start_replicas, setup.startup_steps)
    candidate_ready = setup.start_replicas
    state = RuleHistory()
    current = setup.start_replicas
    all_failed = 0
    counts = []
    for step, seen_ready in zip(history, recorded, strict=True):
        observations = step.observations
        if averages and seen_ready is not None:
            observations = tuple(_rescaled(o, seen_ready, candidate_ready) if o.name in averages else o
                                 for o in observations)
        all_failed = count_all_failed(all_failed, observations)
        plan = plan_replicas(rule=rule, current=current, observations=observations, history=state,
                             all_failed_syncs=all_failed, now=step.t)
        state = plan.history.with_scale(step.t, current, plan.replicas)
        current = plan.replicas
        candidate_ready = ready.push(current)
        counts.append(current)
    return counts


def _recorded_ready(history: Sequence[HistoryStep], setup: ReplaySetup) -> list[int | None]:
    """The real controller's ready replicas at each step (None where it recorded nothing)."""
    ready = ReadyCounter(next((s.recorded_replicas for s in history if s.recorded_replicas is not None),
                              setup.start_replicas), setup.startup_steps)
    out: list[int | None] = []
    for step in history:
        out.append(None if step.recorded_replicas is None else ready.push(step.recorded_replicas))
    return out


def _rescaled(seen: MetricObservation, recorded_ready: int, candidate_ready: int) -> MetricObservation:
    if seen.value is None:
        return seen
    factor = max(recorded_ready, 1) / max(candidate_ready, 1)
    short = None if seen.panic_value is None else seen.panic_value * factor
    return replace(seen, value=seen.value * factor, panic_value=short)


def overloaded(current_rule: Rule, step: HistoryStep, replicas: int, ready: int | None = None,
               recorded_ready: int | None = None, busy_at_target: float = BUSY_AT_TARGET) -> bool:
    """Whether the step is overloaded with `ready` replicas serving (`overload.is_overloaded`: see the module
    docstring). `ready` defaults to `replicas`, `recorded_ready` (the replicas an Average metric's value is
    the mean over) to the step's recorded replicas."""
    serving = replicas if ready is None else ready
    recorded = step.recorded_replicas if recorded_ready is None else recorded_ready
    work = step_work(current_rule, step, serving if recorded is None else recorded, busy_at_target)
    return work_per_ready(work, serving) > OVERLOAD_LINE


def step_work(current_rule: Rule, step: HistoryStep, reporting: int,
              busy_at_target: float = BUSY_AT_TARGET) -> float:
    """The work the step's metrics say the service received, in replicas' worth (`overload.metric_work`):
    an Average metric is the mean over `reporting` replicas (the recorded ready ones; without a recorded
    count the value was fed to the candidate unchanged, so over the candidate's own)."""
    return metric_work(current_rule.metrics, step.observations, reporting, busy_at_target)


def score(current_rule: Rule, rule: Rule, history: Sequence[HistoryStep], setup: ReplaySetup,
          scored: range | None = None) -> Scored:
    """GPU-hours, overloaded minutes and changes of `rule` replayed on `history`, counted over the steps in
    `scored` (default all: the replay always starts at the first step)."""
    return score_ranges(current_rule, rule, history, setup, [scored or range(len(history))])[0]


def score_ranges(current_rule: Rule, rule: Rule, history: Sequence[HistoryStep], setup: ReplaySetup,
                 ranges: Sequence[range]) -> list[Scored]:
    """`score` over each of `ranges`, from one replay."""
    counts = replay(rule, history, setup)
    ready = ready_counts(counts, setup.start_replicas, setup.startup_steps)
    recorded = _recorded_ready(history, setup)
    gpus = current_rule.capacity.gpus_per_replica if current_rule.capacity else 1
    before = [setup.start_replicas, *counts]
    work = [step_work(current_rule, step, own if seen is None else seen)
            for step, seen, own in zip(history, recorded, ready, strict=True)]
    out = []
    for steps in ranges:
        gpu_hours = sum(counts[i] for i in steps) * setup.step_seconds * gpus / 3600
        over = overloaded_minutes((work_per_ready(work[i], ready[i]) for i in steps), setup.step_seconds)
        changes = sum(1 for i in steps if before[i] != counts[i])
        out.append(Scored(round(gpu_hours, 3), over, changes))
    return out


def trace_overloaded_minutes(rule: Rule, times: Sequence[float], values: Sequence[Sequence[float | None]],
                             replicas: Sequence[int], start_replicas: int, startup_seconds: float) -> float:
    """`simulate`'s overloaded minutes: row i's metrics (`values[k][i]`) served by the replicas that have held
    for `startup_seconds` (row i's count applied at once, as `tune` replays), counted as `tune` and the
    benchmarks count them. Row i lasts until row i + 1 (the last row as long as the one before it)."""
    if not times:
        return 0.0
    step = (times[-1] - times[0]) / (len(times) - 1) if len(times) > 1 else 0.0
    steps = math.ceil(startup_seconds / step - 1e-9) if startup_seconds > 0 and step > 0 else 0
    ready = ready_counts(replicas, start_replicas, steps)
    lengths = [b - a for a, b in itertools.pairwise(times)] + [step]
    minutes = 0.0
    for i, t in enumerate(times):
        seen = tuple(MetricObservation(m.name, column[i])
                     for m, column in zip(rule.metrics, values, strict=True))
        work = step_work(rule, HistoryStep(t, seen), ready[i])
        minutes += overloaded_minutes([work_per_ready(work, ready[i])], lengths[i])
    return minutes
