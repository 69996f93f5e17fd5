"""Panic mode, Knative's KPA semantics over the HPA's stages: react to a burst in one step.

Each sync the metrics are also read over a short window (`MetricObservation.panic_value`). When some metric
there is at `thresholdPercent` of its target or more (the KPA's desiredPanicPodCount / readyPods >=
panic-threshold), the rule panics: it goes to the largest of the short window's proposal, the HPA's own raw
desired count and the most replicas decided since the panic began, past the scale-up stabilization window
(the bounds and the policies still cap it), and it never scales down. The panic ends once the threshold has
not been crossed for a scale-down stabilization window (at least the panic window): the KPA's stable window.

The HPA's own history is untouched: each panicking sync still records the HPA's raw desired count as its
recommendation, so when the panic ends the HPA decides exactly as it would have, and with `panic` off the
engine is the HPA.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from autoscaler.policy.decision import MetricObservation, MetricProposal, PanicState
from autoscaler.policy.proposal import propose

if TYPE_CHECKING:
    from autoscaler.policy.spec import MetricSpec, Panic


@dataclass(frozen=True, slots=True)
class PanicStep:
    """One sync of panic mode: the state to keep (None: not panicking), the short window's largest proposal
    (None: none valid) and the metric that crossed the threshold this sync (None: none did)."""

    state: PanicState | None
    proposed: int | None
    cause: MetricProposal | None


def panic_proposals(metrics: Sequence[MetricSpec], observations: Sequence[MetricObservation], current: int,
                    up_tolerance: float, down_tolerance: float) -> tuple[MetricProposal, ...]:
    """Each metric's proposal over the panic window: its `panic_value`, else its value (no shorter one)."""
    by_name = {o.name: o for o in observations}
    proposals = []
    for metric in metrics:
        seen = by_name.get(metric.name)
        if seen is not None and seen.panic_value is not None:
            seen = MetricObservation(seen.name, seen.panic_value)
        proposals.append(propose(metric, seen, current, up_tolerance, down_tolerance))
    return tuple(proposals)


def panic_step(panic: Panic, scale_down_window_seconds: int, proposals: Sequence[MetricProposal],
               current: int, state: PanicState | None, now: float) -> PanicStep:
    """Whether the rule panics after this sync, from the short window's `proposals` and the last state.

    From 0 replicas nothing panics (activation wakes the rule, the KPA's activator does that job).
    """
    threshold = panic.threshold_percent / 100.0
    cause: MetricProposal | None = None
    proposed: int | None = None
    for p in proposals:
        if p.replicas is None or p.ratio is None:
            continue
        proposed = p.replicas if proposed is None else max(proposed, p.replicas)
        if current > 0 and p.ratio >= threshold and (cause is None or p.ratio > (cause.ratio or 0.0)):
            cause = p
    if cause is not None:
        if state is None:
            return PanicStep(PanicState(since=now, last_cause=now, peak=current), proposed, cause)
        return PanicStep(PanicState(state.since, now, max(state.peak, current)), proposed, cause)
    if state is None or now - state.last_cause >= panic.leave_after(scale_down_window_seconds):
        return PanicStep(None, proposed, None)
    return PanicStep(state, proposed, None)


def with_peak(state: PanicState, replicas: int) -> PanicState:
    """The state once `replicas` is decided: the count a panic never goes below."""
    if replicas <= state.peak:
        return state
    return PanicState(state.since, state.last_cause, replicas)
