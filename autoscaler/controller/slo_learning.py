"""A rule's latency objective (`slo`): its target learned from the service's own history in Prometheus.

Once a rule is loaded, then at most once every `REFRESH_SECONDS`, the controller reads `slo.lookback` of the
latency query and of the `learn` metric's query (range queries, one point a minute, a coarser step past
`MAX_POINTS`, through the bounded range reader), makes the metric per replica (a `Total` divided by the
replicas the controller recorded, as `controller.past` reads them), keeps the steps at which those replicas
had held for ten minutes (`autoscaler.policy.slo.settled_times`) and hands the aligned samples to
`autoscaler.policy.slo.learn_target`. The result is kept in the rule's state: in `mode: scale` the learned
target replaces the metric's in every decision. A failed read is logged, tried again after `RETRY_SECONDS`,
and the last learned target (or the configured one) stays meanwhile.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass

from autoscaler.controller.past import recorded_query
from autoscaler.policy import Rule
from autoscaler.policy.slo import Learned, learn_target, settled_times, with_learned_target
from autoscaler.policy.spec import Slo
from plumbing.prometheus.runner import HistorySource

__all__ = ["MAX_POINTS", "MOVE_SHARE", "REFRESH_SECONDS", "RETRY_SECONDS", "SloLearning", "learn",
           "learning_step", "moved", "read_samples", "say_none"]

log = logging.getLogger(__name__)

REFRESH_SECONDS = 3600.0
"""A week of history changes little in an hour; learning more often only loads Prometheus."""
RETRY_SECONDS = 300.0
MAX_POINTS = 10_080
"""Points per query: a week of minutes (about 3 MB of JSON at most, one request of the range reader)."""
MOVE_SHARE = 0.10
"""A learned target that moved by more than this share since the last Event is told again."""


@dataclass
class SloLearning:
    """What the controller keeps of a rule's learning between syncs."""

    learned: Learned | None = None
    """The last learning that read its history (None: none yet)."""
    read_at: float | None = None
    tried: float | None = None
    error: str | None = None
    """Why the last read failed (None: it did not)."""
    told: float | None = None
    """The learned target the last LearnedTargetChanged Event gave."""
    said: str | None = None
    """The last 'no learned target' line logged: said once, not every hour."""

    def due(self, now: float) -> bool:
        fresh = self.read_at is not None and now - self.read_at < REFRESH_SECONDS
        return not fresh and (self.tried is None or now - self.tried >= RETRY_SECONDS)

    @property
    def target(self) -> float | None:
        return None if self.learned is None else self.learned.target

    def rule(self, rule: Rule) -> Rule:
        """`rule` with its learned target in scale mode."""
        return rule if rule.slo is None else with_learned_target(rule, rule.slo, self.target)

    def note(self, rule: Rule) -> str:
        """What a decision's message says of the objective ('' without one)."""
        slo = rule.slo
        if slo is None:
            return ""
        configured = next((m.target for m in rule.metrics if m.name == slo.learn), None)
        if self.learned is not None and self.learned.target is not None:
            using = "used" if slo.mode == "scale" else "observed only"
            return (f"slo: {slo.learn} target {self.learned.target:.4g} learned ({using}; "
                    f"{self.learned.message})")
        return f"slo: no learned target ({self.why_none()}); {slo.learn} keeps its target {configured:g}"

    def why_none(self) -> str | None:
        """Why no target is learned (None: one is)."""
        if self.learned is not None and self.learned.target is not None:
            return None
        if self.learned is not None:
            return f"{self.learned.reason}: {self.learned.message}"
        if self.error is not None:
            return f"history not read: {self.error}"
        return "history not read yet"


def learning_step(slo: Slo) -> float:
    """A minute, or the coarser whole minutes that keep `lookback` within MAX_POINTS points."""
    return 60.0 * max(1, math.ceil(slo.lookback_seconds / 60 / MAX_POINTS))


def read_samples(rule: Rule, slo: Slo, source: HistorySource, now: float) -> list[tuple[float, float]]:
    """Aligned (per-replica value of `slo.learn`, latency) samples of the last `lookback`, at the steps where
    the replicas the controller recorded had held for `SETTLE_SECONDS` (every step when an `Average` metric's
    history has no recorded replicas at all); a PrometheusClientError when a range query fails."""
    step = learning_step(slo)
    end = math.floor(now / step) * step - step  # the last whole step: the current one is still filling
    start = end - slo.lookback_seconds + step
    metric = next(m for m in rule.metrics if m.name == slo.learn)
    latency = source.run_range(slo.latency, start, end, step).values
    values = source.run_range(metric.query, start, end, step).values
    replicas = source.run_range(recorded_query(rule), start, end, step).values
    settled = settled_times(replicas, step)
    judged = metric.type == "Total" or any(v is not None for v in replicas.values())
    samples = []
    for t, value in values.items():
        seconds = latency.get(t)
        if value is None or seconds is None or (judged and t not in settled):
            continue
        if metric.type == "Total":
            count = replicas.get(t)
            if count is None or count < 1:
                continue
            value = value / round(count)
        samples.append((value, seconds))
    return samples


def learn(rule: Rule, slo: Slo, source: HistorySource, now: float) -> Learned:
    return learn_target(read_samples(rule, slo, source, now), slo.objective_seconds, slo.bound_min,
                        slo.bound_max)


def moved(learning: SloLearning) -> bool:
    """Whether the learned target is new or moved by more than MOVE_SHARE since it was last told."""
    target = learning.target
    if target is None:
        return False
    told = learning.told
    return told is None or abs(target - told) > MOVE_SHARE * abs(told)


def say_none(rule: Rule, learning: SloLearning) -> None:
    """The 'keeps its configured target' line, once per distinct reason."""
    if learning.target is not None or learning.learned is None:
        return
    reason = learning.learned.reason
    if learning.said == reason:
        return
    learning.said = reason
    log.info("rule %s: %s", rule.name, learning.note(rule))

