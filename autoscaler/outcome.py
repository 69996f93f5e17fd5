"""What one sync found and did, per rule and as a whole: `status` rows, exit codes and liveness read these."""

from __future__ import annotations

from dataclasses import dataclass

from autoscaler.policy import MetricObservation
from autoscaler.rules import Rule


class ShuttingDown(Exception):
    """A queued scale read skipped because the controller is stopping."""


@dataclass(frozen=True)
class RuleOutcome:
    """What one rule's sync found and did: the row of `status` and of the decision log line."""

    rule: Rule
    current: int | None
    desired: int | None
    reason: str
    message: str
    observations: tuple[MetricObservation, ...] = ()
    patched: bool = False
    ok: bool = False
    """The Kubernetes side answered: scale read, no needed patch failed (the metrics may have failed)."""
    error: str | None = None

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


_NO_METRICS_NEEDED = frozenset({"Paused", "PausedReplicas", "ScalingDisabled"})


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
