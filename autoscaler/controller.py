"""The controller: gather (scale, metrics), decide (the policy engine, unchanged), act (patch, events).

It owns the clock, the sleeping and the retries; the engine stays pure. One `now` per sync. Per rule it keeps
the engine's history and the count of consecutive syncs in which every metric failed (for the fallback). A
broad `except` sits only around each rule's sync, so one bad rule never stops the others.

A sync is *successful* (the last-successful-sync gauges and alerts) when it completed and the Kubernetes side
answered for at least one rule (or no rule is loaded). A rule's sync succeeds when its scale was read and no
patch it needed failed, whatever the metrics did: a Prometheus outage holds the counts (or triggers the
fallback) and is reported through metric_up, query_errors_total and the FailedGetMetrics event. Liveness
(/healthz) asks less: that the loop is alive and completing syncs (`LoopProgress`), so a missing target or a
failing API never makes Kubernetes restart the controller, which would fix nothing and wipe the history.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
import time
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from autoscaler.capacity_sync import GatheredCapacity, gather_capacity
from autoscaler.decision_log import decision_fields, log_decision, ref_text, scale_message
from autoscaler.errors import ConflictError, KubeError
from autoscaler.events import EventPoster, WarningMemory
from autoscaler.kube import ScaleBackend, ScaleState
from autoscaler.metrics import ControllerMetrics, Guards
from autoscaler.observe import observe
from autoscaler.outcome import Health, LoopProgress, RuleOutcome, ShuttingDown, SyncReport
from autoscaler.plan import Plan, count_all_failed, plan_rule
from autoscaler.policy import MetricObservation, MetricSpec, Reason, Rule, RuleHistory, TargetRef
from autoscaler.prometheus import MetricsSource, QueryErrorReason, QueryResult
from autoscaler.reasons import DECISION_REASONS, EventReason, ScaleErrorReason, SyncReason
from autoscaler.rules import RuleSet
from autoscaler.sources import EndpointSources, QueryKey

__all__ = [
    "Controller", "ControllerSettings", "Health", "RuleOutcome", "ShuttingDown", "SyncReport",
    "scale_message",
]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ControllerSettings:
    """How the controller acts. Durations in seconds."""

    dry_run: bool = False
    """Decide and report, never patch. Logs say 'would scale' and desired_replicas shows the decision; no
    ScaledUp/ScaledDown event is posted (dry-run writes nothing to the cluster but Warning events, which
    start with '(dry-run)')."""
    conflict_retries: int = 3
    """Re-read + re-decide + patch attempts after a 409 Conflict, within one sync."""
    emit_events: bool = True
    """Post Kubernetes Events (off for `status`, which must not write anything)."""
    workers: int = 16
    """Concurrent Kubernetes calls (scale reads, patches); queries have their own pool in the runner."""


@dataclass
class _RuleState:
    rule: Rule
    history: RuleHistory = dataclasses.field(default_factory=RuleHistory)
    all_failed_syncs: int = 0
    last_warning: WarningMemory = dataclasses.field(default_factory=dict)


def _same_target(a: Rule, b: Rule) -> bool:
    """The history follows the target (kind/namespace/name): as the HPA keeps recommendations and scale
    events across edits of its spec, an edited rule keeps them; another workload starts afresh."""
    return a.target == b.target


class Controller:
    """Syncs every rule of a RuleSet against a ScaleBackend and a MetricsSource."""

    def __init__(
        self,
        backend: ScaleBackend,
        metrics_source: MetricsSource | Mapping[str, MetricsSource],
        rules: RuleSet,
        clock: Callable[[], float],
        *,
        settings: ControllerSettings | None = None,
        metrics: ControllerMetrics | None = None,
        is_leader: Callable[[], bool] = lambda: True,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.backend = backend
        self.sources = EndpointSources(metrics_source)
        """One metrics source per Prometheus endpoint name; a rule's `prometheus` picks one."""
        self.clock = clock
        self.settings = settings or ControllerSettings()
        self.metrics = metrics or ControllerMetrics(reasons=DECISION_REASONS)
        self.metrics.dry_run = self.settings.dry_run
        self.events = EventPoster(backend, self.settings.emit_events, self.settings.dry_run)
        self.is_leader = is_leader
        self._monotonic = monotonic
        self._lock = threading.Lock()
        self._states: dict[str, _RuleState] = {}
        self._rules = rules
        self._pool = ThreadPoolExecutor(max_workers=self.settings.workers, thread_name_prefix="kube")
        self.stopping = threading.Event()
        """Set to abandon the current sync: no patch starts after it is set."""
        self.progress = LoopProgress(monotonic)
        self.set_rules(rules)

    def close(self) -> None:
        self._pool.shutdown(wait=True, cancel_futures=True)
        self.sources.close()

    @property
    def last_success_monotonic(self) -> float | None:
        return self.progress.last_success

    @property
    def rules(self) -> RuleSet:
        return self._rules

    def history(self, rule_name: str) -> RuleHistory:
        with self._lock:
            return self._states[rule_name].history

    def set_rules(self, rules: RuleSet) -> None:
        """Run `rules` from the next sync; a rule (by name) whose target did not change keeps its history and
        failure count, even when its metrics, bounds or behavior were edited."""
        with self._lock:
            states = {}
            for rule in rules.rules:
                old = self._states.get(rule.name)
                if old is not None and _same_target(old.rule, rule):
                    states[rule.name] = dataclasses.replace(old, rule=rule)
                else:
                    states[rule.name] = _RuleState(rule)
            self._states = states
            self._rules = rules
        self.metrics.set_rules(rules)

    # --- one sync ------------------------------------------------------------------------------------------
    def sync_once(self) -> SyncReport:
        """Gather, decide and act for every rule, once. Never raises for a rule's failure."""
        started = self._monotonic()
        now = self.clock()
        leader = self.is_leader()
        self.metrics.leader = leader
        self.progress.sync_started(leader)
        if not leader:
            self.progress.sync_done(ok=False)  # a standby's loop is alive too
            return SyncReport(now, self._monotonic() - started, (), acted=False)
        with self._lock:
            states = list(self._states.values())
        chunks = self._chunks(states)
        reads = [self._pool.submit(self._read_scales, chunk) for chunk in chunks]
        results = self.sources.run(s.rule for s in states)
        scales = [future.result() for future in reads]
        futures = [self._pool.submit(self._sync_rules, chunk, chunk_scales, results, now)
                   for chunk, chunk_scales in zip(chunks, scales, strict=True)]
        outcomes = tuple(outcome for future in futures for outcome in future.result())
        duration = self._monotonic() - started
        report = SyncReport(now, duration, outcomes, acted=True)
        self.progress.sync_done(report.ok)
        self.metrics.sync_finished(duration, now if report.ok else None)
        return report

    def _chunks(self, states: list[_RuleState]) -> list[list[_RuleState]]:
        """The rules in runs handed to the pool whole: a future per rule costs more than a rule's decision
        (10,000 rules: about a second of locks and futures per sync). Four runs per worker keep the I/O of
        slow targets spread over every worker, as one future per rule did."""
        size = max(1, -(-len(states) // (4 * self.settings.workers)))
        return [states[i:i + size] for i in range(0, len(states), size)]

    def _read_scales(self, chunk: list[_RuleState]) -> list[ScaleState | Exception]:
        scales: list[ScaleState | Exception] = []
        for state in chunk:
            try:
                scales.append(self._read_scale(state.rule.target))
            except Exception as e:  # a backend's failure for one target; reported by that rule's sync
                scales.append(e)
        return scales

    def _sync_rules(self, chunk: list[_RuleState], scales: list[ScaleState | Exception],
                    results: Mapping[QueryKey, QueryResult], now: float) -> list[RuleOutcome]:
        return [self._sync_rule_safely(state, scale, results, now)
                for state, scale in zip(chunk, scales, strict=True)]

    def _read_scale(self, ref: TargetRef) -> ScaleState:
        """A queued read starts only while not stopping, so SIGTERM during a slow sync exits quickly."""
        if self.stopping.is_set():
            raise ShuttingDown("shutting down: scale not read")
        try:
            return self.backend.read_scale(ref)
        finally:
            self.progress.tick()

    def _sync_rule_safely(
        self, state: _RuleState, scale: ScaleState | Exception, results: Mapping[QueryKey, QueryResult],
        now: float,
    ) -> RuleOutcome:
        if self.stopping.is_set() or isinstance(scale, ShuttingDown):
            return RuleOutcome(state.rule, None, None, SyncReason.Abandoned, "shutting down: rule not synced")
        if state.rule.prometheus not in self.sources:
            return self._unknown_endpoint(state, now)
        try:
            return self._sync_rule(state, scale, results, now)
        except Exception as e:  # the one broad except: a bug or surprise in one rule never stops the others
            return self._sync_error(state, e, now)
        finally:
            self.progress.tick()

    def _sync_error(self, state: _RuleState, error: Exception, now: float) -> RuleOutcome:
        """A rule whose sync raised: told like any failed decision (metric, Event, structured log line)."""
        rule = state.rule
        message = f"sync failed: {type(error).__name__}: {error}"
        log.error(
            "rule %s: %s",
            rule.name,
            message,
            exc_info=error,
            extra={"fields": decision_fields(rule, None, None, SyncReason.Error, message, "failed",
                                             self.settings.dry_run, error=str(error),
                                             error_reason=type(error).__name__)},
        )
        try:
            self.metrics.record_decision(rule, None, None, SyncReason.Error, {})
            self._warn(state, EventReason.FailedSync, message, now)
        except Exception:  # reporting must not take the other rules down either
            log.exception("rule %s: cannot report the failed sync", rule.name)
        return RuleOutcome(rule, None, None, SyncReason.Error, message, error=str(error))

    def _unknown_endpoint(self, state: _RuleState, now: float) -> RuleOutcome:
        """A rule whose endpoint is not configured is refused alone: no query, no decision, no patch."""
        rule = state.rule
        message = (f"the rule names Prometheus endpoint {rule.prometheus!r}, which is not configured "
                   f"(endpoints: {self.sources.names}); the rule is not synced")
        self.metrics.record_decision(rule, None, None, SyncReason.UnknownEndpoint, {})
        last = state.last_warning.get(EventReason.InvalidRule)
        if last is None or last[0] != message:
            log.warning("rule %s: %s", rule.name, message)
        self._warn(state, EventReason.InvalidRule, message, now)
        return RuleOutcome(rule, None, None, SyncReason.UnknownEndpoint, message, error=message)

    def _sync_rule(
        self, state: _RuleState, scale: ScaleState | Exception, results: Mapping[QueryKey, QueryResult],
        now: float,
    ) -> RuleOutcome:
        rule = state.rule
        observations = tuple(self._observe(rule, m, results) for m in rule.metrics)
        state.all_failed_syncs = count_all_failed(state.all_failed_syncs, observations)
        if isinstance(scale, Exception):
            if not isinstance(scale, KubeError):
                raise scale  # a bug in a backend, not an API answer: reported as a failed sync
            return self._scale_read_failed(state, scale, observations, now)
        failures = [o for o in observations if o.value is None]
        if failures:
            failed = "; ".join(f"{o.name}: {o.error}" for o in failures)
            self._warn(state, EventReason.FailedGetMetrics, failed, now)
        capacity = gather_capacity(rule, scale, results, self.backend, self.metrics)
        if capacity is not None and capacity.problem:
            self._warn(state, EventReason.FailedGetCapacity, capacity.problem, now)
        attempts = 0
        while True:
            plan = plan_rule(rule, scale, observations, state.history, state.all_failed_syncs, now,
                             capacity and capacity.seen)
            if plan.problem:
                self._warn(state, EventReason.InvalidAnnotation, plan.problem, now)
            self._report_guards(state, plan, capacity, now)
            if plan.replicas == plan.current or self.settings.dry_run:
                return self._finish(state, plan, observations, patched=False, now=now)
            if self.stopping.is_set() or not self.is_leader():
                return self._abandon(state, plan, observations)
            try:
                self.backend.patch_scale(rule.target, plan.replicas)
            except ConflictError as e:
                attempts += 1
                self.metrics.scale_error(rule, e.reason_label)
                if attempts > self.settings.conflict_retries:
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

    def _abandon(
        self, state: _RuleState, plan: Plan, observations: tuple[MetricObservation, ...]
    ) -> RuleOutcome:
        """No patch after SIGTERM or once leadership is lost; no Event either: this replica must not write to
        the cluster any more, and the next leader decides again."""
        rule = state.rule
        why = "shutting down" if self.stopping.is_set() else "lost leadership"
        self.metrics.record_decision(
            rule, plan.current, plan.replicas, plan.reason, {o.name: o.value for o in observations}
        )
        log.warning(
            "rule %s: not patching %s %d -> %d: %s",
            rule.name,
            ref_text(rule.target),
            plan.current,
            plan.replicas,
            why,
            extra={"fields": decision_fields(rule, plan.current, plan.replicas, plan.reason, plan.message,
                                             "abandoned", self.settings.dry_run, observations, error=why)},
        )
        return RuleOutcome(rule, plan.current, plan.replicas, plan.reason, "abandoned", observations, ok=True)

    def _observe(self, rule: Rule, metric: MetricSpec, results: Mapping[QueryKey, QueryResult],
                 ) -> MetricObservation:
        seen = observe(metric, results.get((rule.prometheus, metric.query)))
        if seen.failed is not None:
            self.metrics.query_error(rule, metric.name, QueryErrorReason(seen.failed))
        return seen.observation

    def _report_guards(self, state: _RuleState, plan: Plan, capacity: GatheredCapacity | None,
                       now: float) -> None:
        """The schedule and capacity gauges, and a CapacityLimited Event (at most one per repeat period:
        its numbers change every sync while the cluster stays full)."""
        limited = plan.reason is Reason.CapacityLimited
        free = None if capacity is None else capacity.seen.free_gpus
        pending = None if capacity is None else capacity.pending
        self.metrics.record_guards(state.rule, Guards(plan.schedule, free, plan.withheld, limited, pending))
        if limited:
            self._warn(state, EventReason.CapacityLimited, plan.message, now, any_message=True)

    def _finish(
        self,
        state: _RuleState,
        plan: Plan,
        observations: tuple[MetricObservation, ...],
        patched: bool,
        now: float,
    ) -> RuleOutcome:
        rule = state.rule
        state.history = state.history if patched else plan.history
        self.metrics.record_decision(
            rule, plan.current, plan.replicas, plan.reason, {o.name: o.value for o in observations}
        )
        self.metrics.rule_synced(rule, now)  # scale read, nothing failed to patch: a successful rule sync
        verb = "scaled" if patched else ("would scale" if plan.replicas != plan.current else "keep")
        log_decision(rule, plan, observations, verb, self.settings.dry_run)
        return RuleOutcome(rule, plan.current, plan.replicas, plan.reason, plan.message, observations,
                           patched, ok=True, schedule=plan.schedule)

    def _scale_read_failed(
        self, state: _RuleState, error: Exception, observations: tuple[MetricObservation, ...], now: float
    ) -> RuleOutcome:
        rule = state.rule
        reason = getattr(error, "reason_label", ScaleErrorReason.ApiError)
        self.metrics.scale_error(rule, reason)
        self.metrics.record_decision(
            rule, None, None, SyncReason.FailedGetScale, {o.name: o.value for o in observations}
        )
        log.warning(
            "rule %s: cannot read the scale of %s: %s",
            rule.name,
            ref_text(rule.target),
            error,
            extra={"fields": decision_fields(rule, None, None, SyncReason.FailedGetScale, str(error),
                                             "failed", self.settings.dry_run, observations, error=str(error),
                                             error_reason=reason)},
        )
        self._warn(state, EventReason.FailedGetScale, str(error), now)
        return RuleOutcome(rule, None, None, SyncReason.FailedGetScale, str(error), observations,
                           error=str(error))

    def _patch_failed(
        self,
        state: _RuleState,
        plan: Plan,
        observations: tuple[MetricObservation, ...],
        error: KubeError,
        now: float,
    ) -> RuleOutcome:
        rule = state.rule
        state.history = plan.history  # the recommendation counts, as in the HPA; no scale event happened
        self.metrics.record_decision(
            rule, plan.current, plan.replicas, plan.reason, {o.name: o.value for o in observations}
        )
        log.warning(
            "rule %s: failed to scale %s %d -> %d (%s): %s",
            rule.name,
            ref_text(rule.target),
            plan.current,
            plan.replicas,
            error.reason_label,
            error,
            extra={"fields": decision_fields(rule, plan.current, plan.replicas, plan.reason, plan.message,
                                             "failed", self.settings.dry_run, observations, error=str(error),
                                             error_reason=error.reason_label)},
        )
        failed = f"failed to scale {plan.current} -> {plan.replicas}: {error}"
        self._warn(state, EventReason.FailedScale, failed, now)
        return RuleOutcome(rule, plan.current, plan.replicas, plan.reason, str(error), observations,
                           error=str(error), schedule=plan.schedule)

    def _warn(self, state: _RuleState, reason: EventReason, message: str, now: float,
              any_message: bool = False) -> None:
        self.events.warn(state.last_warning, state.rule.target, reason, message, now, any_message)

    def health(self, interval: float) -> Health:
        """/healthz and /readyz: see LoopProgress (the loop alive; a first sync completed)."""
        return self.progress.health(interval)
