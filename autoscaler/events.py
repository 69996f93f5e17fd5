"""The Kubernetes Events the controller posts on its targets: best effort, and never a flood.

An Event that cannot be posted is logged and the sync goes on. A Warning repeats only after
`WARNING_EVENT_REPEAT_SECONDS`: an identical one (same rule, reason, message) for most reasons, any one of
its reason for those whose numbers change every sync (CapacityLimited while a cluster stays full). In dry-run
every message starts with '(dry-run)'; with `emit_events` off (the `status` command) nothing is posted.
"""

from __future__ import annotations

import logging
from typing import Literal

from autoscaler.decision_log import ref_text
from autoscaler.kube import ScaleBackend
from autoscaler.policy import TargetRef
from autoscaler.reasons import EventReason

__all__ = ["WARNING_EVENT_REPEAT_SECONDS", "EventPoster", "WarningMemory"]

log = logging.getLogger(__name__)

WARNING_EVENT_REPEAT_SECONDS = 300.0
"""A Warning event of the same rule and reason (and message, for most reasons) is posted again only after
this long."""

WarningMemory = dict[EventReason, tuple[str, float]]
"""Per rule: the last Warning of each reason, its message and when it was posted."""


class EventPoster:
    def __init__(self, backend: ScaleBackend, emit: bool, dry_run: bool) -> None:
        self.backend = backend
        self.emit = emit
        self.dry_run = dry_run

    def warn(self, memory: WarningMemory, ref: TargetRef, reason: EventReason, message: str, now: float,
             any_message: bool = False) -> None:
        """A Warning Event unless the same one was posted within the repeat period (`any_message`: one of
        that reason, whatever its message)."""
        last = memory.get(reason)
        same = last is not None and (any_message or last[0] == message)
        if last is not None and same and now - last[1] < WARNING_EVENT_REPEAT_SECONDS:
            return
        memory[reason] = (message, now)
        self.post(ref, "Warning", reason, message)

    def post(self, ref: TargetRef, type_: Literal["Normal", "Warning"], reason: EventReason, message: str,
             ) -> None:
        if not self.emit:
            return
        if self.dry_run:
            message = f"(dry-run) {message}"
        try:
            self.backend.emit_event(ref, type_, reason, message)
        except Exception as e:  # events are best effort: a failed one is logged, the sync goes on
            log.warning("cannot post event %s on %s: %s", reason, ref_text(ref), e)
