"""Physics of one simulated GPU: utilization from its load, power, lagged temperature, clocks, energy.

Kept apart from exporter/simulated.py (the pynvml call surface) so each stays small; state is advanced lazily
to the simulated time of each NVML call.
"""

from __future__ import annotations

import hashlib
import math

from exporter.simconfig import ProcessSpec, SimGpuSpec

AMBIENT_CELSIUS = 28.0
CELSIUS_PER_WATT = 0.075  # H100 at 700 W settles near 80 C
THERMAL_TAU_SECONDS = 30.0
HW_THERMAL_CELSIUS = 87.0
DRIVER_RESERVED_BYTES = 535 * 1024 * 1024
IDLE_SM_MHZ = 345


class SimGpu:
    """Physical state of one simulated GPU, advanced lazily to the time of each call."""

    def __init__(self, index: int, spec: SimGpuSpec, seed: int, t0: float) -> None:
        self.index = index
        self.spec = spec
        self.seed = seed
        self.uuid = gpu_uuid(seed, index)
        self.pci_bus_id = f"00000000:{0x18 + 0x10 * index:02X}:00.0"
        self.utilization_override: float | None = None
        self.processes_override: tuple[ProcessSpec, ...] | None = None
        self.lost = False
        self.ecc_corrected = 0
        self.ecc_uncorrected = 0
        self.last_t = t0
        self.energy_mj = 0.0
        self.temperature = self._temperature_target(self.power_watts(t0))

    def utilization(self, t: float) -> float:
        if self.utilization_override is not None:
            return self.utilization_override
        pattern = self.spec.load
        return min(max(pattern.at(t) + pattern.noise * smooth_noise(self.seed, self.index, t), 0.0), 1.0)

    def processes(self) -> tuple[ProcessSpec, ...]:
        return self.spec.processes if self.processes_override is None else self.processes_override

    def demand_watts(self, t: float) -> float:
        model = self.spec.model
        return model.idle_power_watts + (1.08 * model.power_limit_watts - model.idle_power_watts) * (
            self.utilization(t) ** 0.85)

    def power_watts(self, t: float) -> float:
        return min(self.demand_watts(t), self.spec.model.power_limit_watts)

    def _temperature_target(self, watts: float) -> float:
        scale = (700.0 / max(self.spec.model.power_limit_watts, 1.0)) ** 0.3  # small boards run hotter per W
        return AMBIENT_CELSIUS + CELSIUS_PER_WATT * watts * scale

    def advance(self, t: float) -> None:
        dt = t - self.last_t
        if dt <= 0:
            return
        watts = self.power_watts(t)
        self.energy_mj += watts * dt * 1000.0
        target = self._temperature_target(watts)
        self.temperature = target + (self.temperature - target) * math.exp(-dt / THERMAL_TAU_SECONDS)
        self.last_t = t

    def reasons(self, t: float) -> int:
        util = self.utilization(t)
        mask = 0x1 if util < 0.02 else 0
        if self.demand_watts(t) > self.spec.model.power_limit_watts:
            mask |= 0x4
        if self.temperature >= HW_THERMAL_CELSIUS:
            mask |= 0x40
        return mask

    def sm_clock_mhz(self, t: float) -> int:
        model = self.spec.model
        if self.utilization(t) < 0.02:
            return IDLE_SM_MHZ
        clock = float(model.sm_clock_max_mhz)
        demand = self.demand_watts(t)
        if demand > model.power_limit_watts:
            clock *= max(model.power_limit_watts / demand, 0.6)
        if self.temperature >= HW_THERMAL_CELSIUS:
            clock *= 0.7
        return int(clock)

    def memory_used(self, t: float) -> int:
        util = self.utilization(t)
        used = DRIVER_RESERVED_BYTES + sum(process_memory(p, util) for p in self.processes())
        return min(used, self.spec.model.memory_bytes)


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
