"""XidWatcher over NvmlAdapter's event set on the simulated NVML (a subclass adds wait errors, odd events)."""

from __future__ import annotations

import ctypes
import dataclasses
import logging
import queue
from typing import Any

import pytest

from exporter.health.xid import XidRecord, XidSettings, XidWatcher
from exporter.nvml.adapter import DeviceSnapshot, NodeSnapshot, NvmlAdapter
from exporter.nvml.events import handle_key
from exporter.simulator.config import default_config
from exporter.simulator.config_file import parse_sim_config
from exporter.simulator.nvml import SimulatedNvml
from exporter.simulator.structs import SimStruct
from tests.support import wait_for

T0 = 1000.0


class EventNvml(SimulatedNvml):
    """The simulated NVML plus a queue of items the event wait returns first (an Exception is raised)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.extra: queue.Queue[Any] = queue.Queue()
        self.refuse_event_set: Exception | None = None
        self.waits = 0

    def nvmlEventSetCreate(self) -> Any:
        if self.refuse_event_set is not None:
            raise self.refuse_event_set
        return super().nvmlEventSetCreate()

    def nvmlEventSetWait_v2(self, eventSet: Any, timeoutms: int) -> Any:
        self.waits += 1
        try:
            item = self.extra.get_nowait()
        except queue.Empty:
            return super().nvmlEventSetWait_v2(eventSet, timeoutms)
        if isinstance(item, Exception):
            raise item
        return item


def setup(yaml_text: str | None = None,
          **settings: Any) -> tuple[EventNvml, NvmlAdapter, XidWatcher, list[str]]:
    config = parse_sim_config(yaml_text, "sim.yaml") if yaml_text else default_config(3)
    nvml = EventNvml(config)
    adapter = NvmlAdapter(nvml)
    adapter.init()
    values: dict[str, Any] = {"wait_timeout_ms": 20, "error_backoff_seconds": 0.01,
                              "recovery_grace_seconds": 0.0}
    values.update(settings)
    watcher = XidWatcher(adapter, XidSettings(**values), clock=lambda: T0)
    uuids = [adapter.uuid_of(i) or "" for i in range(adapter.device_count)]
    return nvml, adapter, watcher, uuids


def test_counts_per_gpu_and_code_and_down_marks() -> None:
    nvml, _, watcher, uuids = setup()
    seen: list[XidRecord] = []
    watcher._on_event = seen.append
    watcher.start()
    try:
        wait_for(lambda: watcher.registered == set(uuids))
        for index, code in [(0, 13), (0, 13), (0, 31), (1, 79)]:
            nvml.inject_xid(index, code)
        wait_for(lambda: len(seen) == 4)
        # a double-bit ECC *event type* (not an XID) is ignored
        nvml.extra.put(SimStruct(device=nvml._handles[0], eventType=nvml.nvmlEventTypeDoubleBitEccError,
                                 eventData=48, gpuInstanceId=0xFFFFFFFF, computeInstanceId=0xFFFFFFFF))
        wait_for(lambda: nvml.extra.empty())
        nvml.inject_xid(2, 43)
        wait_for(lambda: len(seen) == 5)
    finally:
        assert watcher.stop(timeout=5)
    assert watcher.all_counts() == {uuids[0]: {13: 2, 31: 1}, uuids[1]: {79: 1}, uuids[2]: {43: 1}}
    assert watcher.last_codes() == {uuids[0]: 31, uuids[1]: 79, uuids[2]: 43}  # the latest, not the largest
    assert watcher.down_uuids() == {uuids[1]} and watcher.down_since(uuids[1]) == T0
    assert seen[3] == XidRecord(uuids[1], 79, T0, None, None)
    assert nvml._event_sets == []  # stop() freed the set


def test_recovery_by_answer_after_grace() -> None:
    _, _, watcher, _ = setup(recovery_grace_seconds=30)
    watcher.record(XidRecord("GPU-0", 48, 1000.0))
    watcher.record(XidRecord("GPU-0", 48, 1005.0))  # keeps the first down time
    assert watcher.down_since("GPU-0") == 1000.0
    assert not watcher.note_answered("GPU-0", 1010.0)
    assert watcher.is_down("GPU-0")
    assert watcher.note_answered("GPU-0", 1030.0)
    assert not watcher.is_down("GPU-0")
    assert not watcher.note_answered("GPU-0", 2000.0)
    assert watcher.all_counts() == {"GPU-0": {48: 2}}  # counts are never reset


def _sweep(collected_at: float, *devices: DeviceSnapshot) -> NodeSnapshot:
    return NodeSnapshot(nvml_up=True, driver_version="", cuda_version="", devices=devices,
                        collected_at=collected_at, duration_seconds=0.5, last_success=collected_at)


@pytest.mark.parametrize(("collected_at", "up_after"), [
    (1029.0, False),   # sweep started 1028.5: inside the 30 s grace
    (1030.4, False),   # started 1029.9: still inside
    (1030.5, True),    # started exactly at XID + grace: recovered
    (1100.0, True),
], ids=["inside-grace", "just-inside", "at-boundary", "long-after"])
def test_apply_down_marks_keeps_gpu_down_until_a_sweep_after_the_grace(collected_at: float,
                                                                       up_after: bool) -> None:
    _, _, watcher, _ = setup(recovery_grace_seconds=30)
    watcher.record(XidRecord("GPU-a", 79, 1000.0))
    healthy = DeviceSnapshot(index=0, uuid="GPU-a", name="x", pci_bus_id="", up=True, utilization=0.5)
    other = dataclasses.replace(healthy, index=1, uuid="GPU-b")
    result = watcher.apply_down_marks(_sweep(collected_at, healthy, other))
    assert result.devices[0].up is up_after
    assert result.devices[1].up  # another GPU is never touched
    if not up_after:
        assert "XID 79" in (result.devices[0].error or "")
    assert watcher.is_down("GPU-a") is not up_after


def test_a_gpu_that_does_not_answer_stays_down_past_the_grace() -> None:
    _, _, watcher, _ = setup(recovery_grace_seconds=0)
    watcher.record(XidRecord("GPU-a", 79, 1000.0))
    lost = DeviceSnapshot(index=0, uuid="GPU-a", name="x", pci_bus_id="", up=False, error="GpuIsLost")
    assert not watcher.apply_down_marks(_sweep(2000.0, lost)).devices[0].up
    assert watcher.is_down("GPU-a")


def test_clear() -> None:
    _, _, watcher, _ = setup()
    watcher.record(XidRecord("GPU-2", 79, 5.0))
    assert watcher.clear("GPU-2") and not watcher.clear("GPU-2")


def test_refused_registration_is_logged_and_left_out(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO)
    yaml_text = """
gpus: [{count: 3}]
faults: [{type: not_supported, gpu: 1, calls: [nvmlDeviceRegisterEvents]}]
"""
    nvml, _, watcher, uuids = setup(yaml_text)
    watcher.start()
    try:
        wait_for(lambda: watcher.registered == {uuids[0], uuids[2]})
        nvml.inject_xid(1, 79)  # not registered for GPU 1: never delivered
        nvml.inject_xid(2, 13)
        wait_for(lambda: watcher.counts(uuids[2]) == {13: 1})
    finally:
        watcher.stop()
    assert watcher.all_counts() == {uuids[2]: {13: 1}}
    assert any("GPU 1: nvmlDeviceRegisterEvents not supported" in r.getMessage() for r in caplog.records)


def test_unknown_device_is_counted_apart() -> None:
    nvml, _, watcher, _ = setup()
    nvml.extra.put(SimStruct(device=object(), eventType=nvml.nvmlEventTypeXidCriticalError, eventData=79,
                             gpuInstanceId=0xFFFFFFFF, computeInstanceId=0xFFFFFFFF))
    watcher.start()
    try:
        wait_for(lambda: watcher.unattributed_events == 1)
    finally:
        watcher.stop()
    assert watcher.all_counts() == {} and watcher.down_uuids() == frozenset()


def test_no_gpu_registered_means_nothing_watched_and_one_log_line(caplog: pytest.LogCaptureFixture) -> None:
    yaml_text = """
gpus: [{count: 2}]
faults: [{type: not_supported, calls: [nvmlDeviceRegisterEvents]}]
"""
    nvml, _, watcher, _ = setup(yaml_text)
    watcher.start()
    try:
        wait_for(lambda: nvml.calls["nvmlEventSetFree"] >= 3)  # tried (and freed) three times
    finally:
        watcher.stop()
    assert watcher.registered == frozenset() and nvml._event_sets == []
    messages = [r.getMessage() for r in caplog.records if r.name == "exporter.health.xid"]
    assert sum("no GPU accepted XID event registration" in m for m in messages) == 1


def test_event_set_creation_failure_is_logged_once_and_retried(caplog: pytest.LogCaptureFixture) -> None:
    nvml, _, watcher, uuids = setup()
    nvml.refuse_event_set = nvml.NVMLError_Unknown()
    watcher.start()
    try:
        wait_for(lambda: sum("nvmlEventSetCreate failed" in r.getMessage() for r in caplog.records) == 1)
        nvml.refuse_event_set = None
        wait_for(lambda: watcher.registered == set(uuids))
        nvml.inject_xid(0, 31)
        wait_for(lambda: watcher.counts(uuids[0]) == {31: 1})
    finally:
        watcher.stop()
    assert sum("nvmlEventSetCreate failed" in r.getMessage() for r in caplog.records) == 1


def test_wait_errors_are_logged_once_and_survived(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="exporter.health.xid")
    nvml, _, watcher, uuids = setup()
    for _ in range(5):
        nvml.extra.put(nvml.NVMLError_Unknown())
    watcher.start()
    try:
        # the set is reopened after each failure: inject once a wait on the new set succeeded
        wait_for(lambda: any("works again" in r.getMessage() for r in caplog.records))
        nvml.inject_xid(2, 43)
        wait_for(lambda: watcher.counts(uuids[2]) == {43: 1})
    finally:
        watcher.stop()
    messages = [r.getMessage() for r in caplog.records]
    assert sum("XID events not available" in m for m in messages) == 1
    assert sum("XID event wait works again" in m for m in messages) == 1


def test_nvml_reinit_reopens_the_event_set() -> None:
    nvml, adapter, watcher, uuids = setup()
    watcher.start()
    try:
        wait_for(lambda: len(nvml._event_sets) == 1)
        first = nvml._event_sets[0]
        adapter.shutdown()
        adapter.init()  # a new NVML session: old handles and sets are stale
        wait_for(lambda: len(nvml._event_sets) == 1 and nvml._event_sets[0] is not first)
        nvml.inject_xid(1, 48)
        wait_for(lambda: watcher.counts(uuids[1]) == {48: 1})
    finally:
        watcher.stop()
    assert first.freed


def test_stop_is_bounded_by_the_wait_timeout() -> None:
    nvml, _, watcher, _ = setup(wait_timeout_ms=200)
    watcher.start()
    wait_for(lambda: nvml.waits >= 1)
    assert watcher.stop(timeout=2)  # ends within one 200 ms wait (plus scheduling), not "eventually"
    assert not watcher.running and nvml._event_sets == []


def test_mig_instance_ids() -> None:
    nvml, _, watcher, uuids = setup()
    nvml.extra.put(SimStruct(device=nvml._handles[0], eventType=nvml.nvmlEventTypeXidCriticalError,
                             eventData=94, gpuInstanceId=3, computeInstanceId=0))
    seen: list[XidRecord] = []
    watcher._on_event = seen.append
    watcher.start()
    try:
        wait_for(lambda: len(seen) == 1)
    finally:
        watcher.stop()
    assert seen == [XidRecord(uuids[0], 94, T0, 3, 0)]


def test_ctypes_handles_match_by_pointer_value() -> None:
    buffers = [ctypes.c_int(0), ctypes.c_int(1)]
    first = ctypes.pointer(buffers[0])
    same_address = ctypes.cast(ctypes.addressof(buffers[0]), ctypes.POINTER(ctypes.c_int))
    assert first is not same_address
    assert handle_key(first) == handle_key(same_address)
    assert handle_key(first) != handle_key(ctypes.pointer(buffers[1]))
    unhashable = [1]  # unhashable handles fall back to id()
    assert handle_key(unhashable) == ("id", id(unhashable))


def test_last_code_series_follow_the_latest_xid_as_dcgm_exporter_does() -> None:
    """gpu_xid_last_code: 0 without an xid label before any XID, then the last code as value and label."""
    from exporter.health.xid import XidMetrics
    from exporter.scrape.context import ScrapeContext

    _, adapter, watcher, uuids = setup()
    snapshot = adapter.read()

    def last() -> dict[str, tuple[str | None, float]]:
        families = list(XidMetrics(watcher).collect(snapshot, ScrapeContext("node", {})))
        (family,) = [f for f in families if f.name == "gpu_xid_last_code"]
        return {s.labels["gpu"]: (s.labels.get("xid") or None, s.value) for s in family.samples}

    assert last() == {"0": (None, 0.0), "1": (None, 0.0), "2": (None, 0.0)}
    watcher.record(XidRecord(uuids[0], 79, T0))
    watcher.record(XidRecord(uuids[0], 13, T0 + 1))
    assert last()["0"] == ("13", 13.0) and last()["1"] == (None, 0.0)
