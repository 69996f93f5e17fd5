"""The controller: gather (scale, metrics), decide (the policy engine, unchanged), act (patch, events).

It owns the clock, the sleeping and the retries; the engine stays pure. One `now` per sync. Per rule it keeps
the engine's history and the count of consecutive syncs in which every metric failed (for the fallback). The
worker pool makes the Kubernetes calls and this thread decides (`api_workers`); one rule's sync, and the broad
`except` around it, so one bad rule never stops the others, live in `rule_sync`.

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
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass

from autoscaler.config.rules import RuleSet
from autoscaler.controller.api_workers import Gathered, gather, runs
from autoscaler.controller.capacity_ledger import PoolLedger
from autoscaler.controller.decision_log import scale_message
from autoscaler.controller.events import EventPoster
from autoscaler.controller.outcome import Health, LoopProgress, RuleOutcome, ShuttingDown, SyncReport
from autoscaler.controller.past import PastRead, needs_past, try_read_past
from autoscaler.controller.rule_sync import Patch, RuleState, RuleSync
from autoscaler.controller.self_metrics import ControllerMetrics
from autoscaler.controller.slo_learning import RETRY_SECONDS, SloLearning, learn
from autoscaler.controller.sources import EndpointSources, QueryKey
from autoscaler.kube.backend import ScaleBackend
from autoscaler.policy import Rule, RuleHistory
from autoscaler.reasons import DECISION_REASONS
from plumbing.prometheus.errors import PrometheusClientError
from plumbing.prometheus.runner import MetricsSource, QueryResult

log = logging.getLogger(__name__)

__all__ = [
    "Controller", "ControllerSettings", "Health", "RuleOutcome", "ShuttingDown", "SyncReport",
    "scale_message",
]


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
    """Concurrent Kubernetes calls (scale reads, Pending pods, Events, patches); queries have their own pool
    in the runner."""


def _same_target(a: Rule, b: Rule) -> bool:
    """The history follows the target (kind/namespace/name): as the HPA keeps recommendations and scale
    events across edits of its spec, an edited rule keeps them; another workload starts afresh."""
    return a.target == b.target


def _same_learning(a: Rule, b: Rule) -> bool:
    """An edit that keeps the slo block and its metric's query keeps what was learned."""
    if a.slo != b.slo or b.slo is None:
        return False
    name = b.slo.learn
    return [(m.query, m.type) for m in a.metrics if m.name == name] == \
        [(m.query, m.type) for m in b.metrics if m.name == name]


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
        self._states: dict[str, RuleState] = {}
        self._rules = rules
        self._pool = ThreadPoolExecutor(max_workers=self.settings.workers, thread_name_prefix="kube")
        self.stopping = threading.Event()
        """Set to abandon the current sync: no read, patch or held Event starts after it is set."""
        self.progress = LoopProgress(monotonic)
        self._syncs = 0
        """Syncs so far: turns the order of equal-priority rules sharing a pool."""
        self._rule_sync = RuleSync(
            backend, self.sources, self.metrics, self.events, dry_run=self.settings.dry_run,
            conflict_retries=self.settings.conflict_retries, stopping=self.stopping, is_leader=is_leader,
            tick=self.progress.tick,
        )
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

    def past(self, rule_name: str) -> PastRead:
        """Whether the rule's past was read back from Prometheus, and when it was last tried."""
        with self._lock:
            return self._states[rule_name].past

    def slo(self, rule_name: str) -> SloLearning:
        """What the rule's slo learned (or why not)."""
        with self._lock:
            return self._states[rule_name].slo

    def set_rules(self, rules: RuleSet) -> None:
        """Run `rules` from the next sync; a rule (by name) whose target did not change keeps its history and
        failure count, even when its metrics, bounds or behavior were edited."""
        with self._lock:
            states = {}
            for rule in rules.rules:
                old = self._states.get(rule.name)
                if old is not None and _same_target(old.rule, rule):
                    learns = (rule.overload_budget, rule.forecast)
                    past = old.past if (old.rule.overload_budget, old.rule.forecast) == learns else PastRead()
                    slo = old.slo if _same_learning(old.rule, rule) else SloLearning()
                    states[rule.name] = dataclasses.replace(old, rule=rule, past=past, slo=slo)
                else:
                    states[rule.name] = RuleState(rule)
            self._states = states
            self._rules = rules
        self.metrics.set_rules(rules)

    # --- one sync ------------------------------------------------------------------------------------------
    def sync_once(self) -> SyncReport:
        """Gather, decide and act for every rule, once. Never raises for a rule's failure.

        The pool reads the scales while the queries run; each run of rules is then decided here, on this
        thread, as soon as its reads are in, and goes back to the pool for its Events and patches
        (api_workers).
        """
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
        chunks = runs(states, self.settings.workers)
        tick = self.progress.tick
        reads = [self._pool.submit(gather, self.backend, [s.rule for s in chunk], self.stopping, tick)
                 for chunk in chunks]
        results = self.sources.run(s.rule for s in states)
        self._read_one_past(states, now)
        self.learn_due(now, states, limit=1)
        rule_sync = self._rule_sync
        pooled = self._decide_pools(states, chunks, reads, results, now)
        acting: list[list[RuleOutcome] | Future[list[RuleOutcome]]] = []
        for chunk, read in zip(chunks, reads, strict=True):
            decided = [pooled[id(state)] if id(state) in pooled
                       else rule_sync.decide(state, gathered, results, now)
                       for state, gathered in zip(chunk, read.result(), strict=True)]
            if any(isinstance(d, Patch) or state.held.any for state, d in zip(chunk, decided, strict=True)):
                acting.append(self._pool.submit(self._act_run, chunk, decided, now))
            else:
                acting.append([rule_sync.settled(state, d) for state, d in zip(chunk, decided, strict=True)])
        outcomes = tuple(o for run in acting for o in (run if isinstance(run, list) else run.result()))
        duration = self._monotonic() - started
        report = SyncReport(now, duration, outcomes, acted=True)
        self.progress.sync_done(report.ok)
        self.metrics.sync_finished(duration, now if report.ok else None)
        return report

    def _read_one_past(self, states: Sequence[RuleState], now: float) -> None:
        """The past of one rule whose budget or forecast has not read it yet (controller.past)."""
        for state in states:
            if needs_past(state.rule) and state.past.due(now):
                source = self.sources.history_source(state.rule.prometheus)
                state.history = try_read_past(state.rule, source, state.history, state.past, now)
                return

    def learn_due(self, now: float, states: Sequence[RuleState] | None = None, limit: int | None = None,
                  ) -> None:
        """Learn the slo target of the rules whose learning is due, at most `limit` of them (the loop learns
        one a sync; `status` all); a failure is logged and kept, never raised."""
        if states is None:
            with self._lock:
                states = list(self._states.values())
        due = [s for s in states if s.rule.slo is not None and s.slo.due(now)]
        for state in due[:limit]:
            self._learn(state, now)

    def _learn(self, state: RuleState, now: float) -> None:
        rule, learning = state.rule, state.slo
        assert rule.slo is not None
        learning.tried = now
        source = self.sources.history_source(rule.prometheus)
        try:
            if source is None:
                raise PrometheusClientError(f"endpoint {rule.prometheus!r} cannot answer range queries")
            learned = learn(rule, rule.slo, source, now)
        except PrometheusClientError as e:
            learning.error = str(e)
            log.warning("rule %s: cannot learn its slo target (%s); tried again in %.0f s", rule.name, e,
                        RETRY_SECONDS)
            return
        except Exception as e:  # a broad except: a surprise in one rule's learning never stops the loop
            learning.error = f"{type(e).__name__}: {e}"
            log.exception("rule %s: learning its slo target failed", rule.name)
            return
        learning.learned, learning.read_at, learning.error = learned, now, None

    def _decide_pools(self, states: Sequence[RuleState], chunks: Sequence[Sequence[RuleState]],
                      reads: Sequence[Future[list[Gathered]]], results: Mapping[QueryKey, QueryResult],
                      now: float) -> dict[int, RuleOutcome | Patch]:
        """The rules whose capacity guards read a pool with other rules, decided first, once every scale is
        read, in the ledger's order (controller.capacity_ledger); the others are decided as their reads come
        in."""
        ledger = PoolLedger((s.rule for s in states), turn=self._syncs)
        self._syncs += 1
        if not ledger:
            return {}
        gathered = {id(state): g for chunk, read in zip(chunks, reads, strict=True)
                    for state, g in zip(chunk, read.result(), strict=True)}
        return {id(state): self._rule_sync.decide(state, gathered[id(state)], results, now, pool=ledger)
                for state in ledger.order(states, lambda s: s.rule)}

    def _act_run(self, chunk: Sequence[RuleState], decided: list[RuleOutcome | Patch], now: float,
                 ) -> list[RuleOutcome]:
        """On the pool: each rule's held Events, then its patch, in the run's order."""
        return [self._rule_sync.act(state, d, now) for state, d in zip(chunk, decided, strict=True)]

    def health(self, interval: float) -> Health:
        """/healthz and /readyz: see LoopProgress (the loop alive; a first sync completed)."""
        return self.progress.health(interval)
