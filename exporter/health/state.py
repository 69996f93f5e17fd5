"""GPU health state, speed multiplier and availability score: pure functions of one GPU reading.

The thresholds and the score are the ones our users know from the GPU manager and scheduling tools they run
today. Boundaries (the same rule for temperature in °C and memory use in %):

    value < normal                   -> optimal    (speed 1.0)
    normal <= value < throttled      -> normal     (speed 0.8)
    throttled <= value <= critical   -> throttled  (speed 0.5)
    value > critical                 -> critical   (speed 0.0)

so with the defaults 64.9 °C is optimal, 65 normal, 75 throttled, 85 still throttled, 85.1 critical; memory
69.9 % optimal, 70 normal, 85 throttled, 95 throttled, 95.1 critical. The GPU's state is the worse of the two.
Row remapping sets a floor under it: a remap pending (it takes effect at the next GPU reset; until then the
faulty row is in use) makes the GPU at least `throttled`, a failed remap (no spare row left) `critical`.

Every state but optimal carries its causes (`StateCause`): which of these rules set it. The state names are
the GPU manager's, kept for the tools that read them: a `throttled` GPU is one whose temperature or memory
use sits in the throttled *band*, not one whose clocks NVML slowed (NVML's clock throttle reasons, the
clocks-event reasons). So a cause is named `temperature_band` / `memory_band` and `state_reason` spells the
band out ("temperature band 75-85C: 78C"), and the surfaces name NVML's reasons as NVML's.

With `HealthThresholds.temperature_from_board` the temperature bands follow the board where NVML knows its
thresholds (`board_bands`): throttled from its maximum operating temperature, critical above its slowdown
temperature (the H100: normal 65, throttled 87, critical 89).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum

from exporter.nvml.snapshots import BoardTemperatures, DeviceSnapshot


class HealthState(StrEnum):
    """Ordered from best to worst; the values are the `state` label values of gpu_health_state."""

    OPTIMAL = "optimal"
    NORMAL = "normal"
    THROTTLED = "throttled"
    CRITICAL = "critical"

    @property
    def severity(self) -> int:
        return _ORDER.index(self)

    @property
    def speed_multiplier(self) -> float:
        return SPEED_MULTIPLIERS[self]


_ORDER = (HealthState.OPTIMAL, HealthState.NORMAL, HealthState.THROTTLED, HealthState.CRITICAL)

# How fast work should run in each state: full, reduced, half, paused.
SPEED_MULTIPLIERS: dict[HealthState, float] = {
    HealthState.OPTIMAL: 1.0,
    HealthState.NORMAL: 0.8,
    HealthState.THROTTLED: 0.5,
    HealthState.CRITICAL: 0.0,
}

class StateCause(StrEnum):
    """A rule that set a GPU's state: a quantity in that state's band, or the GPU being down."""

    TEMPERATURE = "temperature_band"  # the temperature sits in the state's band (not NVML's clock throttling)
    MEMORY = "memory_band"
    DOWN = "down"  # gpu_up 0: lost, failing, or marked down after XID 79/48 (the GPU's error says which)
    ROW_REMAP = "row_remap"  # a row remap pending (at least throttled) or failed (critical)


# The state of a GPU that does not answer (gpu_up 0): it can run nothing.
DOWN_STATE = HealthState.CRITICAL
# The readings health is derived from, by the names DeviceSnapshot.missing_fields gives them.
HEALTH_INPUTS = ("temperature", "memory", "utilization")


@dataclass(frozen=True)
class Bands:
    """Three ascending thresholds of one quantity; see the module doc for which side is which state."""

    normal: float
    throttled: float
    critical: float

    def __post_init__(self) -> None:
        values = (self.normal, self.throttled, self.critical)
        if not all(math.isfinite(v) for v in values) or not self.normal < self.throttled < self.critical:
            raise ValueError(f"expected finite normal < throttled < critical (got {values})")

    def band(self, state: HealthState) -> str:
        """The band of `state` in this quantity's unit-less numbers: `<65`, `65-75`, `75-85`, `>85`."""
        edges = {HealthState.OPTIMAL: f"<{self.normal:g}",
                 HealthState.NORMAL: f"{self.normal:g}-{self.throttled:g}",
                 HealthState.THROTTLED: f"{self.throttled:g}-{self.critical:g}",
                 HealthState.CRITICAL: f">{self.critical:g}"}
        return edges[state]

    def state(self, value: float) -> HealthState:
        if value > self.critical:
            return HealthState.CRITICAL
        if value >= self.throttled:
            return HealthState.THROTTLED
        if value >= self.normal:
            return HealthState.NORMAL
        return HealthState.OPTIMAL


@dataclass(frozen=True)
class HealthThresholds:
    """Temperature in °C, memory use in percent of total; defaults from the GPU manager's state table."""

    temperature_celsius: Bands = Bands(normal=65.0, throttled=75.0, critical=85.0)
    memory_percent: Bands = Bands(normal=70.0, throttled=85.0, critical=95.0)
    # The temperature bands follow the board's own thresholds where NVML gives them (board_bands).
    temperature_from_board: bool = False

    def temperature_for(self, board: BoardTemperatures | None) -> Bands:
        """The temperature bands for one GPU: the configured ones, or the board's (see board_bands)."""
        return board_bands(self.temperature_celsius, board) if self.temperature_from_board else \
            self.temperature_celsius


def board_bands(configured: Bands, board: BoardTemperatures | None) -> Bands:
    """`throttled` from the board's maximum operating temperature (where the driver starts slowing the
    clocks), `critical` above its slowdown temperature (where the hardware does); `normal` stays the
    configured one. A threshold the board does not give keeps the configured value; bands that would not
    ascend (a board whose max operating temperature is below the configured `normal`) keep the configured
    bands whole."""
    if board is None:
        return configured
    throttled = configured.throttled if board.gpu_max is None else board.gpu_max
    critical = configured.critical if board.slowdown is None else board.slowdown
    if not configured.normal < throttled < critical:
        return configured
    return Bands(normal=configured.normal, throttled=throttled, critical=critical)


@dataclass(frozen=True)
class HealthAssessment:
    state: HealthState
    speed_multiplier: float
    temperature_state: HealthState | None  # None: temperature not readable on this GPU
    memory_state: HealthState | None  # None: memory not readable
    causes: tuple[StateCause, ...] = ()  # the readings in the state's band; () when optimal


def memory_used_percent(used_bytes: int | None, total_bytes: int | None) -> float | None:
    """Used memory in percent of total; None when either is unknown or total is not positive."""
    if used_bytes is None or total_bytes is None or total_bytes <= 0:
        return None
    return 100.0 * used_bytes / total_bytes


def assess(
    temperature_celsius: float | None,
    memory_percent: float | None,
    thresholds: HealthThresholds | None = None,
    board: BoardTemperatures | None = None,
) -> HealthAssessment | None:
    """The worse of the temperature and memory states; a missing reading is left out of the comparison.

    None when neither is known (the health series are then left out, never reported as optimal).
    """
    thresholds = thresholds or HealthThresholds()
    temperature_state = (thresholds.temperature_for(board).state(temperature_celsius)
                         if temperature_celsius is not None and _known(temperature_celsius) else None)
    memory_state = (thresholds.memory_percent.state(memory_percent)
                    if memory_percent is not None and _known(memory_percent) else None)
    states = [s for s in (temperature_state, memory_state) if s is not None]
    if not states:
        return None
    worst = max(states, key=lambda s: s.severity)
    readings = ((StateCause.TEMPERATURE, temperature_state), (StateCause.MEMORY, memory_state))
    causes = () if worst is HealthState.OPTIMAL else tuple(c for c, state in readings if state is worst)
    return HealthAssessment(
        state=worst,
        speed_multiplier=worst.speed_multiplier,
        temperature_state=temperature_state,
        memory_state=memory_state,
        causes=causes,
    )


def availability_score(
    memory_free_bytes: int | None, memory_total_bytes: int | None, utilization_ratio: float | None
) -> float | None:
    """`0.6 * free/total + 0.4 * (1 - utilization)`, clamped to 0..1 (utilization as a 0..1 ratio).

    60 % weight on free memory, 40 % on idle compute, as the scheduling tools our users run rank GPUs.
    None when any input is unknown or total memory is not positive.
    """
    if memory_free_bytes is None or memory_total_bytes is None or memory_total_bytes <= 0:
        return None
    if not _known(utilization_ratio):
        return None
    assert utilization_ratio is not None
    free = min(max(memory_free_bytes / memory_total_bytes, 0.0), 1.0)
    idle = min(max(1.0 - utilization_ratio, 0.0), 1.0)
    return min(max(0.6 * free + 0.4 * idle, 0.0), 1.0)


@dataclass(frozen=True)
class DeviceHealth:
    """The derived values of one GPU reading, the same on /metrics and in the status API."""

    state: HealthState | None  # None: the GPU answers but neither temperature nor memory is readable
    availability_score: float | None  # None: free memory, total memory or utilization unknown
    memory_used_percent: float | None
    causes: tuple[StateCause, ...] = ()  # what set `state` (see StateCause); () when optimal or unknown
    reason: str = ""  # the causes for people: "temperature band 75-85C: 78C"; "" when optimal or unknown
    # HEALTH_INPUTS that an NVML error left out of this reading: the state and score stand on the others (or
    # are None), never `critical` for a GPU that answers
    missing_fields: tuple[str, ...] = ()

    @property
    def speed_multiplier(self) -> float | None:
        return None if self.state is None else self.state.speed_multiplier


def device_health(
    *,
    up: bool,
    temperature_celsius: float | None,
    utilization_ratio: float | None,
    memory_used_bytes: int | None,
    memory_free_bytes: int | None,
    memory_total_bytes: int | None,
    thresholds: HealthThresholds | None = None,
    row_remap_pending: bool = False,
    row_remap_failed: bool = False,
    missing_fields: Sequence[str] = (),
    board: BoardTemperatures | None = None,
) -> DeviceHealth:
    """A GPU that is down is DOWN_STATE (speed 0) with availability score 0: it must be seen leaving the
    pool, not vanish from it. A pending row remap makes the state at least throttled, a failed one critical
    (cause ROW_REMAP, beside any reading in the same band). `missing_fields` names the readings an NVML
    error left out of this sweep (DeviceSnapshot.missing_fields): an up GPU is judged on what it answered,
    and the HEALTH_INPUTS among them are named on the result and in its reason. `board` is the GPU's own
    temperature thresholds, used when `thresholds.temperature_from_board` says so."""
    percent = memory_used_percent(memory_used_bytes, memory_total_bytes)
    if not up:
        return DeviceHealth(DOWN_STATE, 0.0, percent, (StateCause.DOWN,), reason="down")
    missing = tuple(field for field in HEALTH_INPUTS if field in missing_fields)
    thresholds = thresholds or HealthThresholds()
    health = assess(temperature_celsius, percent, thresholds, board)
    score = availability_score(memory_free_bytes, memory_total_bytes, utilization_ratio)
    state, causes = (None, ()) if health is None else (health.state, health.causes)
    floor = HealthState.CRITICAL if row_remap_failed else HealthState.THROTTLED if row_remap_pending else None
    if floor is not None and (state is None or state.severity < floor.severity):
        state, causes = floor, (StateCause.ROW_REMAP,)
    elif floor is not None and state is floor:
        causes = (*causes, StateCause.ROW_REMAP)
    reasons = [] if state is None else [_cause_text(
        cause, state, thresholds.temperature_for(board), thresholds.memory_percent, temperature_celsius,
        percent, row_remap_failed) for cause in causes]
    if missing:
        reasons.append(f"not read this sweep: {', '.join(missing)}")
    return DeviceHealth(state, score, percent, causes, reason=", ".join(reasons), missing_fields=missing)


def snapshot_health(device: DeviceSnapshot, thresholds: HealthThresholds | None = None) -> DeviceHealth:
    """`device_health` of one GPU of a sweep: the one place a snapshot's fields become the health inputs, for
    /metrics (exporter/health/state_families.py) and the status API alike."""
    return device_health(
        up=device.up, temperature_celsius=device.temperature_celsius, utilization_ratio=device.utilization,
        memory_used_bytes=device.memory_used_bytes, memory_free_bytes=device.memory_free_bytes,
        memory_total_bytes=device.memory_total_bytes, thresholds=thresholds,
        row_remap_pending=bool(device.row_remap and device.row_remap.pending),
        row_remap_failed=bool(device.row_remap and device.row_remap.failed),
        missing_fields=device.missing_fields, board=device.board_temperatures)


def _cause_text(cause: StateCause, state: HealthState, temperature_bands: Bands, memory_bands: Bands,
                temperature_celsius: float | None, percent: float | None, row_remap_failed: bool) -> str:
    """One cause for people, with the band that set the state: `temperature band 75-85C: 78C`."""
    if cause is StateCause.TEMPERATURE:
        return f"temperature band {temperature_bands.band(state)}C: {_whole(temperature_celsius)}C"
    if cause is StateCause.MEMORY:
        return f"memory band {memory_bands.band(state)}%: {_whole(percent)}%"
    if cause is StateCause.ROW_REMAP:
        return "row remap failed" if row_remap_failed else "row remap pending"
    return cause.value


def _whole(value: float | None) -> str:
    return "?" if value is None else f"{value:.0f}"


def _known(value: float | None) -> bool:
    return value is not None and math.isfinite(value)
