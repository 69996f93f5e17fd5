"""The series behind dcgm-exporter's default counters that had none: reserved framebuffer, PCIe replays,
NVLink traffic counters (NVML's raw and data throughput fields, with or without GPM), the vGPU license
(only on a vGPU), and each MIG device's free memory; through the real adapter and collector on the
simulated NVML."""

from __future__ import annotations

from exporter.nvml.snapshots import NodeSnapshot
from exporter.simulator.physics import DRIVER_RESERVED_BYTES
from exporter.source import with_background
from tests.unit.exporter.conftest import FakeClock, SimFactory
from tests.unit.exporter.test_profiling import by_gpu, scrape

FLEET = """
gpus:
  - {model: H100, load: {pattern: constant, value: 0.5, noise: 0}}
  - {model: A100, load: {pattern: constant, value: 0.5, noise: 0}}
  - {model: L4, load: {pattern: constant, value: 0.5, noise: 0}}
  - {model: H100, mig: 2, mig_profile: 3g.40gb, load: {pattern: constant, value: 0.5, noise: 0}}
"""


def test_reserved_memory_replays_nvlink_traffic_and_mig_free_memory(make_sim: SimFactory,
                                                                     clock: FakeClock) -> None:
    sim, adapter = make_sim(FLEET)
    sim.add_pcie_replays(1, 7)

    def sweep() -> NodeSnapshot:
        readings = {i: adapter.read_background(i) for i in range(adapter.device_count)}
        snapshot = adapter.read()
        return NodeSnapshot(**{**snapshot.__dict__, "devices": tuple(
            with_background(d, readings[d.index]) for d in snapshot.devices)})

    first = scrape(sweep())
    clock.advance(10)
    samples = scrape(sweep())
    reserved = by_gpu(samples, "gpu_memory_reserved_bytes")
    assert reserved == {gpu: float(DRIVER_RESERVED_BYTES) for gpu in "0123"}
    used, free, total = (by_gpu(samples, f"gpu_memory_{k}_bytes") for k in ("used", "free", "total"))
    assert used["0"] == total["0"] - free["0"] >= reserved["0"]  # used still counts the reserved memory
    assert by_gpu(samples, "gpu_pcie_replays_total") == {"0": 0.0, "1": 7.0, "2": 0.0, "3": 0.0}
    traffic = {(labels["gpu"], labels["direction"]): v for labels, v in samples["gpu_nvlink_bytes_total"]}
    before = {(labels["gpu"], labels["direction"]): v for labels, v in first["gpu_nvlink_bytes_total"]}
    assert set(traffic) == {(g, d) for g in "013" for d in ("tx", "rx")}  # every NVLink GPU, GPM or not
    # 10 s at half load: tx is 30 % of 450 GB/s, rx 25 %, in whole KiB per link
    assert traffic[("1", "tx")] - before[("1", "tx")] > 0
    expected = 450e9 * 0.3 * 0.5 * 10
    assert abs(traffic[("0", "tx")] - before[("0", "tx")] - expected) < expected * 1e-3
    assert traffic[("0", "rx")] < traffic[("0", "tx")]
    # the payload alone (NVML's data fields, what DCGM's NVLink bandwidth is made of): 90 % of the raw traffic
    payload, payload_before = ({(labels["gpu"], labels["direction"]): v
                                for labels, v in found["gpu_nvlink_data_bytes_total"]}
                               for found in (samples, first))
    assert set(payload) == set(traffic)
    for key in traffic:
        grown = payload[key] - payload_before[key]
        assert abs(grown - 0.9 * (traffic[key] - before[key])) < expected * 1e-3, key
    assert "gpu_vgpu_license_status" not in samples  # bare metal: absent, never 0
    mig_free = {labels["gpu_instance_id"]: v for labels, v in samples["gpu_mig_memory_free_bytes"]}
    mig_used = {labels["gpu_instance_id"]: v for labels, v in samples["gpu_mig_memory_used_bytes"]}
    mig_total = {labels["gpu_instance_id"]: v for labels, v in samples["gpu_mig_memory_total_bytes"]}
    assert set(mig_free) == {"1", "2"}
    assert all(mig_free[gi] + mig_used[gi] == mig_total[gi] for gi in mig_free)


def test_the_vgpu_license_is_served_only_on_a_vgpu(make_sim: SimFactory, clock: FakeClock) -> None:
    sim, adapter = make_sim(FLEET)
    sim.set_vgpu_license(2, False)
    sim.set_vgpu_license(3, True)
    readings = [adapter.read_background(i) for i in range(4)]
    assert [r.reliability.vgpu_licensed if r else "none" for r in readings] == [None, None, False, True]
