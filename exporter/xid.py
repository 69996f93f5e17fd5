"""A background thread waiting on NVML's event API for XID critical errors, per GPU.

It keeps, per GPU uuid, a count per XID code (for gpu_xid_errors_total{xid}) and marks a GPU down on XID 79
(fallen off the bus) or 48 (double-bit ECC) until the caller reports that the GPU answered again
(`note_answered` / `clear`). It takes the NVML module-like object (pynvml or the simulated one) and uses
only nvmlEventSetCreate, nvmlDeviceRegisterEvents, nvmlEventSetWait_v2 (raises NVMLError_Timeout when
nothing came), nvmlEventSetFree, and nvmlDeviceGetUUID as a fallback to name an event's device.

Handles belong to one NVML session: after NVML is re-initialised, stop this watcher and start a new one.
"""

from __future__ import annotations

import ctypes
import logging
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

log = logging.getLogger(__name__)

XID_DOUBLE_BIT_ECC = 48
XID_FALLEN_OFF_BUS = 79
GPU_DOWN_XIDS = frozenset({XID_DOUBLE_BIT_ECC, XID_FALLEN_OFF_BUS})

NVML_ERROR_TIMEOUT = 10  # pynvml's NVML_ERROR_TIMEOUT, the `.value` of NVMLError_Timeout
EVENT_TYPE_XID_CRITICAL_ERROR = 0x8  # pynvml's nvmlEventTypeXidCriticalError
NO_INSTANCE = 0xFFFFFFFF  # gpuInstanceId / computeInstanceId when the event is not about a MIG instance


@dataclass(frozen=True)
class WatchedGpu:
    index: int
    uuid: str
    handle: Any


@dataclass(frozen=True)
class XidEvent:
    uuid: str | None  # None: the event's device could not be named
    xid: int
    timestamp: float  # clock() when the event was taken off the set
    gpu_instance_id: int | None = None  # MIG GPU instance, None when not a MIG event
    compute_instance_id: int | None = None


@dataclass(frozen=True)
class XidSettings:
    # How long one nvmlEventSetWait_v2 blocks: bounds how long stop() waits for the thread.
    wait_timeout_ms: int = 500
    # Pause after an NVML error other than a timeout, so a broken driver is not spun on.
    error_backoff_seconds: float = 1.0
    # A GPU marked down stays down until a read at least this long after the XID succeeded (0: the first).
    recovery_grace_seconds: float = 0.0
    down_xids: frozenset[int] = GPU_DOWN_XIDS


def discover_gpus(nvml: Any) -> tuple[WatchedGpu, ...]:
    """Every GPU NVML lists (NVML must be initialised); a GPU that cannot be named is skipped, logged."""
    found = []
    for index in range(int(nvml.nvmlDeviceGetCount())):
        try:
            handle = nvml.nvmlDeviceGetHandleByIndex(index)
            found.append(WatchedGpu(index, _text(nvml.nvmlDeviceGetUUID(handle)), handle))
        except Exception as e:  # an NVMLError of the module given; one GPU must not stop the others
            log.warning("GPU %d: not watched for XID errors: %s", index, _describe(e))
    return tuple(found)


class XidWatcher:
    """`start()` registers every GPU for XID events and runs the waiting thread; `stop()` ends it."""

    def __init__(
        self,
        nvml: Any,
        gpus: Sequence[WatchedGpu],
        settings: XidSettings | None = None,
        *,
        clock: Callable[[], float] = time.time,
        on_event: Callable[[XidEvent], None] | None = None,
    ) -> None:
        self._nvml = nvml
        self._gpus = tuple(gpus)
        self.settings = settings or XidSettings()
        self._clock = clock
        self._on_event = on_event
        self._by_handle = {_handle_key(gpu.handle): gpu for gpu in self._gpus}
        self._lock = threading.Lock()
        self._counts: dict[str, dict[int, int]] = {}
        self._down: dict[str, float] = {}
        self._registered: frozenset[str] = frozenset()
        self._unattributed = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._event_set: Any = None
        self._last_error: str | None = None

    # --- reading (any thread) ---
    def counts(self, uuid: str) -> Mapping[int, int]:
        """XID code -> events seen on this GPU since the watcher started."""
        with self._lock:
            return MappingProxyType(dict(self._counts.get(uuid, {})))

    def all_counts(self) -> dict[str, dict[int, int]]:
        with self._lock:
            return {uuid: dict(codes) for uuid, codes in self._counts.items()}

    @property
    def unattributed_events(self) -> int:
        """Events whose device could not be named (counted nowhere else)."""
        with self._lock:
            return self._unattributed

    def is_down(self, uuid: str) -> bool:
        with self._lock:
            return uuid in self._down

    def down_since(self, uuid: str) -> float | None:
        """Timestamp of the XID that marked the GPU down, None when it is not marked."""
        with self._lock:
            return self._down.get(uuid)

    def down_uuids(self) -> frozenset[str]:
        with self._lock:
            return frozenset(self._down)

    @property
    def registered(self) -> frozenset[str]:
        """Uuids whose XID events are being watched."""
        return self._registered

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    # --- recovery ---
    def note_answered(self, uuid: str, answered_at: float) -> bool:
        """A read of the GPU that started at `answered_at` succeeded: clear the down mark when that read
        came at least `recovery_grace_seconds` after the XID. True when the mark was cleared."""
        with self._lock:
            since = self._down.get(uuid)
            if since is None or answered_at < since + self.settings.recovery_grace_seconds:
                return False
            del self._down[uuid]
        log.info("GPU %s answers again after its XID error; no longer marked down", uuid)
        return True

    def clear(self, uuid: str) -> bool:
        """Clear the down mark unconditionally; True when it was set."""
        with self._lock:
            return self._down.pop(uuid, None) is not None

    # --- lifecycle ---
    def start(self) -> bool:
        """Create the event set, register every GPU, start the thread. False (logged) when NVML refuses the
        event set or no GPU could be registered; the watcher then does nothing."""
        if self.running:
            return True
        nvml = self._nvml
        event_type = int(getattr(nvml, "nvmlEventTypeXidCriticalError", EVENT_TYPE_XID_CRITICAL_ERROR))
        try:
            event_set = nvml.nvmlEventSetCreate()
        except Exception as e:  # NVML not initialised, no driver, ...
            log.warning("XID watcher not started: nvmlEventSetCreate failed: %s", _describe(e))
            return False
        registered = []
        for gpu in self._gpus:
            try:
                nvml.nvmlDeviceRegisterEvents(gpu.handle, event_type, event_set)
            except Exception as e:
                log.warning("GPU %d (%s): XID events not watched: %s", gpu.index, gpu.uuid, _describe(e))
                continue
            registered.append(gpu.uuid)
        if not registered:
            self._free(event_set)
            log.warning("XID watcher not started: no GPU accepted XID event registration")
            return False
        self._registered = frozenset(registered)
        self._event_set = event_set
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, name="xid-watcher", daemon=True)
        self._thread.start()
        log.info("watching XID errors on %d GPUs", len(registered))
        return True

    def stop(self, timeout: float = 5.0) -> bool:
        """End the thread (it notices within wait_timeout_ms) and free the event set; True when it ended."""
        self._stop.set()
        thread = self._thread
        if thread is None:
            return True
        thread.join(timeout)
        return not thread.is_alive()

    def _run(self) -> None:
        event_set = self._event_set
        try:
            while not self._stop.is_set():
                self.poll_once(event_set)
        finally:
            self._free(event_set)

    def poll_once(self, event_set: Any) -> XidEvent | None:
        """Wait once on the set; record and return an XID event, None on timeout / other events / error."""
        try:
            data = self._nvml.nvmlEventSetWait_v2(event_set, self.settings.wait_timeout_ms)
        except Exception as e:
            if getattr(e, "value", None) == NVML_ERROR_TIMEOUT or type(e).__name__ == "NVMLError_Timeout":
                self._note_error(None)
                return None
            self._note_error(_describe(e))
            self._stop.wait(self.settings.error_backoff_seconds)
            return None
        self._note_error(None)
        if not int(data.eventType) & EVENT_TYPE_XID_CRITICAL_ERROR:
            return None
        event = XidEvent(
            uuid=self._uuid_of(data.device),
            xid=int(data.eventData),
            timestamp=self._clock(),
            gpu_instance_id=_instance(getattr(data, "gpuInstanceId", None)),
            compute_instance_id=_instance(getattr(data, "computeInstanceId", None)),
        )
        self.record(event)
        return event

    def record(self, event: XidEvent) -> None:
        """Count one event (the thread calls this; also usable to replay events in tests)."""
        marks_down = event.uuid is not None and event.xid in self.settings.down_xids
        with self._lock:
            if event.uuid is None:
                self._unattributed += 1
            else:
                codes = self._counts.setdefault(event.uuid, {})
                codes[event.xid] = codes.get(event.xid, 0) + 1
                if marks_down:
                    self._down.setdefault(event.uuid, event.timestamp)
        suffix = " (marked down)" if marks_down else ""
        log.warning("XID %d on GPU %s%s", event.xid, event.uuid or "(unknown device)", suffix)
        if self._on_event is not None:
            try:
                self._on_event(event)
            except Exception:
                log.exception("XID on_event callback failed")

    def _uuid_of(self, handle: Any) -> str | None:
        gpu = self._by_handle.get(_handle_key(handle))
        if gpu is not None:
            return gpu.uuid
        try:
            return _text(self._nvml.nvmlDeviceGetUUID(handle))
        except Exception:  # the device may be the one that fell off the bus
            return None

    def _note_error(self, error: str | None) -> None:
        """Log an NVML wait error once, and its end once."""
        if error == self._last_error:
            return
        if error is None:
            log.info("XID event wait works again")
        else:
            backoff = self.settings.error_backoff_seconds
            log.warning("XID event wait failed, retrying every %.1f s: %s", backoff, error)
        self._last_error = error

    def _free(self, event_set: Any) -> None:
        try:
            self._nvml.nvmlEventSetFree(event_set)
        except Exception as e:
            log.debug("nvmlEventSetFree: %s", _describe(e))


def _handle_key(handle: Any) -> Any:
    """Hashable identity of a device handle: the pointer value for pynvml's ctypes handles (a fresh
    pointer object per event), the object itself (or its id) otherwise."""
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


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _describe(error: BaseException) -> str:
    return f"{type(error).__name__}: {error}"
