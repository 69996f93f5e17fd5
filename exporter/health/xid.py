"""XID critical errors: a background thread waiting on the adapter's NVML event set, and what it exports.

`XidWatcher` keeps, per GPU uuid, a count per XID code (`gpu_xid_errors_total{xid}`, via `XidMetrics`) and
marks a GPU down on XID 79 (fallen off the bus) or 48 (double-bit ECC). `apply_down_marks` is a sweep hook:
a marked GPU is reported `up=False` until a sweep that started at least `recovery_grace_seconds` after the
XID reads it successfully, so a scraper on a 15-30 s interval sees the 0 even when the GPU keeps answering.

NVML is reached only through `NvmlAdapter.open_xid_events()` / `XidEventSet` (exporter/nvml/events.py: the
NVML side stays the only caller of pynvml functions). Handles belong to one NVML session: when the adapter
re-initialises (its `generation` changes) the watcher closes its set and opens a new one.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from types import MappingProxyType

from prometheus_client.core import Metric

from exporter import metric_table as m
from exporter.background import BackgroundLoop
from exporter.errors import NvmlEventError
from exporter.nvml.adapter import NodeSnapshot, NvmlAdapter
from exporter.nvml.events import XidEventSet
from exporter.scrape.context import ScrapeContext, new_family

log = logging.getLogger(__name__)

XID_DOUBLE_BIT_ECC = 48
XID_FALLEN_OFF_BUS = 79
GPU_DOWN_XIDS = frozenset({XID_DOUBLE_BIT_ECC, XID_FALLEN_OFF_BUS})


@dataclass(frozen=True)
class XidRecord:
    """One XID as counted: the GPU by uuid (None when the event's device could not be named)."""

    uuid: str | None
    xid: int
    timestamp: float  # clock() when the event was taken off the set
    gpu_instance_id: int | None = None  # MIG GPU instance, None when not a MIG event
    compute_instance_id: int | None = None


@dataclass(frozen=True)
class XidSettings:
    # How long one nvmlEventSetWait blocks: bounds how long stop() waits for the thread.
    wait_timeout_ms: int = 500
    # Pause after an NVML error other than a timeout (or while NVML is down): a broken driver is not spun on.
    error_backoff_seconds: float = 1.0
    # A GPU marked down stays down until a sweep started at least this long after the XID reads it. 30 s: at
    # least one scrape of a 15-30 s interval sees gpu_up 0 even when the GPU keeps answering (XID 48).
    recovery_grace_seconds: float = 30.0
    down_xids: frozenset[int] = GPU_DOWN_XIDS


class XidWatcher:
    """`start()` runs the waiting thread (it opens the event set once NVML is up); `stop()` ends it."""

    def __init__(self, adapter: NvmlAdapter, settings: XidSettings | None = None, *,
                 clock: Callable[[], float] = time.time,
                 on_event: Callable[[XidRecord], None] | None = None) -> None:
        self._adapter = adapter
        self.settings = settings or XidSettings()
        self._clock = clock
        self._on_event = on_event
        self._lock = threading.Lock()
        self._counts: dict[str, dict[int, int]] = {}
        self._last: dict[str, int] = {}
        self._down: dict[str, tuple[float, int]] = {}
        self._registered: frozenset[str] = frozenset()
        self._unattributed = 0
        self._events = 0
        self._loop = BackgroundLoop(self._run, "xid-watcher")
        self._stop = self._loop.stopping
        self._last_error: str | None = None

    # --- reading (any thread) ---
    def counts(self, uuid: str) -> Mapping[int, int]:
        """XID code -> events seen on this GPU since the watcher started."""
        with self._lock:
            return MappingProxyType(dict(self._counts.get(uuid, {})))

    def all_counts(self) -> dict[str, dict[int, int]]:
        with self._lock:
            return {uuid: dict(codes) for uuid, codes in self._counts.items()}

    def last_codes(self) -> dict[str, int]:
        """uuid -> code of the last XID seen on that GPU (dcgm-exporter's DCGM_FI_DEV_XID_ERRORS)."""
        with self._lock:
            return dict(self._last)

    @property
    def unattributed_events(self) -> int:
        """Events whose device could not be named (counted nowhere else)."""
        with self._lock:
            return self._unattributed

    @property
    def events(self) -> int:
        """Events recorded so far, attributed or not: a new one changes the XID families."""
        with self._lock:
            return self._events

    def is_down(self, uuid: str) -> bool:
        with self._lock:
            return uuid in self._down

    def down_since(self, uuid: str) -> float | None:
        """Timestamp of the XID that marked the GPU down, None when it is not marked."""
        with self._lock:
            mark = self._down.get(uuid)
        return None if mark is None else mark[0]

    def down_uuids(self) -> frozenset[str]:
        with self._lock:
            return frozenset(self._down)

    @property
    def registered(self) -> frozenset[str]:
        """Uuids whose XID events are being watched."""
        return self._registered

    @property
    def running(self) -> bool:
        return self._loop.running

    # --- recovery ---
    def note_answered(self, uuid: str, answered_at: float) -> bool:
        """A read of the GPU that started at `answered_at` succeeded: clear the down mark when that read
        came at least `recovery_grace_seconds` after the XID. True when the mark was cleared."""
        with self._lock:
            mark = self._down.get(uuid)
            if mark is None or answered_at < mark[0] + self.settings.recovery_grace_seconds:
                return False
            del self._down[uuid]
        log.info("GPU %s answers again after its XID error; no longer marked down", uuid)
        return True

    def clear(self, uuid: str) -> bool:
        """Clear the down mark unconditionally; True when it was set."""
        with self._lock:
            return self._down.pop(uuid, None) is not None

    def apply_down_marks(self, snapshot: NodeSnapshot) -> NodeSnapshot:
        """Sweep hook: report GPUs marked down by an XID as `up=False` until they recover (see module doc)."""
        if not self._down:
            return snapshot
        started = snapshot.collected_at - snapshot.duration_seconds
        devices = []
        for device in snapshot.devices:
            with self._lock:
                mark = self._down.get(device.uuid)
            if mark is not None and not (device.up and self.note_answered(device.uuid, started)):
                device = dataclasses.replace(device, up=False, error=f"XID {mark[1]} reported; waiting for "
                                             "the GPU to answer again")
            devices.append(device)
        return dataclasses.replace(snapshot, devices=tuple(devices))

    # --- lifecycle ---
    def start(self) -> None:
        """Start the waiting thread; idempotent."""
        self._loop.start()

    def stop(self, timeout: float = 5.0) -> bool:
        """End the thread (it notices within wait_timeout_ms) and free the event set; True when it ended."""
        return self._loop.stop(timeout)

    def _run(self) -> None:
        event_set: XidEventSet | None = None
        try:
            while not self._stop.is_set():
                if event_set is not None and event_set.generation != self._adapter.generation:
                    event_set.close()  # NVML was re-initialised: the old handles are stale
                    event_set = None
                if event_set is None:
                    event_set = self._open()
                    if event_set is None:
                        self._stop.wait(self.settings.error_backoff_seconds)
                        continue
                if not self.poll_once(event_set):
                    event_set.close()
                    event_set = None
                    self._stop.wait(self.settings.error_backoff_seconds)
        finally:
            if event_set is not None:
                event_set.close()

    def _open(self) -> XidEventSet | None:
        if not self._adapter.initialized:
            return None
        try:
            event_set = self._adapter.open_xid_events()
        except NvmlEventError as e:
            self._note_error(str(e))
            return None
        uuids = {self._adapter.uuid_of(i) for i in event_set.registered}
        registered = frozenset(u for u in uuids if u)
        changed, self._registered = registered != self._registered, registered
        if not event_set.registered:
            event_set.close()
            self._note_error("no GPU accepted XID event registration")
            return None
        if changed:
            log.info("watching XID errors on %d GPU(s)", len(event_set.registered))
        return event_set

    def poll_once(self, event_set: XidEventSet) -> bool:
        """Wait once on the set and record an XID event; False when the wait failed (reopen the set)."""
        try:
            event = event_set.wait(self.settings.wait_timeout_ms)
        except NvmlEventError as e:
            self._note_error(str(e))
            return False
        self._note_error(None)
        if event is None:
            return True
        uuid = None if event.gpu_index is None else self._adapter.uuid_of(event.gpu_index)
        self.record(XidRecord(uuid, event.xid, self._clock(), event.gpu_instance_id,
                              event.compute_instance_id))
        return True

    def record(self, event: XidRecord) -> None:
        """Count one event (the thread calls this; also usable to replay events in tests)."""
        marks_down = event.uuid is not None and event.xid in self.settings.down_xids
        with self._lock:
            self._events += 1
            if event.uuid is None:
                self._unattributed += 1
            else:
                codes = self._counts.setdefault(event.uuid, {})
                codes[event.xid] = codes.get(event.xid, 0) + 1
                self._last[event.uuid] = event.xid
                if marks_down:
                    self._down.setdefault(event.uuid, (event.timestamp, event.xid))
        suffix = " (gpu_up 0 until it answers again)" if marks_down else ""
        log.warning("XID %d on GPU %s%s", event.xid, event.uuid or "(unknown device)", suffix)
        if self._on_event is not None:
            try:
                self._on_event(event)
            except Exception:
                log.exception("XID on_event callback failed")

    def _note_error(self, error: str | None) -> None:
        """Log an event-API problem once, and its end once."""
        if error == self._last_error:
            return
        if error is None:
            log.info("XID event wait works again")
        else:
            backoff = self.settings.error_backoff_seconds
            log.warning("XID events not available, retrying every %.1f s: %s", backoff, error)
        self._last_error = error


class XidMetrics:
    """Collector extension: `gpu_xid_errors_total{xid}` per GPU, one series per code seen (none before), and
    `gpu_xid_last_code{xid}` per GPU: the last code, 0 before any (the series changes with the code, as
    dcgm-exporter's DCGM_FI_DEV_XID_ERRORS with its err_code label)."""

    def __init__(self, watcher: XidWatcher) -> None:
        self._watcher = watcher

    def collect(self, snapshot: NodeSnapshot, context: ScrapeContext) -> Iterable[Metric]:
        counts, last = self._watcher.all_counts(), self._watcher.last_codes()
        family, latest = new_family(m.XID_ERRORS), new_family(m.XID_LAST)
        for device in snapshot.devices:
            labels = context.device_labels(device)
            for code, count in sorted(counts.get(device.uuid, {}).items()):
                family.add_metric([*labels, str(code)], float(count))
            latest_code = last.get(device.uuid)
            latest.add_metric([*labels, "" if latest_code is None else str(latest_code)],
                              float(latest_code or 0))
        if family.samples:
            yield family
        yield latest
