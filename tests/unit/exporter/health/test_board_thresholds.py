"""Health bands from the board (`health.temperature_from_board`) and the state's reason: the GPU manager's
state names stay, the band that set a state is spelled out, and NVML's clock throttle reasons never share
its name."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from exporter.cli import main
from exporter.collector import GpuCollector
from exporter.config import ExporterConfigError, parse_config
from exporter.health.state import Bands, HealthState, HealthThresholds, board_bands, device_health
from exporter.health.state_families import HealthMetrics
from exporter.nvml.snapshots import BoardTemperatures, NodeSnapshot
from tests.scrape import collect
from tests.unit.exporter.conftest import SimFactory

SEED = HealthThresholds().temperature_celsius
H100 = BoardTemperatures(shutdown=95.0, slowdown=89.0, gpu_max=87.0)  # as the H100 80GB HBM3 answered


@pytest.mark.parametrize(("board", "expected"), [
    (H100, Bands(65, 87, 89)),
    (BoardTemperatures(shutdown=95.0, slowdown=89.0), Bands(65, 75, 89)),  # no max operating: 75 stays
    (BoardTemperatures(gpu_max=83.0), Bands(65, 83, 85)),
    (BoardTemperatures(), SEED),
    (None, SEED),
    (BoardTemperatures(slowdown=80.0, gpu_max=60.0), SEED),  # would not ascend past normal 65: configured
], ids=["h100", "no-gpu-max", "no-slowdown", "nothing-known", "not-read", "not-ascending"])
def test_board_bands(board: BoardTemperatures | None, expected: Bands) -> None:
    assert board_bands(SEED, board) == expected


def reading(celsius: float, thresholds: HealthThresholds, board: BoardTemperatures | None = H100) -> object:
    return device_health(up=True, temperature_celsius=celsius, utilization_ratio=0.5,
                         memory_used_bytes=10, memory_free_bytes=90, memory_total_bytes=100,
                         thresholds=thresholds, board=board)


@pytest.mark.parametrize(("celsius", "from_board", "state", "reason"), [
    (80, False, HealthState.THROTTLED, "temperature band 75-85C: 80C"),
    (80, True, HealthState.NORMAL, "temperature band 65-87C: 80C"),
    (88, True, HealthState.THROTTLED, "temperature band 87-89C: 88C"),
    (89, True, HealthState.THROTTLED, "temperature band 87-89C: 89C"),
    (90, True, HealthState.CRITICAL, "temperature band >89C: 90C"),
    (90, False, HealthState.CRITICAL, "temperature band >85C: 90C"),
    (50, True, HealthState.OPTIMAL, ""),
], ids=lambda v: str(v))
def test_the_reason_names_the_band_used(celsius: float, from_board: bool, state: HealthState,
                                        reason: str) -> None:
    health = reading(celsius, HealthThresholds(temperature_from_board=from_board))
    assert (health.state, health.reason) == (state, reason)  # type: ignore[attr-defined]


def test_memory_and_row_remap_reasons() -> None:
    full = device_health(up=True, temperature_celsius=50, utilization_ratio=0.5, memory_used_bytes=88,
                         memory_free_bytes=12, memory_total_bytes=100, row_remap_pending=True)
    assert (full.state, full.reason) == (HealthState.THROTTLED, "memory band 85-95%: 88%, row remap pending")


def test_the_config_and_the_flag_turn_it_on() -> None:
    assert parse_config("health:\n  temperature_from_board: true\n").health.temperature_from_board
    assert not parse_config("").health.temperature_from_board
    with pytest.raises(ExporterConfigError) as bad:
        parse_config("health:\n  temperature_from_board: maybe\n", "exporter.yaml")
    assert [(p.line, p.field) for p in bad.value.problems] == [(2, "health.temperature_from_board")]


HOT_H100 = """
pcie_latency_seconds: 0
gpus:
  - {model: H100, count: 1, load: {pattern: constant, value: 0.5, noise: 0}}
faults:
  - {type: overheat, gpu: 0, at: 0, celsius: 80}
"""


@pytest.mark.parametrize(("flags", "state", "reason"), [
    ([], "throttled", "temperature band 75-85C: 80C"),
    (["--temperature-from-board"], "normal", "temperature band 65-87C: 80C"),
], ids=["configured-bands", "board-bands"])
def test_status_of_a_simulated_h100_at_80c(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                           flags: list[str], state: str, reason: str) -> None:
    """The same 80 C H100: `throttled` by the GPU manager's bands, `normal` by the board's (87 C max
    operating), and in both cases NVML reports no clock throttled by heat."""
    sim = tmp_path / "sim.yaml"
    sim.write_text(HOT_H100)
    config = tmp_path / "exporter.yaml"
    config.write_text(f"pod_resources: {{socket: {tmp_path / 'absent.sock'}}}\n")
    assert main(["status", "--simulate-config", str(sim), "--config", str(config), "-o", "json", *flags]) == 0
    gpu = json.loads(capsys.readouterr().out)["gpus"][0]
    assert (gpu["temperature_celsius"], gpu["state"], gpu["state_reason"]) == (80, state, reason)
    assert not {"sw_thermal", "hw_thermal"} & set(gpu["clocks_event_reasons"])


class Fixed:
    def __init__(self, snapshot: NodeSnapshot) -> None:
        self.value = snapshot

    def snapshot(self) -> NodeSnapshot:
        return self.value


@pytest.mark.parametrize(("from_board", "state"), [(False, "throttled"), (True, "normal")],
                         ids=["configured-bands", "board-bands"])
def test_metrics_judge_by_the_board_s_bands_too(make_sim: SimFactory, from_board: bool, state: str) -> None:
    """gpu_health_state and gpu_speed_multiplier on /metrics take the same bands as the JSON API."""
    _, adapter = make_sim(HOT_H100)
    snapshot = adapter.read()
    assert snapshot.devices[0].temperature_celsius == 80
    health = HealthMetrics(HealthThresholds(temperature_from_board=from_board))
    found = collect(GpuCollector(Fixed(snapshot), "n", extensions=[health]))
    assert [labels["state"] for labels, value in found["gpu_health_state"] if value == 1.0] == [state]
    assert [value for _, value in found["gpu_speed_multiplier"]] == [HealthState(state).speed_multiplier]
