"""`--simulate N`'s fleet looks like a real cluster to `gpu-fleet select`: idle and lightly used GPUs it can
choose with its defaults beside a busy one it leaves out, at every moment of the load's period."""

from __future__ import annotations

from exporter.health.state import device_health
from exporter.nvml.snapshots import DeviceSnapshot
from fleet.placing.inventory import Gpu
from fleet.placing.selection import Exclusion, Request, exclusion, select
from tests.unit.exporter.conftest import FakeClock, SimFactory

PERIOD_SECONDS = 300  # the default fleet's sine period
STEP_SECONDS = 5  # as often as the try-without-a-cluster Prometheus scrapes


def as_fleet_sees_it(device: DeviceSnapshot) -> Gpu:
    """The GPU as gpu-fleet reads it from Prometheus: the exporter's readings and its health state."""
    health = device_health(up=device.up, temperature_celsius=device.temperature_celsius,
                           utilization_ratio=device.utilization, memory_used_bytes=device.memory_used_bytes,
                           memory_free_bytes=device.memory_free_bytes,
                           memory_total_bytes=device.memory_total_bytes)
    return Gpu("node", str(device.index), device.uuid, device.name, up=device.up,
               utilization=device.utilization, memory_used=device.memory_used_bytes,
               memory_free=device.memory_free_bytes, memory_total=device.memory_total_bytes,
               temperature=device.temperature_celsius, health=str(health.state) if health.state else None,
               score=health.availability_score)


def looks(make_sim: SimFactory, clock: FakeClock, gpus: int) -> list[list[Gpu]]:
    """The fleet every STEP_SECONDS over three periods of its load."""
    _, adapter = make_sim(gpus=gpus)
    seen = []
    for _ in range(3 * PERIOD_SECONDS // STEP_SECONDS):
        clock.advance(STEP_SECONDS)
        seen.append([as_fleet_sees_it(device) for device in adapter.read().devices])
    return seen


def test_select_finds_two_gpus_on_simulate_2_at_any_time(make_sim: SimFactory, clock: FakeClock) -> None:
    for fleet in looks(make_sim, clock, gpus=2):
        selection = select(fleet, Request(gpus=2, same_node=True))
        assert selection.ok, selection.summary()


def test_a_larger_fleet_has_a_busy_gpu_too(make_sim: SimFactory, clock: FakeClock) -> None:
    """Not every GPU idles: the third one's load crosses select's default 50 % and comes back."""
    reasons = [[exclusion(gpu, Request(gpus=1)) for gpu in fleet] for fleet in looks(make_sim, clock, gpus=3)]
    assert any(Exclusion.BUSY in fleet for fleet in reasons)
    assert any(fleet[2] is None for fleet in reasons)
    assert all(fleet[:2] == [None, None] for fleet in reasons)
