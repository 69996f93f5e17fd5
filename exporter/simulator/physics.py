"""Physics of one simulated GPU: utilization from its load, power, lagged temperature, clocks, energy.

Kept apart from exporter/simulator/nvml.py (the pynvml call surface) so each stays small; state is advanced
lazily to the simulated time of each NVML call. An overheat (the `overheat` fault or the driver's
`set_overheat`) raises the temperature the GPU settles at, as a failed fan or blocked airflow would; past the
thermal thresholds the GPU throttles like a real one: sw_thermal, then hw_thermal, lower SM clocks and power.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Sequence
from dataclasses import dataclass, field

from exporter.simulator.config import (
    MAX_OVERHEAT_CELSIUS,
    MIN_OVERHEAT_CELSIUS,
    Fault,
    ProcessSpec,
    SimGpuSpec,
)
from exporter.simulator.models import MigInstance

CELSIUS_PER_WATT = 0.075  # a generic board's heating (models.Thermal with celsius_per_watt None)
THERMAL_TAU_SECONDS = 30.0
SW_THERMAL_CELSIUS = 87.0  # the driver's slowdown (max operating temperature): sw_thermal, clocks x 0.75
HW_THERMAL_CELSIUS = 90.0  # the board's hardware slowdown: hw_thermal too, clocks halved
# (the last two where the model answers no threshold of its own; models.Thermal has each board's)
SW_THERMAL_CLOCK_FACTOR = 0.75
HW_THERMAL_CLOCK_FACTOR = 0.5
HOT_STEP_SECONDS = 1.0
DRIVER_RESERVED_BYTES = 535 * 1024 * 1024
IDLE_SM_MHZ = 345
MEMORY_BUSY_PER_SM_BUSY = 0.55  # the memory interface is busy 55 % of the time kernels run


@dataclass
class Reliability:
    """Row remapping, retired pages and NVLink state of one GPU, as the load driver (or a fault) set them."""

    remapped_correctable: int = 0
    remapped_uncorrectable: int = 0
    remap_pending: bool = False
    remap_failed: bool = False
    retired_pages: dict[int, list[int]] = field(default_factory=lambda: {0: [], 1: []})  # cause -> addresses
    links_down: set[int] = field(default_factory=set)
    link_errors: dict[tuple[int, int], int] = field(default_factory=dict)  # (link, NVML counter) -> count


class SimGpu:
    """Physical state of one simulated GPU, advanced lazily to the time of each call."""

    def __init__(self, index: int, spec: SimGpuSpec, seed: int, t0: float,
                 faults: Sequence[Fault] = ()) -> None:
        self.index = index
        self.spec = spec
        self.seed = seed
        self.uuid = gpu_uuid(seed, index)
        self.pci_bus_id = f"00000000:{0x18 + 0x10 * index:02X}:00.0"
        self.utilization_override: float | None = None
        self.processes_override: tuple[ProcessSpec, ...] | None = None
        self.overheat_override: float | None = None
        self.overheats = tuple(f for f in faults if f.type == "overheat" and f.applies_to(index))
        self.lost = False
        self.mig = spec.mig  # MIG mode on (the layout it was last partitioned to) or None: MIG off
        self.mig_generation = 0  # bumped on every layout change (the UUIDs of a new layout are new)
        self.mig_instances: tuple[MigInstance, ...] = ()  # the GPU instances now, by GPU instance id
        self.ecc_corrected = 0
        self.ecc_uncorrected = 0
        self.reliability = Reliability()
        self.power_violation_ns = 0.0  # time the power cap held the clocks down (violation status)
        self.thermal_violation_ns = 0.0  # time heat held the clocks down
        self.last_t = t0
        self.energy_mj = 0.0
        self.busy_seconds = 0.0  # the integral of utilization over time: drives the traffic counters
        self.pcie_replays = 0  # nvmlDeviceGetPcieReplayCounter (the load driver adds to it)
        self.vgpu_licensed: bool | None = None  # None: not a vGPU (no licensable feature), as on bare metal
        self.temperature = 0.0  # settled below: a GPU starts at its steady temperature
        self.temperature = self._temperature_target(self.power_watts(t0), t0)

    def utilization(self, t: float) -> float:
        if self.utilization_override is not None:
            return self.utilization_override
        pattern = self.spec.load
        return min(max(pattern.at(t) + pattern.noise * smooth_noise(self.seed, self.index, t), 0.0), 1.0)

    def processes(self) -> tuple[ProcessSpec, ...]:
        return self.spec.processes if self.processes_override is None else self.processes_override

    def demand_watts(self, t: float) -> float:
        model = self.spec.model
        busy: float = self.utilization(t) ** 0.85
        return model.idle_power_watts + (1.08 * model.power_limit_watts - model.idle_power_watts) * busy

    def power_watts(self, t: float) -> float:
        """Capped by the power limit, and lower when heat holds the clocks down."""
        idle = self.spec.model.idle_power_watts
        capped = min(self.demand_watts(t), self.spec.model.power_limit_watts)
        factor = self.thermal_clock_factor()
        return idle + (capped - idle) * factor if factor < 1.0 and capped > idle else capped

    def overheat_celsius(self, t: float) -> float | None:
        """The temperature an active overheat drives this GPU to (the hottest one if several), else None."""
        levels = [f.celsius for f in self.overheats if f.active(t)]
        if self.overheat_override is not None:
            levels.append(self.overheat_override)
        return max(levels, default=None)

    def set_overheat(self, celsius: float | None, t: float) -> None:
        if celsius is not None and not MIN_OVERHEAT_CELSIUS <= celsius <= MAX_OVERHEAT_CELSIUS:
            raise ValueError(f"celsius must be within {MIN_OVERHEAT_CELSIUS:g}..{MAX_OVERHEAT_CELSIUS:g} "
                             f"(got {celsius})")
        self.advance(t)
        self.overheat_override = celsius

    @property
    def sw_thermal_celsius(self) -> float:
        return self.spec.model.thermal.gpu_max_celsius or SW_THERMAL_CELSIUS

    @property
    def hw_thermal_celsius(self) -> float:
        return self.spec.model.thermal.slowdown_celsius or HW_THERMAL_CELSIUS

    def _temperature_target(self, watts: float, t: float) -> float:
        thermal = self.spec.model.thermal
        per_watt = thermal.celsius_per_watt
        if per_watt is None:  # small boards run hotter per W
            per_watt = CELSIUS_PER_WATT * (700.0 / max(self.spec.model.power_limit_watts, 1.0)) ** 0.3
        target = thermal.ambient_celsius + per_watt * watts
        heat = self.overheat_celsius(t)  # an overheat below the normal temperature changes nothing
        return target if heat is None else max(target, heat)

    def advance(self, t: float) -> None:
        if t <= self.last_t:
            return
        # an overheat starting or ending inside the step changes the target there, not at the step's end
        edges = sorted({e for f in self.overheats for e in (f.at, f.until)
                        if e is not None and self.last_t < e < t})
        start = self.last_t
        for end in (*edges, t):
            self._integrate(start, end, t)
            start = end
        self.last_t = t

    def _integrate(self, start: float, end: float, t: float) -> None:
        """Energy and temperature over [start, end] (no overheat edge inside; load as of `t`). Near the
        thermal thresholds power depends on the temperature, so that stretch goes in short sub-steps."""
        middle = (start + end) / 2
        while start < end:
            watts = self.power_watts(t)
            target = self._temperature_target(watts, middle)
            hot = max(self.temperature, target) >= self.sw_thermal_celsius
            step = min(end - start, HOT_STEP_SECONDS) if hot else end - start
            self.energy_mj += watts * step * 1000.0
            self.busy_seconds += self.utilization(t) * step
            if self.thermal_clock_factor() < 1.0:
                self.thermal_violation_ns += step * 1e9
            elif self.demand_watts(t) > self.spec.model.power_limit_watts:
                self.power_violation_ns += step * 1e9
            tau = self.spec.model.thermal.tau_seconds
            self.temperature = target + (self.temperature - target) * math.exp(-step / tau)
            start += step

    def thermal_clock_factor(self) -> float:
        if self.temperature >= self.hw_thermal_celsius:
            return HW_THERMAL_CLOCK_FACTOR
        return SW_THERMAL_CLOCK_FACTOR if self.temperature >= self.sw_thermal_celsius else 1.0

    def reasons(self, t: float) -> int:
        util = self.utilization(t)
        mask = 0x1 if util < 0.02 else 0
        thermal = self.thermal_clock_factor() < 1.0
        if self.demand_watts(t) > self.spec.model.power_limit_watts and not thermal:
            mask |= 0x4  # under thermal slowdown the heat, not the power limit, holds the clocks
        if self.temperature >= self.sw_thermal_celsius:
            mask |= 0x20
        if self.temperature >= self.hw_thermal_celsius:
            mask |= 0x40
        return mask

    def sm_clock_mhz(self, t: float) -> int:
        model = self.spec.model
        if self.utilization(t) < 0.02:
            return IDLE_SM_MHZ
        clock = float(model.sm_clock_max_mhz)
        demand = self.demand_watts(t)
        power_factor = max(model.power_limit_watts / demand, 0.6) if demand > model.power_limit_watts else 1.0
        return max(int(clock * min(power_factor, self.thermal_clock_factor())), IDLE_SM_MHZ)

    def memory_used(self, t: float) -> int:
        util = self.utilization(t)
        used = DRIVER_RESERVED_BYTES + sum(process_memory(p, util) for p in self.processes())
        return min(used, self.spec.model.memory_bytes)


def utilization_percents(utilization: float) -> tuple[int, int]:
    """nvmlDeviceGetUtilizationRates' whole percents: (gpu, memory) at this load."""
    return round(utilization * 100), round(utilization * 100 * MEMORY_BUSY_PER_SM_BUSY)


def apportion(total: int, weights: Sequence[float]) -> list[int]:
    """`total` whole percent split by `weights` (largest remainder): the parts add up to `total`, so the
    processes time-slicing a GPU account for its whole utilization, as NVML's per-process samples do."""
    weight = sum(weights)
    if weight <= 0:
        return [0] * len(weights)
    exact = [total * w / weight for w in weights]
    parts = [math.floor(x) for x in exact]
    by_remainder = sorted(range(len(parts)), key=lambda i: exact[i] - parts[i], reverse=True)
    for i in by_remainder[:total - sum(parts)]:
        parts[i] += 1
    return parts


def process_memory(process: ProcessSpec, utilization: float) -> int:
    """A serving process holds most of its memory always and grows its caches with load."""
    return int(process.memory_bytes * (0.85 + 0.15 * utilization))


def gpu_uuid(seed: int, index: int) -> str:
    digest = hashlib.sha256(f"simulated-gpu:{seed}:{index}".encode()).hexdigest()
    return f"GPU-{digest[:8]}-{digest[8:12]}-{digest[12:16]}-{digest[16:20]}-{digest[20:32]}"


def smooth_noise(seed: int, index: int, t: float) -> float:
    """Deterministic noise in -1..1, linear between whole simulated seconds."""
    k = math.floor(t)

    def at(n: int) -> float:
        x = math.sin(seed * 12.9898 + index * 78.233 + n * 37.719) * 43758.5453
        return 2.0 * (x - math.floor(x)) - 1.0

    frac = t - k
    return at(k) * (1 - frac) + at(k + 1) * frac
