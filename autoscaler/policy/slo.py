"""The per-replica target learned from a latency objective (`slo` of a rule), as a pure function.

Given aligned samples of (per-replica value of the `learn` metric, latency) from the service's own history,
the learned target is the highest per-replica load at which the latency stayed within the objective:

1. the loads are cut into `BINS` bins of equal width between the lowest and the highest load seen;
2. in each bin holding at least `MIN_BIN_SAMPLES` samples, the `LATENCY_QUANTILE` quantile (nearest rank) of
   its latency samples is taken; a sparser bin is ignored (neither met nor missed);
3. the target is the upper edge of the highest bin, contiguous from the bottom, whose quantile is within the
   objective, clamped to the bounds.

The samples are taken only where the replica count had held for `SETTLE_SECONDS` (`settled_times`): while
replicas start and a burst's backlog drains, the latency is the transition's, not the load's.

Guards: fewer than `MIN_SAMPLES` aligned samples learn nothing (`TooFewSamples`); a history in which no bin's
quantile came within `NEAR_SHARE` of the objective learns nothing either (`NeverNearObjective`: the service
never got close, so its knee is beyond anything seen and the configured target stays); when even the lowest
bin misses the objective the target is the lower bound (`MissedAtLowestLoad`). No I/O, no clock.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum

from autoscaler.policy.spec import Rule, Slo

__all__ = [
    "BINS",
    "LATENCY_QUANTILE",
    "MIN_BIN_SAMPLES",
    "MIN_SAMPLES",
    "NEAR_SHARE",
    "SETTLE_SECONDS",
    "LearnReason",
    "Learned",
    "learn_target",
    "settled_times",
    "with_learned_target",
]

BINS = 20
"""Bins of per-replica load: a twentieth of the range seen is finer than a target is ever set by hand."""
MIN_SAMPLES = 120
"""Two hours of one-minute samples: fewer cannot fill several bins."""
MIN_BIN_SAMPLES = 10
"""A bin's quantile from fewer samples is one or two outliers; such a bin is ignored."""
LATENCY_QUANTILE = 0.9
"""The quantile of a bin's latency samples that must be within the objective: nine minutes in ten."""
NEAR_SHARE = 0.8
"""A history whose worst bin stayed below 80 % of the objective never got close to it."""
SETTLE_SECONDS = 600.0
"""A sample counts once the replicas have not changed for ten minutes: while a new replica loads (counted but
not serving) and while the backlog of the load that asked for it drains, the latency is the transition's,
not what that many replicas serve at that load (a burst's backlog read at 16 replicas would otherwise make the
lowest load look overloaded). Longer than most models' start-up plus a latency query's window."""


class LearnReason(StrEnum):
    """Why a learning ended as it did."""

    Learned = "Learned"
    TooFewSamples = "TooFewSamples"
    NeverNearObjective = "NeverNearObjective"
    MissedAtLowestLoad = "MissedAtLowestLoad"


@dataclass(frozen=True, slots=True)
class Learned:
    """The learned target (None: nothing learned, the configured target stays), why, and the numbers."""

    target: float | None
    reason: LearnReason
    message: str
    samples: int


def _quantile(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q * len(ordered)) - 1)]


def learn_target(samples: Sequence[tuple[float, float]], objective: float, bound_min: float,
                 bound_max: float) -> Learned:
    """The target learned from (per-replica load, latency seconds) `samples` against `objective` seconds;
    samples with a non-finite or negative member are left out."""
    usable = [(load, latency) for load, latency in samples
              if math.isfinite(load) and math.isfinite(latency) and load >= 0 and latency >= 0]
    count = len(usable)
    if count < MIN_SAMPLES:
        return Learned(None, LearnReason.TooFewSamples,
                       f"{count} samples of load and latency, fewer than {MIN_SAMPLES}", count)
    low = min(load for load, _ in usable)
    high = max(load for load, _ in usable)
    width = (high - low) / BINS
    bins: list[list[float]] = [[] for _ in range(BINS)]
    for load, latency in usable:
        index = BINS - 1 if width == 0 else min(BINS - 1, int((load - low) / width))
        bins[index].append(latency)
    quantiles = [(index, _quantile(b, LATENCY_QUANTILE)) for index, b in enumerate(bins)
                 if len(b) >= MIN_BIN_SAMPLES]
    if not quantiles:
        return Learned(None, LearnReason.TooFewSamples,
                       f"no load bin holds {MIN_BIN_SAMPLES} samples ({count} samples)", count)
    worst = max(q for _, q in quantiles)
    if worst < NEAR_SHARE * objective:
        return Learned(None, LearnReason.NeverNearObjective,
                       f"the latency never came near the objective (p{LATENCY_QUANTILE * 100:g} at most "
                       f"{worst:.4g}s, objective {objective:g}s, up to {high:.4g} per replica)", count)
    met = None
    for index, quantile in quantiles:
        if quantile > objective:
            break
        met = index
    if met is None:
        first, quantile = quantiles[0]
        return Learned(bound_min, LearnReason.MissedAtLowestLoad,
                       f"the objective {objective:g}s was missed even at the lowest load (p"
                       f"{LATENCY_QUANTILE * 100:g} {quantile:.4g}s up to {low + (first + 1) * width:.4g} "
                       f"per replica); the lower bound {bound_min:g}", count)
    edge = high if width == 0 else low + (met + 1) * width
    target = min(max(edge, bound_min), bound_max)
    clamped = "" if target == edge else f", clamped to {target:g}"
    return Learned(target, LearnReason.Learned,
                   f"within {objective:g}s up to {edge:.4g} per replica{clamped} ({count} samples)", count)


def settled_times(replicas: Mapping[float, float | None], step: float,
                  settle_seconds: float = SETTLE_SECONDS) -> frozenset[float]:
    """The times of `replicas` (the replica count at each `step`) at which the count was known and the same,
    rounded, at every step of the `settle_seconds` before: the samples a learning may use."""
    times = sorted(replicas)
    settled = set()
    since: float | None = None
    """Since when the current run of one known count lasts."""
    previous: tuple[float, int] | None = None
    for t in times:
        value = replicas[t]
        count = None if value is None or not math.isfinite(value) else round(value)
        if count is None:
            since, previous = None, None
            continue
        if previous is None or previous[1] != count or t - previous[0] > step * 1.5:
            since = t
        previous = (t, count)
        if since is not None and t - since >= settle_seconds:
            settled.add(t)
    return frozenset(settled)


def with_learned_target(rule: Rule, slo: Slo, target: float | None) -> Rule:
    """`rule` with metric `slo.learn`'s target replaced by `target` in scale mode (unchanged otherwise)."""
    if target is None or slo.mode != "scale":
        return rule
    metrics = tuple(dataclasses.replace(m, target=target) if m.name == slo.learn else m for m in rule.metrics)
    return dataclasses.replace(rule, metrics=metrics)
