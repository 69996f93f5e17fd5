"""One rule's sync: decided on the controller's own thread, acted on by its pool, and told however it ends.

`decide` observes the metrics, plans (the engine, pause annotations, schedules, capacity) and reports the
decision; it touches no API: the scale and the Pending pods were read by the pool (`api_workers.gather`), and
the rule's Events are held. `act`, on the pool, posts the held Events and patches, re-reading and re-planning
after a 409 Conflict; before a scale-down of a rule with `podDeletionCost` it sets the pods' deletion costs
first (`deletion_costs`). Every ending (decided, abandoned, a failed read or patch, an unknown endpoint, a
sync that raised) is told alike: a metric, an Event where this replica may still write, a log line
(`decision_log`). A broad `except` sits around each half, so one bad rule never stops the others.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from autoscaler.controller.api_workers import Gathered
from autoscaler.controller.capacity_ledger import PoolLedger
from autoscaler.controller.capacity_sync import GatheredCapacity, gather_capacity, shared
from autoscaler.controller.decision_log import (
    log_abandoned,
    log_decision,
    log_patch_failed,
    log_read_failed,
    log_sync_error,
    ref_text,
    scale_message,
)
from autoscaler.controller.deletion_costs import set_deletion_costs
from autoscaler.controller.events import EventPoster, HeldEvents, WarningMemory
from autoscaler.controller.observe import observe
from autoscaler.controller.outcome import RuleOutcome, ShuttingDown
from autoscaler.controller.past import PastRead
from autoscaler.controller.self_metrics import ControllerMetrics, Guards
from autoscaler.controller.slo_learning import SloLearning, moved, say_none
from autoscaler.controller.sources import EndpointSources, QueryKey
from autoscaler.errors import ConflictError, KubeError
from autoscaler.kube.backend import ScaleBackend, ScaleState
from autoscaler.planning.plan import Plan, count_all_failed, plan_rule
from autoscaler.policy import MetricObservation, MetricSpec, Reason, Rule, RuleHistory
from autoscaler.reasons import EventReason, ScaleErrorReason, SyncReason
from plumbing.prometheus.runner import QueryErrorReason, QueryResult

__all__ = ["Patch", "RuleState", "RuleSync"]

log = logging.getLogger("autoscaler.controller.loop")  # the controller's lines keep its logger name


@dataclass
class RuleState:
    """What the controller keeps of a rule between syncs: the engine's history, the count of consecutive
    syncs in which every metric failed (for the fallback), the last Warnings (not to repeat them)."""

    rule: Rule
    history: RuleHistory = dataclasses.field(default_factory=RuleHistory)
    all_failed_syncs: int = 0
    last_warning: WarningMemory = dataclasses.field(default_factory=dict)
    held: HeldEvents = dataclasses.field(default_factory=HeldEvents)
    """The rule's Events from `decide` until `act` (or `settled`) lets them go."""
    told_targets: dict[str, float] = dataclasses.field(default_factory=dict)
    """overloadBudget: the effective targets the last EffectiveTargetChanged Event gave."""
    past: PastRead = dataclasses.field(default_factory=PastRead)
    """overloadBudget and forecast: whether the rule's past was read back from Prometheus."""
    slo: SloLearning = dataclasses.field(default_factory=SloLearning)
    """slo: the target learned from the rule's history, and what was told of it."""


@dataclass(frozen=True, slots=True)
class Patch:
    """A rule decided to a new count: `act` patches it (and re-plans after a Conflict)."""

    plan: Plan
    observations: tuple[MetricObservation, ...]
    capacity: GatheredCapacity | None
    selector: str | None = None
    """The scale's status.selector: the target's pods, whose deletion costs a scale-down sets first."""


TARGET_MOVE = 0.05
"""An effective target that moved by this share or more since the last Event is told again."""


def moved_targets(rule: Rule, told: Mapping[str, float], targets: Sequence[tuple[str, float]]) -> str:
    """The EffectiveTargetChanged message when some target moved by TARGET_MOVE or more since `told`
    ("" when none did)."""
    given = {m.name: m.target for m in rule.metrics}
    moved = [(name, target) for name, target in targets
             if name not in told or abs(target - told[name]) >= TARGET_MOVE * abs(told[name])]
    if not moved:
        return ""
    return "overloadBudget: " + ", ".join(
        f"{name} target {target:.4g} (given {given.get(name, target):g}, headroom "
        f"{given.get(name, target) / target:.2f}x)" for name, target in moved)


class RuleSync:
    """The per-rule half of the controller: it owns no rule state, and each rule's state is touched by one
    thread at a time (the controller's while deciding, then one pool worker)."""

    def __init__(self, backend: ScaleBackend, sources: EndpointSources, metrics: ControllerMetrics,
                 events: EventPoster, *, dry_run: bool, conflict_retries: int, stopping: threading.Event,
                 is_leader: Callable[[], bool], tick: Callable[[], None]) -> None:
        self.backend = backend
        self.sources = sources
        self.metrics = metrics
        self.events = events
        self.dry_run = dry_run
        self.conflict_retries = conflict_retries
        self.stopping = stopping
        self.is_leader = is_leader
        self.tick = tick
        """Tells the loop's liveness that a rule's half finished."""

    def decide(self, state: RuleState, gathered: Gathered, results: Mapping[QueryKey, QueryResult],
               now: float, pool: PoolLedger | None = None) -> RuleOutcome | Patch:
        """On the controller's thread: the rule's outcome, or the patch it needs; its Events are held until
        `act` or `settled`. `pool`: this sync's ledger of the pools several rules read."""
        state.held.hold()
        if self.stopping.is_set() or isinstance(gathered.scale, ShuttingDown):
            return RuleOutcome(
                rule=state.rule,
                current=None,
                desired=None,
                reason=SyncReason.Abandoned,
                message="shutting down: rule not synced",
            )
        if state.rule.prometheus not in self.sources:
            return self._unknown_endpoint(state, now)
        try:
            return self._decide(state, gathered, results, now, pool)
        except Exception as e:  # a broad except: a bug or surprise in one rule never stops the others
            return self._sync_error(state, e, now)
        finally:
            if pool is not None:
                pool.promise(state.rule, 0)  # a rule that ended without a plan takes nothing
            self.tick()

    def settled(self, state: RuleState, decided: RuleOutcome | Patch) -> RuleOutcome:
        """A rule decided with nothing left for the pool: no Event held, no patch."""
        state.held.release()
        assert isinstance(decided, RuleOutcome)
        return decided

    def act(self, state: RuleState, decided: RuleOutcome | Patch, now: float) -> RuleOutcome:
        """On the pool: the held Events, then the patch. Once stopping, neither starts."""
        if self.stopping.is_set():
            state.held.release()  # this replica writes nothing more to the cluster
        else:
            self.events.post_held(state.held)
        if isinstance(decided, RuleOutcome):
            return decided
        try:
            return self._patch(state, decided, now)
        except Exception as e:  # as in decide: one rule's surprise never stops the others
            return self._sync_error(state, e, now)
        finally:
            self.tick()

    def _sync_error(self, state: RuleState, error: Exception, now: float) -> RuleOutcome:
        """A rule whose sync raised: told like any failed decision (metric, Event, structured log line)."""
        rule = state.rule
        message = f"sync failed: {type(error).__name__}: {error}"
        log_sync_error(rule, message, error, self.dry_run)
        try:
            self.metrics.record_decision(
                rule=rule, current=None, desired=None, reason=SyncReason.Error, values={}
            )
            self._warn(state=state, reason=EventReason.FailedSync, message=message, now=now)
        except Exception:  # reporting must not take the other rules down either
            log.exception("rule %s: cannot report the failed sync", rule.name)
        return RuleOutcome(
            rule=rule, current=None, desired=None, reason=SyncReason.Error, message=message, error=str(error)
        )

    def _unknown_endpoint(self, state: RuleState, now: float) -> RuleOutcome:
        """A rule whose endpoint is not configured is refused alone: no query, no decision, no patch."""
        rule = state.rule
        message = (
            f"the rule names Prometheus endpoint {rule.prometheus!r}, which is not configured "
            f"(endpoints: {self.sources.names}); the rule is not synced"
        )
        self.metrics.record_decision(
            rule=rule, current=None, desired=None, reason=SyncReason.UnknownEndpoint, values={}
        )
        last = state.last_warning.get(EventReason.InvalidRule)
        if last is None or last[0] != message:
            log.warning("rule %s: %s", rule.name, message)
        self._warn(state=state, reason=EventReason.InvalidRule, message=message, now=now)
        return RuleOutcome(
            rule=rule,
            current=None,
            desired=None,
            reason=SyncReason.UnknownEndpoint,
            message=message,
            error=message,
        )

    def _decide(self, state: RuleState, gathered: Gathered, results: Mapping[QueryKey, QueryResult],
                now: float, pool: PoolLedger | None) -> RuleOutcome | Patch:
        rule, scale = state.rule, gathered.scale
        observations = tuple(self._observe(rule, m, results) for m in rule.metrics)
        state.all_failed_syncs = count_all_failed(state.all_failed_syncs, observations)
        if isinstance(scale, Exception):
            if not isinstance(scale, KubeError):
                raise scale  # a bug in a backend, not an API answer: reported as a failed sync
            return self._scale_read_failed(state, scale, observations, now)
        failures = [o for o in observations if o.value is None]
        if failures:
            failed = "; ".join(f"{o.name}: {o.error}" for o in failures)
            self._warn(state=state, reason=EventReason.FailedGetMetrics, message=failed, now=now)
        capacity = shared(gather_capacity(rule, gathered.pending, results, self.metrics), rule, pool)
        if capacity is not None and capacity.problem:
            self._warn(state=state, reason=EventReason.FailedGetCapacity, message=capacity.problem, now=now)
        plan = self._plan(state, scale, observations, capacity, now)
        if pool is not None:
            pool.promise(rule, plan.replicas - plan.current)
        if plan.replicas == plan.current or self.dry_run:
            return self._finish(state, plan, observations, patched=False, now=now)
        return Patch(plan, observations, capacity, scale.selector)

    def _plan(self, state: RuleState, scale: ScaleState, observations: tuple[MetricObservation, ...],
              capacity: GatheredCapacity | None, now: float) -> Plan:
        plan = plan_rule(state.slo.rule(state.rule), scale, observations, state.history,
                         state.all_failed_syncs, now, None if capacity is None else capacity.seen)
        if state.rule.slo is not None:
            plan = dataclasses.replace(plan, message=f"{plan.message}; {state.slo.note(state.rule)}")
            self._report_slo(state)
        if capacity is not None and capacity.pool is not None and plan.reason is Reason.CapacityLimited:
            plan = dataclasses.replace(plan, message=f"{plan.message}; {capacity.pool.note()}")
        if plan.problem:
            self._warn(state=state, reason=EventReason.InvalidAnnotation, message=plan.problem, now=now)
        self._report_guards(state, plan, capacity, now)
        return plan

    def _report_slo(self, state: RuleState) -> None:
        """The learned-target gauge, a LearnedTargetChanged Event when it is new or moved by more than
        MOVE_SHARE, and the once-said line when none is learned."""
        rule, learning = state.rule, state.slo
        assert rule.slo is not None
        self.metrics.record_learned(rule, rule.slo.learn, learning.target)
        if moved(learning):
            learning.told = learning.target
            self.events.post(rule.target, "Normal", EventReason.LearnedTargetChanged, learning.note(rule),
                             held=state.held)
        say_none(rule, learning)

    def _patch(self, state: RuleState, todo: Patch, now: float) -> RuleOutcome:
        """On the pool: patch to the plan's count; after a 409 Conflict, re-read, re-plan and try again."""
        rule, plan, observations = state.rule, todo.plan, todo.observations
        attempts = 0
        ranked = False
        while True:
            if self.stopping.is_set() or not self.is_leader():
                return self._abandon(state, plan, observations)
            if not ranked and plan.replicas < plan.current:
                ranked = True
                self._set_deletion_costs(state, todo.selector, now)
                continue  # stopping or leadership may have changed meanwhile
            try:
                self.backend.patch_scale(rule.target, plan.replicas)
            except ConflictError as e:
                attempts += 1
                self.metrics.scale_error(rule, e.reason_label)
                if attempts > self.conflict_retries:
                    return self._patch_failed(state, plan, observations, e, now)
                log.info(
                    "rule %s: conflict patching %s, re-reading (attempt %d)",
                    rule.name,
                    ref_text(rule.target),
                    attempts,
                )
                try:
                    scale = self.backend.read_scale(rule.target)
                except KubeError as read_error:
                    return self._scale_read_failed(state, read_error, observations, now)
                plan = self._plan(state, scale, observations, todo.capacity, now)
                if plan.replicas == plan.current:
                    return self._finish(state, plan, observations, patched=False, now=now)
                continue
            except KubeError as e:
                self.metrics.scale_error(rule, e.reason_label)
                return self._patch_failed(state, plan, observations, e, now)
            state.history = plan.history.with_scale(now, plan.current, plan.replicas)
            direction = "up" if plan.replicas > plan.current else "down"
            self.metrics.scale_event(rule, direction)
            self.events.post(
                rule.target,
                "Normal",
                EventReason.ScaledUp if direction == "up" else EventReason.ScaledDown,
                scale_message(plan, observations, rule),
            )
            return self._finish(state, plan, observations, patched=True, now=now)

    def _set_deletion_costs(self, state: RuleState, selector: str | None, now: float) -> None:
        """Before a scale-down: the pods' deletion costs; what fails is told, and the scale-down goes on."""
        rule = state.rule
        try:
            done = set_deletion_costs(self.backend, self.sources, rule, selector)
        except Exception as e:  # a surprise here must not cost the rule its scale-down
            log.exception("rule %s: setting the pods' deletion costs raised", rule.name)
            self._warn(state=state, reason=EventReason.FailedSetDeletionCost, now=now,
                       message=f"setting the pods' deletion costs failed: {type(e).__name__}: {e}")
            return
        if done is None:
            return
        log.info("rule %s: deletion costs before scaling down: %d pods, %d set, %d cleared", rule.name,
                 done.pods, done.set, done.cleared)
        if done.problem is not None:
            log.warning("rule %s: %s", rule.name, done.problem)
            self._warn(state=state, reason=EventReason.FailedSetDeletionCost, message=done.problem, now=now)

    def _abandon(
        self, state: RuleState, plan: Plan, observations: tuple[MetricObservation, ...]
    ) -> RuleOutcome:
        """No patch after SIGTERM or once leadership is lost; no Event either: this replica must not write to
        the cluster any more, and the next leader decides again."""
        rule = state.rule
        why = "shutting down" if self.stopping.is_set() else "lost leadership"
        self._record_plan(rule, plan, observations)
        log_abandoned(rule, plan, observations, why, self.dry_run)
        return RuleOutcome(
            rule=rule,
            current=plan.current,
            desired=plan.replicas,
            reason=plan.reason,
            message="abandoned",
            observations=observations,
            ok=True,
        )

    def _observe(self, rule: Rule, metric: MetricSpec, results: Mapping[QueryKey, QueryResult],
                 ) -> MetricObservation:
        seen = observe(metric, results.get((rule.prometheus, metric.query)))
        if seen.failed is not None:
            self.metrics.query_error(rule, metric.name, QueryErrorReason(seen.failed))
        if not metric.panic_query or seen.observation.value is None:
            return seen.observation
        short = observe(metric, results.get((rule.prometheus, metric.panic_query)))
        if short.failed is not None:  # panic reads the metric's own value instead; counted, not fatal
            self.metrics.query_error(rule, f"{metric.name}:panic", QueryErrorReason(short.failed))
        return dataclasses.replace(seen.observation, panic_value=short.observation.value)

    def _report_guards(
        self, state: RuleState, plan: Plan, capacity: GatheredCapacity | None, now: float
    ) -> None:
        """The schedule and capacity gauges, and a CapacityLimited Event (at most one per repeat period:
        its numbers change every sync while the cluster stays full)."""
        limited = plan.reason is Reason.CapacityLimited
        free = None if capacity is None else (
            capacity.pool.pool_free if capacity.pool is not None else capacity.seen.free_gpus)
        pending = None if capacity is None else capacity.pending
        targets = plan.budget.targets if plan.budget is not None else ()
        ahead = plan.forecast.replicas if plan.forecast is not None else None
        self.metrics.record_guards(state.rule, Guards(plan.schedule, free, plan.withheld, limited, pending,
                                                      targets, ahead))
        moved = moved_targets(state.rule, state.told_targets, targets)
        if moved:
            state.told_targets = dict(targets)
            self.events.post(state.rule.target, "Normal", EventReason.EffectiveTargetChanged, moved,
                             held=state.held)
        if limited:
            self._warn(
                state=state,
                reason=EventReason.CapacityLimited,
                message=plan.message,
                now=now,
                any_message=True,
            )

    def _finish(
        self,
        state: RuleState,
        plan: Plan,
        observations: tuple[MetricObservation, ...],
        patched: bool,
        now: float,
    ) -> RuleOutcome:
        rule = state.rule
        state.history = state.history if patched else plan.history
        self._record_plan(rule, plan, observations)
        self.metrics.rule_synced(rule, now)  # scale read, nothing failed to patch: a successful rule sync
        verb = "scaled" if patched else ("would scale" if plan.replicas != plan.current else "keep")
        log_decision(rule, plan, observations, verb, self.dry_run)
        return RuleOutcome(
            rule=rule,
            current=plan.current,
            desired=plan.replicas,
            reason=plan.reason,
            message=plan.message,
            observations=observations,
            patched=patched,
            ok=True,
            schedule=plan.schedule,
        )

    def _scale_read_failed(
        self, state: RuleState, error: Exception, observations: tuple[MetricObservation, ...], now: float
    ) -> RuleOutcome:
        rule = state.rule
        reason = getattr(error, "reason_label", ScaleErrorReason.ApiError)
        self.metrics.scale_error(rule, reason)
        self.metrics.record_decision(
            rule=rule,
            current=None,
            desired=None,
            reason=SyncReason.FailedGetScale,
            values={o.name: o.value for o in observations},
        )
        log_read_failed(rule, error, reason, observations, self.dry_run)
        self._warn(state=state, reason=EventReason.FailedGetScale, message=str(error), now=now)
        return RuleOutcome(
            rule=rule,
            current=None,
            desired=None,
            reason=SyncReason.FailedGetScale,
            message=str(error),
            observations=observations,
            error=str(error),
        )

    def _patch_failed(
        self,
        state: RuleState,
        plan: Plan,
        observations: tuple[MetricObservation, ...],
        error: KubeError,
        now: float,
    ) -> RuleOutcome:
        rule = state.rule
        state.history = plan.history  # the recommendation counts, as in the HPA; no scale event happened
        self._record_plan(rule, plan, observations)
        log_patch_failed(rule, plan, observations, error, error.reason_label, self.dry_run)
        failed = f"failed to scale {plan.current} -> {plan.replicas}: {error}"
        self._warn(state=state, reason=EventReason.FailedScale, message=failed, now=now)
        return RuleOutcome(rule=rule, current=plan.current, desired=plan.replicas, reason=plan.reason,
                           message=str(error), observations=observations, error=str(error),
                           schedule=plan.schedule)

    def _record_plan(self, rule: Rule, plan: Plan, observations: Sequence[MetricObservation]) -> None:
        """The decision a plan made, as gpu_autoscaler's decision metrics show it."""
        self.metrics.record_decision(rule=rule, current=plan.current, desired=plan.replicas,
                                     reason=plan.reason, values={o.name: o.value for o in observations})

    def _warn(self, state: RuleState, reason: EventReason, message: str, now: float,
              any_message: bool = False) -> None:
        self.events.warn(state.last_warning, state.rule.target, reason, message, now, any_message, state.held)
