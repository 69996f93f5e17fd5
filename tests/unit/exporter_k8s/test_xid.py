"""XidWatcher against a tiny object with pynvml's event call surface (the simulated backend is tested in
tests/integration/exporter_k8s/test_xid_simulated.py)."""

from __future__ import annotations

import ctypes
import logging
import queue
import threading
import time
from typing import Any

import pytest

from exporter.xid import WatchedGpu, XidEvent, XidSettings, XidWatcher, _handle_key, discover_gpus


class NVMLError(Exception):
    def __init__(self, value: int) -> None:
        super().__init__(f"NVML error {value}")
        self.value = value


class NVMLError_Timeout(NVMLError):
    def __init__(self) -> None:
        super().__init__(10)


class EventData:
    def __init__(self, device: Any, event_type: int, data: int, gi: int = 0xFFFFFFFF) -> None:
        self.device = device
        self.eventType = event_type
        self.eventData = data
        self.gpuInstanceId = gi
        self.computeInstanceId = 0xFFFFFFFF


class FakeNvml:
    """pynvml's event surface: events come from a queue; an Exception in the queue is raised by the wait."""

    nvmlEventTypeXidCriticalError = 0x8
    nvmlEventTypeDoubleBitEccError = 0x2

    def __init__(self, handles: list[Any], refuse: set[int] = frozenset()) -> None:  # type: ignore[assignment]
        self.handles = handles
        self.refuse = refuse
        self.events: queue.Queue[Any] = queue.Queue()
        self.registered: list[tuple[Any, int]] = []
        self.freed = threading.Event()
        self.waits = 0

    def nvmlDeviceGetCount(self) -> int:
        return len(self.handles)

    def nvmlDeviceGetHandleByIndex(self, index: int) -> Any:
        return self.handles[index]

    def nvmlDeviceGetUUID(self, handle: Any) -> bytes:
        for index, known in enumerate(self.handles):
            if known is handle:
                return f"GPU-{index}".encode()
        raise NVMLError(15)  # GPU_IS_LOST

    def nvmlEventSetCreate(self) -> object:
        return object()

    def nvmlDeviceRegisterEvents(self, handle: Any, types: int, event_set: object) -> None:
        if self.handles.index(handle) in self.refuse:
            raise NVMLError(3)  # NOT_SUPPORTED
        self.registered.append((handle, types))

    def nvmlEventSetWait_v2(self, event_set: object, timeout_ms: int) -> EventData:
        self.waits += 1
        try:
            item = self.events.get(timeout=timeout_ms / 1000)
        except queue.Empty:
            raise NVMLError_Timeout() from None
        if isinstance(item, Exception):
            raise item
        return item

    def nvmlEventSetFree(self, event_set: object) -> None:
        self.freed.set()


def wait_until(condition, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.005)


@pytest.fixture
def nvml() -> FakeNvml:
    return FakeNvml([object(), object(), object()])


def make_watcher(nvml: FakeNvml, **kwargs: Any) -> XidWatcher:
    settings = XidSettings(wait_timeout_ms=20, error_backoff_seconds=0.01, **kwargs)
    return XidWatcher(nvml, discover_gpus(nvml), settings, clock=lambda: 1000.0)


def test_counts_per_gpu_and_code_and_down_marks(nvml: FakeNvml) -> None:
    seen: list[XidEvent] = []
    watcher = XidWatcher(
        nvml, discover_gpus(nvml), XidSettings(wait_timeout_ms=20), clock=lambda: 1000.0, on_event=seen.append
    )
    assert watcher.start()
    try:
        assert [types for _, types in nvml.registered] == [0x8, 0x8, 0x8]
        h0, h1, _ = nvml.handles
        for device, code in [(h0, 13), (h0, 13), (h0, 31), (h1, 79)]:
            nvml.events.put(EventData(device, 0x8, code))
        nvml.events.put(EventData(h0, 0x2, 48))  # not an XID event type: ignored
        wait_until(lambda: len(seen) == 4)
        wait_until(lambda: nvml.events.empty())
    finally:
        assert watcher.stop(timeout=5)
    assert nvml.freed.is_set()
    assert watcher.all_counts() == {"GPU-0": {13: 2, 31: 1}, "GPU-1": {79: 1}}
    assert dict(watcher.counts("GPU-2")) == {}
    assert watcher.down_uuids() == {"GPU-1"} and watcher.down_since("GPU-1") == 1000.0
    assert not watcher.is_down("GPU-0")
    assert seen[-1] == XidEvent("GPU-1", 79, 1000.0, None, None)


def test_recovery_by_answer_after_grace(nvml: FakeNvml) -> None:
    watcher = make_watcher(nvml, recovery_grace_seconds=30)
    watcher.record(XidEvent("GPU-0", 48, 1000.0))
    watcher.record(XidEvent("GPU-0", 48, 1005.0))  # keeps the first down time
    assert watcher.down_since("GPU-0") == 1000.0
    assert not watcher.note_answered("GPU-0", 1010.0)
    assert watcher.is_down("GPU-0")
    assert watcher.note_answered("GPU-0", 1030.0)
    assert not watcher.is_down("GPU-0")
    assert not watcher.note_answered("GPU-0", 2000.0)
    assert watcher.all_counts() == {"GPU-0": {48: 2}}  # counts are never reset


def test_clear(nvml: FakeNvml) -> None:
    watcher = make_watcher(nvml)
    watcher.record(XidEvent("GPU-2", 79, 5.0))
    assert watcher.clear("GPU-2") and not watcher.clear("GPU-2")


def test_refused_registration_and_unknown_device(nvml: FakeNvml, caplog: pytest.LogCaptureFixture) -> None:
    nvml.refuse = {1}
    watcher = make_watcher(nvml)
    assert watcher.start()
    try:
        assert watcher.registered == {"GPU-0", "GPU-2"}
        nvml.events.put(EventData(object(), 0x8, 79))  # a handle nobody knows, UUID lookup fails
        wait_until(lambda: watcher.unattributed_events == 1)
    finally:
        watcher.stop()
    assert watcher.all_counts() == {} and watcher.down_uuids() == frozenset()
    assert any("GPU 1 (GPU-1): XID events not watched" in r.getMessage() for r in caplog.records)


def test_no_gpu_registered_means_not_started(nvml: FakeNvml) -> None:
    nvml.refuse = {0, 1, 2}
    watcher = make_watcher(nvml)
    assert not watcher.start()
    assert not watcher.running and nvml.freed.is_set()


def test_event_set_creation_failure() -> None:
    class Broken(FakeNvml):
        def nvmlEventSetCreate(self) -> object:
            raise NVMLError(1)  # UNINITIALIZED

    watcher = XidWatcher(Broken([object()]), [WatchedGpu(0, "GPU-0", object())])
    assert not watcher.start()
    assert watcher.stop()


def test_wait_errors_are_logged_once_and_survived(nvml: FakeNvml, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="exporter.xid")
    watcher = make_watcher(nvml)
    assert watcher.start()
    try:
        for _ in range(5):
            nvml.events.put(NVMLError(999))
        nvml.events.put(EventData(nvml.handles[2], 0x8, 43))
        wait_until(lambda: watcher.counts("GPU-2") == {43: 1})
    finally:
        watcher.stop()
    messages = [r.getMessage() for r in caplog.records]
    assert sum("XID event wait failed" in m for m in messages) == 1
    assert sum("XID event wait works again" in m for m in messages) == 1


def test_stop_is_bounded_by_the_wait_timeout(nvml: FakeNvml) -> None:
    watcher = XidWatcher(nvml, discover_gpus(nvml), XidSettings(wait_timeout_ms=200))
    assert watcher.start()
    wait_until(lambda: nvml.waits >= 1)
    assert watcher.stop(timeout=2)  # ends within one 200 ms wait (plus scheduling), not "eventually"
    assert not watcher.running and nvml.freed.is_set()


def test_mig_instance_ids() -> None:
    nvml = FakeNvml([object()])
    watcher = make_watcher(nvml)
    data = EventData(nvml.handles[0], 0x8, 94, gi=3)
    data.computeInstanceId = 0
    nvml.events.put(data)
    event = watcher.poll_once(object())
    assert event == XidEvent("GPU-0", 94, 1000.0, 3, 0)


def test_ctypes_handles_match_by_pointer_value() -> None:
    buffers = [ctypes.c_int(0), ctypes.c_int(1)]
    first = ctypes.pointer(buffers[0])
    same_address = ctypes.cast(ctypes.addressof(buffers[0]), ctypes.POINTER(ctypes.c_int))
    assert first is not same_address
    assert _handle_key(first) == _handle_key(same_address)
    assert _handle_key(first) != _handle_key(ctypes.pointer(buffers[1]))
    unhashable = [1]  # unhashable handles fall back to id()
    assert _handle_key(unhashable) == ("id", id(unhashable))
