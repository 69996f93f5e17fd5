"""XidWatcher on the adapter's event set over the simulated NVML: XIDs scheduled in its YAML and injected at
run time."""

from __future__ import annotations

import pytest

from exporter.health.xid import XidSettings, XidWatcher
from exporter.nvml.adapter import NvmlAdapter
from exporter.simulator.config_file import parse_sim_config
from exporter.simulator.nvml import SimulatedNvml
from tests.clock import ManualClock as FakeClock
from tests.support import wait_for

pytestmark = pytest.mark.integration

SIM_YAML = """
gpus:
  - model: H100
    count: 3
faults:
  - {type: xid, gpu: 1, at: 5, code: 79}
  - {type: xid, gpu: all, at: 10, code: 13}
"""


def test_scheduled_and_injected_xids_are_counted_and_mark_gpus_down() -> None:
    clock = FakeClock()
    nvml = SimulatedNvml(parse_sim_config(SIM_YAML, "sim.yaml"), clock=clock)
    adapter = NvmlAdapter(nvml)
    adapter.init()
    uuids = [adapter.uuid_of(i) for i in range(3)]
    assert len(set(uuids)) == 3
    watcher = XidWatcher(adapter, XidSettings(wait_timeout_ms=50, recovery_grace_seconds=5), clock=clock)
    watcher.start()
    try:
        wait_for(lambda: watcher.registered == set(uuids))
        clock.t = 4.0
        waits = nvml.calls["nvmlEventSetWait_v2"]
        # the thread waited twice at t=4 and got nothing: no XID is due before t=5
        wait_for(lambda: nvml.calls["nvmlEventSetWait_v2"] >= waits + 2)
        assert watcher.all_counts() == {}

        clock.t = 5.5
        wait_for(lambda: watcher.counts(uuids[1]) == {79: 1})
        assert watcher.down_uuids() == {uuids[1]}
        assert watcher.down_since(uuids[1]) == 5.5

        nvml.inject_xid(0, 48)
        wait_for(lambda: watcher.is_down(uuids[0]))

        clock.t = 10.0
        wait_for(lambda: all(watcher.counts(u).get(13) == 1 for u in uuids))
    finally:
        assert watcher.stop(timeout=5)
    assert watcher.all_counts() == {uuids[0]: {48: 1, 13: 1}, uuids[1]: {79: 1, 13: 1}, uuids[2]: {13: 1}}
    assert not watcher.note_answered(uuids[1], answered_at=10.0)  # inside the 5 s grace
    assert watcher.note_answered(uuids[1], answered_at=11.0)
    assert watcher.down_uuids() == {uuids[0]}


def test_stop_frees_the_simulated_event_set_and_a_new_watcher_starts() -> None:
    clock = FakeClock()
    nvml = SimulatedNvml(parse_sim_config(SIM_YAML, "sim.yaml"), clock=clock)
    adapter = NvmlAdapter(nvml)
    adapter.init()
    first = XidWatcher(adapter, XidSettings(wait_timeout_ms=50), clock=clock)
    first.start()
    wait_for(lambda: len(first.registered) == 3)
    assert first.stop(timeout=2)
    assert nvml.calls["nvmlEventSetFree"] == 1
    nvml.inject_xid(2, 31)  # delivered to no one: the set is freed

    second = XidWatcher(adapter, XidSettings(wait_timeout_ms=50), clock=clock)
    second.start()
    try:
        wait_for(lambda: len(second.registered) == 3)
        nvml.inject_xid(2, 31)
        wait_for(lambda: second.all_counts() != {})
    finally:
        assert second.stop(timeout=5)
    assert list(second.all_counts().values()) == [{31: 1}]
    assert first.all_counts() == {}
