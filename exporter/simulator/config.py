"""The simulated GPU fleet's configuration: GPU models, load patterns, processes and injected faults, as
frozen dataclasses, with the bounds every value is held to.

`--simulate N` uses `default_config(N)`; `--simulate-config FILE` is read into these types by
exporter/simulator/config_file.py (the YAML format documented in README.md, "The simulated backend and
--simulate-config"). Kept apart from the reading: the simulator uses only these types, never the reader.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from exporter.errors import ConfigError
from exporter.simulator.models import MODELS, GpuModel, MigLayout

GIB = 1024**3
MIB = 1024**2
MAX_SIMULATED_GPUS = 64  # per node: `--simulate N` and a --simulate-config file alike
# Upper bounds, so no value overflows later (a sleep, a byte count, time arithmetic): docs/hardening.md
MAX_SECONDS = 365 * 86_400.0  # periods, phases, durations, fault times: one year of simulated time
MAX_PCIE_LATENCY_SECONDS = 10.0  # slept on every PCIe sample
MAX_PID = 4_194_304  # Linux's PID_MAX_LIMIT
MAX_MEMORY_GIB = 1024.0  # per process; no GPU holds a TiB
MAX_SM_SHARE = 1000.0
MAX_SEED = 2**64 - 1
MAX_XID = 65_535
MAX_LIST_ITEMS = 1000  # faults, and processes per GPU group
MAX_NVLINKS = 18  # links of the largest simulated model (H100)
OLDEST_DRIVER = 450  # the oldest driver branch the simulator models (R450: the first with MIG)


PATTERNS = ("constant", "sine", "square", "ramp")
FAULT_TYPES = ("gpu_lost", "not_supported", "function_not_found", "error", "xid", "nvml_unavailable",
               "overheat", "row_remap_pending", "row_remap_failed", "nvlink_down", "mig_layout", "mig_create",
               "mig_destroy")
CALL_FAULT_TYPES = ("not_supported", "function_not_found", "error")  # faults that name NVML calls
MIN_OVERHEAT_CELSIUS, MAX_OVERHEAT_CELSIUS = 30.0, 120.0
NVML_UNAVAILABLE_ERRORS = ("LibraryNotFound", "DriverNotLoaded", "LibRmVersionMismatch")
# pynvml's NVMLError_<name> an `error` fault raises from the calls it names (the library-wide ones are the
# nvml_unavailable fault's): NotSupported / NoPermission leave a field out for the session, GpuIsLost /
# ResetRequired / GpuNotFound / Uninitialized (the board gone, a driver reloaded) mark the GPU down, the
# others leave that call's values out while they last (docs/exporter.md, "NVML errors").
ERROR_FAULT_ERRORS = ("Unknown", "NoPermission", "NotSupported", "GpuIsLost", "ResetRequired", "GpuNotFound",
                      "Uninitialized", "InsufficientPower", "IrqIssue", "CorruptedInforom", "OperatingSystem",
                      "Memory", "NoData", "NotReady", "Timeout", "InvalidArgument", "NotFound")


@dataclass(frozen=True)
class LoadPattern:
    """Target utilization (0..1) as a function of simulated seconds; `noise` adds smooth jitter."""

    kind: str = "sine"
    value: float = 0.5
    base: float = 0.55
    amplitude: float = 0.3
    low: float = 0.1
    high: float = 0.9
    period_seconds: float = 300.0
    duty: float = 0.5
    phase_seconds: float = 0.0
    start: float = 0.0
    end: float = 1.0
    duration_seconds: float = 600.0
    noise: float = 0.03

    def at(self, t: float) -> float:
        t = t + self.phase_seconds
        if self.kind == "constant":
            value = self.value
        elif self.kind == "sine":
            value = self.base + self.amplitude * math.sin(2 * math.pi * t / self.period_seconds)
        elif self.kind == "square":
            value = self.high if (t % self.period_seconds) < self.duty * self.period_seconds else self.low
        else:  # ramp
            value = self.start + (self.end - self.start) * min(max(t / self.duration_seconds, 0.0), 1.0)
        return min(max(value, 0.0), 1.0)


@dataclass(frozen=True)
class ProcessSpec:
    """A compute process on a simulated GPU: pid, memory it holds at full load, weight of its share of the
    GPU's SM time and of its memory-bandwidth time (None: the SM weight), as nvmlDeviceGetProcessUtilization
    reports them."""

    pid: int
    memory_bytes: int
    sm_share: float = 1.0
    memory_share: float | None = None

    @property
    def memory_weight(self) -> float:
        return self.sm_share if self.memory_share is None else self.memory_share


@dataclass(frozen=True)
class SimGpuSpec:
    model: GpuModel
    load: LoadPattern
    processes: tuple[ProcessSpec, ...]
    mig: MigLayout | None = None  # set: the GPU is in MIG mode with this layout (MIG devices `MIG-...`)


@dataclass(frozen=True)
class Fault:
    """An injected fault, active for `at` <= simulated t < `until`. gpus None = every GPU."""

    type: str
    gpus: tuple[int, ...] | None = None
    at: float = 0.0
    until: float | None = None
    calls: tuple[str, ...] = ()
    code: int = 0
    error: str = "LibraryNotFound"  # NVMLError_<error>: for nvml_unavailable and error faults
    celsius: float = 0.0  # overheat: the temperature the GPU heats up to (with the usual thermal lag)
    links: tuple[int, ...] = ()  # nvlink_down: the NVLink links that are down
    # mig_layout: the GPU's MIG layout from `at` on (None: MIG off); mig_create: the GPU instances it adds
    mig: MigLayout | None = None
    gpu_instance_ids: tuple[int, ...] = ()  # mig_destroy: the GPU instances it destroys

    def active(self, t: float) -> bool:
        return t >= self.at and (self.until is None or t < self.until)

    def applies_to(self, index: int | None) -> bool:
        return self.gpus is None or (index is not None and index in self.gpus)


@dataclass(frozen=True)
class SimConfig:
    gpus: tuple[SimGpuSpec, ...]
    faults: tuple[Fault, ...] = ()
    seed: int = 1
    pcie_latency_seconds: float = 0.02
    # What nvmlSystemGetDriverVersion answers; calls newer than this driver raise FunctionNotFound (R550 by
    # default: older than R580, so the exporter's fallbacks for older drivers run in the demo and the tests).
    driver_version: str = "550.54.15"
    # The exporter holds what nvml.h's "Requires privileged user" calls need (root or the mig/monitor
    # capability); False models the base DaemonSet, which drops every capability.
    privileged: bool = False

    @property
    def driver_major(self) -> int:
        return int(self.driver_version.split(".")[0])


DEFAULT_FLEET_LOADS = (
    LoadPattern(kind="sine", base=0.3, amplitude=0.12),   # lightly used: 18..42 %
    LoadPattern(kind="constant", value=0.0),              # idle: a model loaded, no traffic (0..3 %)
    LoadPattern(kind="sine", base=0.55, amplitude=0.3),   # busy: 25..85 %
)
"""The loads `--simulate N` gives its GPUs in turn: a real cluster has idle and lightly used GPUs beside busy
ones, so `gpu-fleet select --gpus 2` finds two on `--simulate 2` with its defaults (at most 50 % busy, not
throttled), and a fleet of three or more has a busy GPU whose load and temperature move."""


def default_config(count: int, seed: int = 1) -> SimConfig:
    """N H100-class GPUs, each with one inference process, under DEFAULT_FLEET_LOADS in turn (each sine in its
    own phase)."""
    if count < 0:  # the CLI caps N at MAX_SIMULATED_GPUS; the demo sizes its nodes from the rule itself
        raise ConfigError(f"--simulate: expected a GPU count >= 0 (got {count})")
    gpus = tuple(
        SimGpuSpec(MODELS["H100"], replace(DEFAULT_FLEET_LOADS[i % len(DEFAULT_FLEET_LOADS)],
                                           phase_seconds=37.0 * i),
                   (ProcessSpec(pid=10_000 + i, memory_bytes=(30 + 4 * (i % 5)) * GIB),))
        for i in range(count))
    return SimConfig(gpus=gpus, seed=seed)
