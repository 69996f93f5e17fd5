"""A literal port of the Kubernetes HPA controller's behavior path (horizontal.go in
pkg/controller/podautoscaler), kept as a test oracle: the engine must give the same count at every sync.

Deliberately written as upstream is, not as the engine is: mutable lists, recommendations and scale events
never pruned but overwritten in place (stabilizeRecommendationWithBehaviors, storeScaleEvent with
markScaleEventsOutdated), cutoffs as `timestamp After/Before now - period`. Timestamps are integers here, so
the comparisons are exact, as Go's time.Time. Upstream reads time.Now() several times per sync; one `now`
per sync stands for all of them.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

from autoscaler.policy import Rule, ScalingRules


@dataclass
class TimestampedScaleEvent:
    replica_change: int  # positive both ways, as upstream's replicaChange
    timestamp: int
    outdated: bool = False


@dataclass
class ReferenceHpa:
    """One HPA object's controller state: upstream's three per-key maps."""

    recommendations: list[tuple[int, int]] | None = None  # (recommendation, timestamp); None: key absent
    scale_up_events: list[TimestampedScaleEvent] = field(default_factory=list)
    scale_down_events: list[TimestampedScaleEvent] = field(default_factory=list)

    def sync(self, rule: Rule, current: int, values: Sequence[float | None], now: int) -> int:
        """reconcileAutoscaler: the count the HPA sets (and stores a scale event for) at `now`."""
        if self.recommendations is None:  # recordInitialRecommendation
            self.recommendations = [(current, now)]
        if current == 0 and rule.min_replicas != 0:
            return current  # "scaling is disabled since the replica count of the target is zero"
        if current > rule.max_replicas:
            desired = rule.max_replicas
        elif current < rule.min_replicas:
            desired = rule.min_replicas
        else:
            proposal = self._compute_replicas_for_metrics(rule, current, values)
            if proposal is None:
                return current
            desired = self._normalize_with_behaviors(rule, current, max(proposal, 0), now)
        if desired != current:
            self._store_scale_event(rule, current, desired, now)
        return desired

    @staticmethod
    def _compute_replicas_for_metrics(rule: Rule, current: int, values: Sequence[float | None]) -> int | None:
        up_tol, down_tol = rule.behavior.scale_up.tolerance, rule.behavior.scale_down.tolerance
        replicas, invalid = 0, 0
        for metric, value in zip(rule.metrics, values, strict=True):
            if value is None:
                invalid += 1
                continue
            if metric.type == "Average":  # GetMetricReplicas / getUsageRatioReplicaCount
                ratio = value / metric.target
                if current == 0:
                    proposal = math.ceil(ratio)
                elif 1 - down_tol <= ratio <= 1 + up_tol:
                    proposal = current
                else:
                    proposal = math.ceil(ratio * current)
            else:  # GetExternalPerPodMetricReplicas
                at_zero = math.inf if value > 0 else math.nan
                ratio = value / (metric.target * current) if current else at_zero
                inside = 1 - down_tol <= ratio <= 1 + up_tol
                proposal = current if inside else math.ceil(value / metric.target)
            proposal = max(proposal, 0)
            if replicas == 0 or proposal > replicas:
                replicas = proposal
        if invalid >= len(rule.metrics) or (invalid > 0 and replicas < current):
            return None
        return replicas

    def _normalize_with_behaviors(self, rule: Rule, current: int, desired: int, now: int) -> int:
        stabilized = self._stabilize(rule, current, desired, now)
        return self._convert_with_behavior_rate(rule, current, stabilized, now)

    def _stabilize(self, rule: Rule, current: int, desired: int, now: int) -> int:
        assert self.recommendations is not None
        up_cutoff = now - rule.behavior.scale_up.stabilization_window_seconds
        down_cutoff = now - rule.behavior.scale_down.stabilization_window_seconds
        up_rec = down_rec = desired
        old_index: int | None = None
        for i, (rec, timestamp) in enumerate(self.recommendations):
            if timestamp > up_cutoff:
                up_rec = min(rec, up_rec)
            if timestamp > down_cutoff:
                down_rec = max(rec, down_rec)
            if timestamp < up_cutoff and timestamp < down_cutoff:
                old_index = i
        recommendation = min(max(current, up_rec), down_rec)
        if old_index is not None:
            self.recommendations[old_index] = (desired, now)
        else:
            self.recommendations.append((desired, now))
        return recommendation

    def _convert_with_behavior_rate(self, rule: Rule, current: int, desired: int, now: int) -> int:
        if desired > current:
            limit = max(self._scale_up_limit(current, rule.behavior.scale_up, now), current)
            return min(desired, min(rule.max_replicas, limit))
        if desired < current:
            limit = min(self._scale_down_limit(current, rule.behavior.scale_down, now), current)
            return max(desired, max(rule.min_replicas, limit))
        return desired

    def _period_start(self, current: int, period: int, now: int) -> int:
        added = _change_per_period(period, self.scale_up_events, now)
        deleted = _change_per_period(period, self.scale_down_events, now)
        return current - added + deleted

    def _scale_up_limit(self, current: int, rules: ScalingRules, now: int) -> int:
        if rules.select_policy == "Disabled":
            return current
        pick, result = (min, 2**31 - 1) if rules.select_policy == "Min" else (max, -(2**31))
        for policy in rules.policies:
            start = self._period_start(current, policy.period_seconds, now)
            if policy.type == "Pods":
                proposed = start + policy.value
            else:
                proposed = math.ceil(start * (1 + policy.value / 100))
            result = pick(result, proposed)
        return result

    def _scale_down_limit(self, current: int, rules: ScalingRules, now: int) -> int:
        if rules.select_policy == "Disabled":
            return current
        pick, result = (max, -(2**31)) if rules.select_policy == "Min" else (min, 2**31 - 1)
        for policy in rules.policies:
            start = self._period_start(current, policy.period_seconds, now)
            if policy.type == "Pods":
                proposed = start - policy.value
            else:
                proposed = int(start * (1 - policy.value / 100))
            result = pick(result, proposed)
        return result

    def _store_scale_event(self, rule: Rule, previous: int, new: int, now: int) -> None:
        if new > previous:
            events, rules, change = self.scale_up_events, rule.behavior.scale_up, new - previous
        else:
            events, rules, change = self.scale_down_events, rule.behavior.scale_down, previous - new
        longest = max((p.period_seconds for p in rules.policies), default=0)  # getLongestPolicyPeriod
        for event in events:  # markScaleEventsOutdated
            if event.timestamp < now - longest:
                event.outdated = True
        old_index: int | None = None
        for i, event in enumerate(events):
            if event.outdated:
                old_index = i  # the LAST outdated one, as upstream's loop
        new_event = TimestampedScaleEvent(change, now)
        if old_index is not None:
            events[old_index] = new_event
        else:
            events.append(new_event)


def _change_per_period(period: int, events: Sequence[TimestampedScaleEvent], now: int) -> int:
    """getReplicasChangePerPeriod: outdated events still count while inside the period."""
    cutoff = now - period
    return sum(e.replica_change for e in events if e.timestamp > cutoff)
