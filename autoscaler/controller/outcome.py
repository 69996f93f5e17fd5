"""What one sync found and did, per rule and as a whole (`status` rows, exit codes), and how the loop is doing
(`LoopProgress`: what /healthz and /readyz answer)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass

from autoscaler.config.schedules import ScheduleBounds
from autoscaler.policy import MetricObservation, Reason, Rule
from autoscaler.reasons import OutcomeReason


class ShuttingDown(Exception):
    """A queued scale read skipped because the controller is stopping."""


@dataclass(frozen=True)
class RuleOutcome:
    """What one rule's sync found and did: the row of `status` and of the decision log line."""

    rule: Rule
    current: int | None
    desired: int | None
    reason: OutcomeReason
    message: str
    observations: tuple[MetricObservation, ...] = ()
    patched: bool = False
    ok: bool = False
    """The Kubernetes side answered: scale read, no needed patch failed (the metrics may have failed)."""
    error: str | None = None
    schedule: ScheduleBounds | None = None
    """The bounds of the schedule windows open during the decision (None: none was open, or no plan)."""

    @property
    def bounds(self) -> tuple[int, int]:
        """(minReplicas, maxReplicas) in effect: the rule's, or an open schedule window's."""
        if self.schedule is None:
            return self.rule.min_replicas, self.rule.max_replicas
        top = self.rule.max_replicas if self.schedule.max_replicas is None else self.schedule.max_replicas
        return self.schedule.min_replicas, top

    @property
    def metrics_ok(self) -> bool:
        """At least one metric answered (or none was needed: no metrics, paused, target at zero)."""
        return (
            not self.observations
            or any(o.value is not None for o in self.observations)
            or self.reason in _NO_METRICS_NEEDED
        )

    @property
    def complete(self) -> bool:
        """ok and metrics_ok: what `run --once` and `status` report through their exit status."""
        return self.ok and self.metrics_ok


_NO_METRICS_NEEDED: frozenset[OutcomeReason] = frozenset({Reason.Paused, Reason.PausedReplicas,
                                                          Reason.ScalingDisabled})


@dataclass(frozen=True)
class SyncReport:
    """One sync of all rules."""

    timestamp: float
    duration: float
    outcomes: tuple[RuleOutcome, ...]
    acted: bool
    """False when this replica is not the leader: nothing was read, decided or patched."""

    @property
    def ok(self) -> bool:
        """Successful sync: completed, the Kubernetes side answered for at least one rule (or no rules)."""
        return not self.outcomes or any(o.ok for o in self.outcomes)


@dataclass(frozen=True)
class Health:
    """What /healthz (alive) and /readyz (ready) answer, with one line saying why."""

    alive: bool
    ready: bool
    message: str


class LoopProgress:
    """When the sync loop last made progress, completed a sync, and synced successfully as the leader.

    Liveness is "the loop is alive": it fails only when the loop made no progress (no sync completed, no
    scale read or rule sync finished) for 3 intervals. A sync whose rules all failed (a target that does not
    exist, RBAC, the API refusing) still completes: restarting would not fix it and would wipe the history,
    so that is reported by metrics, Events and alerts, and by the message here. Readiness adds "a first sync
    completed". Times are monotonic seconds.
    """

    def __init__(self, monotonic: Callable[[], float]) -> None:
        self._monotonic = monotonic
        self._lock = threading.Lock()
        self.started = monotonic()
        self.last_progress = self.started
        self.last_completed: float | None = None
        self.last_success: float | None = None
        """Last successful sync (SyncReport.ok) while leading."""
        self.leading_since: float | None = None
        """First sync of the current leadership stint; None while standby."""

    def sync_started(self, leader: bool) -> None:
        """Restarts the success clock when this replica starts leading: a new leader gets its 3 intervals."""
        with self._lock:
            if not leader:
                self.leading_since = None
            elif self.leading_since is None:
                self.leading_since = self._monotonic()

    def tick(self) -> None:
        """Part of the current sync finished (a scale read, a rule): a long sync of many rules is alive."""
        with self._lock:
            self.last_progress = self._monotonic()

    def sync_done(self, ok: bool) -> None:
        with self._lock:
            now = self._monotonic()
            self.last_progress = self.last_completed = now
            if ok and self.leading_since is not None:
                self.last_success = now

    def seconds_without_success(self) -> float | None:
        """Seconds since the last successful sync of this leadership stint (or its start); None: standby."""
        with self._lock:
            if self.leading_since is None:
                return None
            since = self.leading_since
            if self.last_success is not None and self.last_success > since:
                since = self.last_success
            return self._monotonic() - since

    def health(self, interval: float) -> Health:
        limit = 3 * interval
        with self._lock:
            idle = self._monotonic() - self.last_progress
            completed = self.last_completed is not None
        if idle > limit:
            stuck = f"sync loop stuck: no progress for {idle:.0f}s (3 intervals = {limit:g}s)"
            return Health(False, False, stuck)
        if not completed:
            return Health(True, False, "starting: no sync completed yet")
        stale = self.seconds_without_success()
        if stale is None:
            return Health(True, True, "ok: standby (not the leader)")
        if stale > limit:
            failing = (
                f"ok: the loop runs, but no rule synced successfully for {stale:.0f}s as the leader "
                "(see the log and gpu_autoscaler_scale_errors_total)"
            )
            return Health(True, True, failing)
        return Health(True, True, "ok")
