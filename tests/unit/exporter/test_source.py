"""NvmlSource: rate-limited sweeps shared by concurrent scrapes, init retry, PCIe off the scrape path."""

from __future__ import annotations

import dataclasses
import threading

import pytest

from exporter.nvml.adapter import NvmlAdapter
from exporter.simulator.config import default_config
from exporter.simulator.config_file import parse_sim_config
from exporter.simulator.nvml import SimulatedNvml
from exporter.source import NvmlSource, SourceSettings
from tests.support import wait_for
from tests.unit.exporter.conftest import FakeClock


def make_source(
    sim: SimulatedNvml, clock: FakeClock, started: list[NvmlSource], **settings: float
) -> NvmlSource:
    values = {"pcie_interval": 3600.0, "init_retry_interval": 3600.0, **settings}
    source = NvmlSource(NvmlAdapter(sim, clock=clock), SourceSettings(**values), clock=clock, monotonic=clock)
    started.append(source)
    source.start()
    return source


def test_min_interval_shares_one_sweep(clock: FakeClock, sources: list[NvmlSource]) -> None:
    sim = SimulatedNvml(default_config(2), clock=clock, pcie_latency_seconds=0)
    source = make_source(sim, clock, sources, min_interval=1.0)
    first = source.snapshot()
    clock.advance(0.5)
    assert source.snapshot() is first
    clock.advance(0.5)
    second = source.snapshot()
    assert second is not first and source.sweeps == 2


def test_concurrent_scrapes_share_the_sweep_in_flight(clock: FakeClock, sources: list[NvmlSource]) -> None:
    sim = SimulatedNvml(default_config(4), clock=clock, pcie_latency_seconds=0)
    source = make_source(sim, clock, sources, min_interval=1.0)
    results = []
    barrier = threading.Barrier(8)

    def scrape() -> None:
        barrier.wait()
        results.append(source.snapshot())

    threads = [threading.Thread(target=scrape) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)
    assert len(results) == 8 and all(r is results[0] for r in results)
    assert source.sweeps == 1


def test_pcie_is_sampled_in_the_background_never_by_a_scrape(
    clock: FakeClock, sources: list[NvmlSource]
) -> None:
    sim = SimulatedNvml(default_config(2), clock=clock, pcie_latency_seconds=0)
    source = make_source(sim, clock, sources, min_interval=0.0)
    wait_for(lambda: sim.calls["nvmlDeviceGetPcieThroughput"] == 4)  # one background pass, 2 GPUs x tx/rx
    wait_for(lambda: source.snapshot().devices[1].pcie_rx_bytes_per_second is not None)
    for _ in range(5):
        snapshot = source.snapshot()
    assert sim.calls["nvmlDeviceGetPcieThroughput"] == 4
    assert all(d.pcie_tx_bytes_per_second is not None for d in snapshot.devices)


def test_without_nvml_serves_down_and_retries_in_background(clock: FakeClock, sources: list[NvmlSource],
                                                            caplog: pytest.LogCaptureFixture) -> None:
    config = parse_sim_config("""
gpus: [{model: H100, count: 2}]
faults: [{type: nvml_unavailable, error: LibraryNotFound, until: 30}]
""", "t.yaml")
    sim = SimulatedNvml(config, clock=clock, pcie_latency_seconds=0)
    source = make_source(sim, clock, sources, min_interval=0.0, init_retry_interval=0.02)
    snapshot = source.snapshot()
    assert not snapshot.nvml_up and snapshot.devices == () and snapshot.last_success is None
    assert not source.ready and "NVMLError_LibraryNotFound" in (source.nvml_error or "")
    wait_for(lambda: sim.calls["nvmlInit"] >= 3)  # retried, and
    errors = [r for r in caplog.records if r.name == "exporter.source" and r.levelname == "ERROR"]
    assert len(errors) == 1  # logged once, not per attempt
    clock.advance(30)
    wait_for(lambda: source.ready)
    snapshot = source.snapshot()
    assert snapshot.nvml_up and len(snapshot.devices) == 2 and snapshot.last_success == clock.now


def test_driver_lost_mid_run_reinitialises(clock: FakeClock, sources: list[NvmlSource]) -> None:
    config = parse_sim_config("""
gpus: [{model: H100, count: 1}]
faults: [{type: nvml_unavailable, error: DriverNotLoaded, at: 10, until: 20}]
""", "t.yaml")
    sim = SimulatedNvml(config, clock=clock, pcie_latency_seconds=0)
    source = make_source(sim, clock, sources, min_interval=0.0, init_retry_interval=0.02)
    good = source.snapshot()
    assert good.nvml_up
    clock.advance(10)
    down = source.snapshot()
    assert not down.nvml_up and down.last_success == good.last_success  # staleness signal kept
    clock.advance(10)
    wait_for(lambda: source.ready)
    assert source.snapshot().nvml_up


def test_settings_reject_negative_seconds() -> None:
    with pytest.raises(ValueError, match="min_interval"):
        SourceSettings(min_interval=-1)


def test_sweep_hooks_see_each_fresh_sweep_once_and_may_amend_it(clock: FakeClock,
                                                                sources: list[NvmlSource]) -> None:
    sim = SimulatedNvml(default_config(2), clock=clock, pcie_latency_seconds=0)
    source = make_source(sim, clock, sources, min_interval=1.0)
    seen: list[float] = []

    def mark_first_down(snapshot):  # type: ignore[no-untyped-def]
        seen.append(snapshot.collected_at)
        first = dataclasses.replace(snapshot.devices[0], up=False, error="hook")
        return dataclasses.replace(snapshot, devices=(first, *snapshot.devices[1:]))

    def broken(snapshot):  # type: ignore[no-untyped-def]
        raise RuntimeError("bug in a hook")

    source.add_sweep_hook(broken)
    source.add_sweep_hook(mark_first_down)
    first = source.snapshot()
    assert source.snapshot() is first  # cached: no hook call
    clock.advance(1.0)
    second = source.snapshot()
    assert seen == [first.collected_at, second.collected_at]
    assert not second.devices[0].up and second.devices[0].error == "hook" and second.devices[1].up


def test_process_utilization_is_sampled_off_the_scrape_path(clock: FakeClock,
                                                            sources: list[NvmlSource]) -> None:
    yaml_text = """
gpus:
  - {load: {pattern: constant, value: 0.6, noise: 0},
     processes: [{pid: 1, memory_gib: 1, sm_share: 1, memory_share: 3}, {pid: 2, memory_gib: 1, sm_share: 2}]}
  - {load: {pattern: constant, value: 0.2, noise: 0}}
"""
    sim = SimulatedNvml(parse_sim_config(yaml_text, "t.yaml"), clock=clock, pcie_latency_seconds=0)
    # one background pass at start, the next an hour later
    source = make_source(sim, clock, sources, min_interval=0.0, pcie_interval=3600.0)
    wait_for(lambda: source.snapshot().devices[1].process_sm_utilization is not None)
    snapshot = source.snapshot()
    assert snapshot.devices[0].process_sm_utilization == ((1, 0.2), (2, 0.4))
    assert snapshot.devices[1].process_sm_utilization == ()  # no process: NVML says NotFound
    # memory bandwidth: 33 % (0.6 x 55 %) split 3:2 by memory_share, sampled in the same call
    assert snapshot.devices[0].process_memory_utilization == ((1, 0.2), (2, 0.13))
    assert snapshot.devices[1].process_memory_utilization == ()
    calls = sim.calls["nvmlDeviceGetProcessUtilization"]
    assert calls == 2
    for _ in range(5):
        source.snapshot()
    assert sim.calls["nvmlDeviceGetProcessUtilization"] == calls  # never on the scrape path
