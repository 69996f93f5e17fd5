"""The Kubernetes Events the controller posts on its targets: best effort, and never a flood.

An Event that cannot be posted is logged and the sync goes on. A Warning repeats only after
`WARNING_EVENT_REPEAT_SECONDS`: an identical one (same rule, reason, message) for most reasons, any one of
its reason for those whose numbers change every sync (CapacityLimited while a cluster stays full). In dry-run
every message starts with '(dry-run)'; with `emit_events` off (the `status` command) nothing is posted.

While the controller decides a rule on its own thread, the rule's Events are held (`HeldEvents`) and posted
afterwards, in order, by the pool worker that makes the rule's other Kubernetes calls: deciding 10,000 rules
never waits on the API server.
"""

from __future__ import annotations

import logging
from typing import Literal, NamedTuple

from autoscaler.controller.decision_log import ref_text
from autoscaler.kube.backend import ScaleBackend
from autoscaler.policy import TargetRef
from autoscaler.reasons import EventReason

__all__ = ["WARNING_EVENT_REPEAT_SECONDS", "EventPoster", "HeldEvents", "WarningMemory"]

log = logging.getLogger(__name__)

WARNING_EVENT_REPEAT_SECONDS = 300.0
"""A Warning event of the same rule and reason (and message, for most reasons) is posted again only after
this long."""

WarningMemory = dict[EventReason, tuple[str, float]]
"""Per rule: the last Warning of each reason, its message and when it was posted."""


class _Event(NamedTuple):
    ref: TargetRef
    type_: Literal["Normal", "Warning"]
    reason: EventReason
    message: str


class HeldEvents:
    """One rule's Events of one sync, kept back between `hold` and `release` instead of posted at once."""

    __slots__ = ("_held",)

    def __init__(self) -> None:
        self._held: list[_Event] | None = None

    def hold(self) -> None:
        self._held = []

    @property
    def any(self) -> bool:
        return bool(self._held)

    def add(self, event: _Event) -> bool:
        """Keep `event` if holding (True); False: the caller posts it now."""
        if self._held is None:
            return False
        self._held.append(event)
        return True

    def release(self) -> list[_Event]:
        """The held Events, oldest first; from now on Events are posted at once again."""
        held, self._held = self._held or [], None
        return held


class EventPoster:
    def __init__(self, backend: ScaleBackend, emit: bool, dry_run: bool) -> None:
        self.backend = backend
        self.emit = emit
        self.dry_run = dry_run

    def warn(self, memory: WarningMemory, ref: TargetRef, reason: EventReason, message: str, now: float,
             any_message: bool = False, held: HeldEvents | None = None) -> None:
        """A Warning Event unless the same one was posted within the repeat period (`any_message`: one of
        that reason, whatever its message); kept in `held` while that holds."""
        last = memory.get(reason)
        same = last is not None and (any_message or last[0] == message)
        if last is not None and same and now - last[1] < WARNING_EVENT_REPEAT_SECONDS:
            return
        memory[reason] = (message, now)
        self.post(ref, "Warning", reason, message, held)

    def post(self, ref: TargetRef, type_: Literal["Normal", "Warning"], reason: EventReason, message: str,
             held: HeldEvents | None = None) -> None:
        if not self.emit or (held is not None and held.add(_Event(ref, type_, reason, message))):
            return
        if self.dry_run:
            message = f"(dry-run) {message}"
        try:
            self.backend.emit_event(ref, type_, reason, message)
        except Exception as e:  # events are best effort: a failed one is logged, the sync goes on
            log.warning("cannot post event %s on %s: %s", reason, ref_text(ref), e)

    def post_held(self, held: HeldEvents) -> None:
        """Post what `held` kept, in order, and stop holding."""
        for event in held.release():
            self.post(*event)
