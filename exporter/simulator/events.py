"""The event part of the simulated NVML surface: event sets, and XID critical errors delivered to the sets
registered for their GPU (an `xid` fault when simulated time reaches it, `inject_xid` at once); a wait is
bounded in real time, as NVML's timeout is.

Same signatures as pynvml, its own error classes and event type bits. Kept apart from
exporter/simulator/nvml.py so each stays small; `SimulatedNvml` inherits these methods.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from exporter.nvml.adapter import real_nvml
from exporter.simulator.config import Fault
from exporter.simulator.physics import SimGpu
from exporter.simulator.structs import SimStruct

_pynvml = real_nvml()


@dataclass(eq=False)
class SimEventSet:
    """What nvmlEventSetCreate returns: the event types registered per GPU, the events not yet waited for."""

    masks: dict[int, int] = field(default_factory=dict)
    queue: deque[tuple[int, int]] = field(default_factory=deque)
    delivered: set[int] = field(default_factory=set)
    freed: bool = False


class EventSurface:
    """pynvml's event calls (needs `_enter`, `_gpu`, `_gpus`, `_handles`, `_lock`, `_events`, `_event_sets`,
    `_xid_schedule`, `now` of SimulatedNvml)."""

    _lock: Any
    _events: threading.Condition
    _gpus: list[SimGpu]
    _handles: list[Any]
    _event_sets: list[SimEventSet]
    _xid_schedule: tuple[tuple[int, Fault], ...]

    def _gpu(self, call: str, handle: Any) -> tuple[SimGpu, float]:  # provided by SimulatedNvml
        raise NotImplementedError

    def _enter(self, call: str, index: int | None = None) -> float:  # provided by SimulatedNvml
        raise NotImplementedError

    def now(self) -> float:  # provided by SimulatedNvml
        raise NotImplementedError

    # -- load driver (demo, tests) --------------------------------------------------------------------
    def inject_xid(self, index: int, code: int) -> None:
        """Deliver an XID critical error on GPU `index` now, to every event set that registered for it."""
        with self._lock:
            for event_set in self._event_sets:
                if event_set.masks.get(index, 0) & _pynvml.nvmlEventTypeXidCriticalError:
                    event_set.queue.append((index, code))
            self._events.notify_all()

    # -- pynvml surface: events -----------------------------------------------------------------------
    def nvmlDeviceGetSupportedEventTypes(self, handle: Any) -> int:
        with self._lock:
            self._gpu("nvmlDeviceGetSupportedEventTypes", handle)
            return int(_pynvml.nvmlEventTypeXidCriticalError | _pynvml.nvmlEventTypeDoubleBitEccError
                       | _pynvml.nvmlEventTypeSingleBitEccError)

    def nvmlEventSetCreate(self) -> SimEventSet:
        with self._lock:
            self._enter("nvmlEventSetCreate")
            event_set = SimEventSet()
            self._event_sets.append(event_set)
            return event_set

    def nvmlDeviceRegisterEvents(self, handle: Any, eventTypes: int, eventSet: SimEventSet) -> None:
        with self._lock:
            gpu, _ = self._gpu("nvmlDeviceRegisterEvents", handle)
            eventSet.masks[gpu.index] = eventSet.masks.get(gpu.index, 0) | int(eventTypes)

    def nvmlEventSetWait_v2(self, eventSet: SimEventSet, timeoutms: int) -> SimStruct:
        """Block up to `timeoutms` (real) ms for an event; scheduled XIDs are due by simulated time."""
        deadline = time.monotonic() + timeoutms / 1000.0
        with self._lock:
            self._enter("nvmlEventSetWait_v2")
            while True:
                if eventSet.freed:
                    raise _pynvml.NVMLError_InvalidArgument()
                self._queue_due_xids(eventSet)
                if eventSet.queue:
                    index, code = eventSet.queue.popleft()
                    return SimStruct(device=self._handles[index],
                                     eventType=_pynvml.nvmlEventTypeXidCriticalError, eventData=code,
                                     gpuInstanceId=0xFFFFFFFF, computeInstanceId=0xFFFFFFFF)
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise _pynvml.NVMLError_Timeout()
                self._events.wait(min(remaining, 0.05))

    def nvmlEventSetWait(self, eventSet: SimEventSet, timeoutms: int) -> SimStruct:
        return self.nvmlEventSetWait_v2(eventSet, timeoutms)

    def nvmlEventSetFree(self, eventSet: SimEventSet) -> None:
        with self._lock:
            self._enter("nvmlEventSetFree")
            eventSet.freed = True
            if eventSet in self._event_sets:
                self._event_sets.remove(eventSet)
            self._events.notify_all()

    def _queue_due_xids(self, event_set: SimEventSet) -> None:
        t = self.now()
        xid_bit = _pynvml.nvmlEventTypeXidCriticalError
        for key, fault in self._xid_schedule:
            if key in event_set.delivered or t < fault.at:
                continue
            for index in range(len(self._gpus)):
                if fault.applies_to(index) and event_set.masks.get(index, 0) & xid_bit:
                    event_set.queue.append((index, fault.code))
            event_set.delivered.add(key)
