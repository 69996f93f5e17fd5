"""XID critical errors from NVML's event API: the event set the adapter opens (`NvmlAdapter.open_xid_events`)
and the events it yields, with each device handle keyed so the event's GPU is found again.

Kept apart from exporter/nvml/adapter.py: another NVML API with a lifetime of its own (a set is waited on by
the XID watcher's thread and lives as long as the adapter's NVML session, its `generation`).
Nothing here imports pynvml; the calls go through the module-like object the adapter was given.
"""

from __future__ import annotations

import ctypes
import logging
from collections.abc import Callable
from typing import Any

from exporter.errors import NvmlEventError
from exporter.nvml.snapshots import XidEvent

log = logging.getLogger("exporter.nvml.adapter")  # the NVML side's one logger, as in exporter/nvml/calls.py

NO_INSTANCE = 0xFFFFFFFF  # gpuInstanceId / computeInstanceId of an event that is not about a MIG instance


class XidEventSet:
    """Wraps an NVML event set: `wait()` returns the next XID event or None after the timeout.

    `registered` lists the GPU indexes whose XID events it receives. Errors other than a timeout are raised
    as NvmlEventError (the set is then unusable if NVML was shut down: close it and open a new one).
    """

    def __init__(self, nvml: Any, event_set: Any, *, registered: tuple[int, ...] = (), generation: int,
                 index_of_handle: Callable[[Any], int | None]) -> None:
        self._nvml = nvml
        self._set = event_set
        self._index_of_handle = index_of_handle
        self.registered = registered
        self.generation = generation  # the adapter's NVML session the set was created in

    def wait(self, timeout_ms: int) -> XidEvent | None:
        nvml = self._nvml
        try:
            data = nvml.nvmlEventSetWait_v2(self._set, timeout_ms)
        except nvml.NVMLError_Timeout:
            return None
        except nvml.NVMLError as exc:
            raise NvmlEventError(f"nvmlEventSetWait failed: {exc} ({type(exc).__name__})") from exc
        if not int(data.eventType) & int(nvml.nvmlEventTypeXidCriticalError):
            return None
        return XidEvent(gpu_index=self._index_of_handle(data.device), xid=int(data.eventData),
                        event_type=int(data.eventType),
                        gpu_instance_id=_instance(getattr(data, "gpuInstanceId", None)),
                        compute_instance_id=_instance(getattr(data, "computeInstanceId", None)))

    def close(self) -> None:
        nvml = self._nvml
        try:
            nvml.nvmlEventSetFree(self._set)
        except nvml.NVMLError as exc:
            log.debug("nvmlEventSetFree: %s", exc)


def handle_key(handle: Any) -> Any:
    """Hashable identity of a device handle: the pointer value for pynvml's ctypes handles (a fresh pointer
    object per event), the object itself (or its id when unhashable) otherwise."""
    if isinstance(handle, ctypes._Pointer):
        return ("pointer", ctypes.cast(handle, ctypes.c_void_p).value)
    try:
        hash(handle)
    except TypeError:
        return ("id", id(handle))
    return ("object", handle)


def _instance(value: Any) -> int | None:
    if value is None:
        return None
    number = int(value)
    return None if number == NO_INSTANCE else number
