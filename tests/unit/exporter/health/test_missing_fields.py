"""A GPU that answers but whose reading lacks a field because an NVML call failed is judged on what it
answered: never `critical` for it, its availability never 0 for it, and the missing fields named."""

from __future__ import annotations

import pytest

from exporter.health.state import HealthState, device_health
from exporter.health.state_families import HealthMetrics
from exporter.scrape.context import ScrapeContext
from exporter.serving.status_api import gpu_json
from exporter.serving.status_service import gpu_statuses
from tests.unit.exporter.conftest import SimFactory

GIB = 1024**3


def test_a_missing_temperature_leaves_the_state_to_memory_and_names_it() -> None:
    health = device_health(up=True, temperature_celsius=None, utilization_ratio=0.5,
                           memory_used_bytes=10 * GIB, memory_free_bytes=70 * GIB,
                           memory_total_bytes=80 * GIB, missing_fields=("temperature", "power"))
    assert health.state is HealthState.OPTIMAL and health.missing_fields == ("temperature",)
    assert health.availability_score == pytest.approx(0.6 * 70 / 80 + 0.4 * 0.5)


def test_every_health_input_missing_is_no_state_and_no_score_never_critical() -> None:
    health = device_health(up=True, temperature_celsius=None, utilization_ratio=None, memory_used_bytes=None,
                           memory_free_bytes=None, memory_total_bytes=None,
                           missing_fields=("utilization", "memory_utilization", "memory", "temperature"))
    assert (health.state, health.availability_score) == (None, None)
    assert health.missing_fields == ("temperature", "memory", "utilization")


def test_power_ecc_and_energy_missing_keep_state_and_score(make_sim: SimFactory) -> None:
    _, adapter = make_sim("""
gpus: [{count: 3}]
faults:
  - {type: error, gpu: 0, calls: [nvmlDeviceGetPowerUsage], error: Unknown}
  - {type: error, gpu: 1, calls: [nvmlDeviceGetTotalEccErrors], error: CorruptedInforom}
  - {type: error, gpu: 2, calls: [nvmlDeviceGetTotalEnergyConsumption], error: NoData}
""")
    snapshot = adapter.read()
    families = {f.name: f for f in HealthMetrics().collect(snapshot, ScrapeContext("n", {}))}
    states = {s.labels["gpu"]: s.labels["state"] for s in families["gpu_health_state"].samples
              if s.value == 1}
    scores = {s.labels["gpu"]: s.value for s in families["gpu_availability_score"].samples}
    assert set(states) == set(scores) == {"0", "1", "2"}
    assert "critical" not in states.values() and all(score > 0 for score in scores.values())
    documents = [gpu_json(status) for status in gpu_statuses(snapshot)]
    assert [d["missing_fields"] for d in documents] == [["power"], ["ecc_errors"], ["energy"]]
    assert all(d["up"] and d["state"] != "critical" for d in documents)
