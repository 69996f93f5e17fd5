"""Frozen snapshots of what NVML answered: plain data, no NVML, so collectors and tests build them freely.

Re-exported from exporter.nvml.adapter, which produces them.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

# Clocks-event reasons that lower clocks without anything being wrong: an idle GPU, clocks set by the
# operator, the display clock. They stay on gpu_clocks_event_reason_active but are not "throttling" in the
# JSON API or the status table.
NOT_THROTTLING = frozenset({"gpu_idle", "applications_clocks_setting", "display_clock_setting"})


# NVML call -> the fields of DeviceSnapshot it reads, by the names the status API and health use: what is
# missing from a sweep whose call failed (DeviceSnapshot.failed_calls).
CALL_FIELDS: dict[str, tuple[str, ...]] = {
    "nvmlDeviceGetUtilizationRates": ("utilization", "memory_utilization"),
    "nvmlDeviceGetMemoryInfo": ("memory",),
    "nvmlDeviceGetTemperature": ("temperature",),
    "nvmlDeviceGetPowerUsage": ("power",),
    "nvmlDeviceGetEnforcedPowerLimit": ("power_limit",),
    "nvmlDeviceGetTotalEnergyConsumption": ("energy",),
    "nvmlDeviceGetClockInfo": ("clocks",),
    "nvmlDeviceGetFanSpeed": ("fan_speed",),
    "nvmlDeviceGetPerformanceState": ("performance_state",),
    "nvmlDeviceGetCurrentClocksEventReasons": ("clocks_event_reasons",),
    "nvmlDeviceGetCurrentClocksThrottleReasons": ("clocks_event_reasons",),
    "nvmlDeviceGetTotalEccErrors": ("ecc_errors",),
    "nvmlDeviceGetEncoderUtilization": ("encoder_utilization",),
    "nvmlDeviceGetDecoderUtilization": ("decoder_utilization",),
    "nvmlDeviceGetPcieReplayCounter": ("pcie_replays",),
    "nvmlDeviceGetComputeRunningProcesses_v3": ("processes",),
    "nvmlDeviceGetComputeRunningProcesses_v2": ("processes",),
    "nvmlDeviceGetComputeRunningProcesses": ("processes",),
    "nvmlDeviceGetRemappedRows": ("row_remap",),
    "nvmlDeviceGetFieldValues": ("memory_temperature",),
}


def throttle_reasons(reasons: Iterable[tuple[str, bool]] | None) -> list[str]:
    """The active clocks-event reasons that are real throttles (see NOT_THROTTLING), in NVML's bit order."""
    return [reason for reason, active in reasons or () if active and reason not in NOT_THROTTLING]


@dataclass(frozen=True)
class ProcessSnapshot:
    """One compute process on a GPU; used memory is None where NVML cannot tell (WDDM)."""

    pid: int
    used_memory_bytes: int | None


@dataclass(frozen=True)
class GpmMetrics:
    """GPM profiling over the interval between two GPM samples (ratios 0..1, NVLink in bytes/s); None and
    a missing pipe mean NVML did not report that metric here."""

    sm_active: float | None = None
    sm_occupancy: float | None = None
    tensor_active: float | None = None  # any tensor pipe
    dram_active: float | None = None
    graphics_engine_active: float | None = None
    pipes: tuple[tuple[str, float], ...] = ()  # (pipe label, ratio): hmma, imma, dmma, dfma, fp16, ...
    nvlink_tx_bytes_per_second: float | None = None
    nvlink_rx_bytes_per_second: float | None = None
    nvdec_utilization: float | None = None  # mean over the decoder engines NVML reports
    nvjpg_utilization: float | None = None


@dataclass(frozen=True)
class NvLinkSnapshot:
    """One NVLink link: up (NVML's link state) and its error counters by type (crc_flit, crc_data, ...)."""

    link: int
    up: bool
    errors: tuple[tuple[str, int], ...] = ()


@dataclass(frozen=True)
class Reliability:
    """Link and counter health sampled in the background (None: not supported on this GPU)."""

    nvlinks: tuple[NvLinkSnapshot, ...] | None = None
    retired_pages_single_bit: int | None = None
    retired_pages_double_bit: int | None = None
    power_violation_seconds: float | None = None
    thermal_violation_seconds: float | None = None
    # NVLink traffic of all links, header and payload, since the driver loaded (NVML's raw throughput fields)
    nvlink_tx_bytes: int | None = None
    nvlink_rx_bytes: int | None = None
    # the payload alone (NVML's data throughput fields, what DCGM's NVLink bandwidth field 449 is made of)
    nvlink_data_tx_bytes: int | None = None
    nvlink_data_rx_bytes: int | None = None
    vgpu_licensed: bool | None = None  # None: not a vGPU (NVML has no licensable feature here)


@dataclass(frozen=True)
class RowRemap:
    """nvmlDeviceGetRemappedRows: rows remapped for correctable / uncorrectable errors, pending, failed."""

    correctable: int
    uncorrectable: int
    pending: bool
    failed: bool


@dataclass(frozen=True)
class BoardTemperatures:
    """The board's own temperature thresholds in °C (nvmlDeviceGetTemperatureThreshold), read once per NVML
    session; None where the board does not say. The H100 80GB HBM3 answered 95, 89 and 87."""

    shutdown: float | None = None  # NVML_TEMPERATURE_THRESHOLD_SHUTDOWN: the board powers off
    slowdown: float | None = None  # NVML_TEMPERATURE_THRESHOLD_SLOWDOWN: the hardware slows the clocks
    gpu_max: float | None = None  # NVML_TEMPERATURE_THRESHOLD_GPU_MAX: the maximum operating temperature


@dataclass(frozen=True)
class MigInstanceSnapshot:
    """One MIG device (a GPU instance with its compute instance) of a GPU in MIG mode."""

    uuid: str
    slot: int  # the MIG device index on its GPU (the device plugin's `<gpu>:<slot>` ids)
    gpu_instance_id: int | None
    compute_instance_id: int | None
    profile: str  # `1g.10gb`; "" when NVML does not tell
    memory_used_bytes: int | None = None
    memory_free_bytes: int | None = None
    memory_total_bytes: int | None = None
    profile_id: int | None = None  # the GPU instance's profile id and placement start (NVIDIA's DRA
    placement_start: int | None = None  # driver names a MIG device by them); None when NVML does not tell
    gpm: GpmMetrics | None = None


@dataclass(frozen=True)
class BackgroundReading:
    """What the background sampler read from one GPU: GPM (whole GPU and per MIG GPU instance id) and
    link and counter health."""

    gpm_supported: bool
    gpm: GpmMetrics | None
    mig_gpm: tuple[tuple[int, GpmMetrics], ...]
    reliability: Reliability


@dataclass(frozen=True)
class NvmlErrorCount:
    """How often one NVML call of one GPU failed with one error since the exporter started (an error that
    cost that call's values only; gpu_exporter_nvml_errors_total)."""

    gpu: int
    call: str
    error: str  # pynvml's class name without `NVMLError_`: Unknown, NoData, CorruptedInforom, ...
    count: int


@dataclass(frozen=True)
class DeviceSnapshot:
    """Everything read from one GPU in one sweep. None means "not supported here": the series is left out."""

    index: int
    uuid: str
    name: str
    pci_bus_id: str
    up: bool
    error: str | None = None
    utilization: float | None = None
    memory_utilization: float | None = None
    memory_used_bytes: int | None = None
    memory_free_bytes: int | None = None
    memory_total_bytes: int | None = None
    memory_reserved_bytes: int | None = None  # what the driver reserves (nvmlDeviceGetMemoryInfo_v2)
    temperature_celsius: float | None = None
    power_watts: float | None = None
    power_limit_watts: float | None = None
    energy_joules: float | None = None
    sm_clock_hertz: float | None = None
    memory_clock_hertz: float | None = None
    sm_clock_max_hertz: float | None = None
    memory_clock_max_hertz: float | None = None
    fan_speed_ratio: float | None = None
    performance_state: int | None = None
    clocks_event_reasons: tuple[tuple[str, bool], ...] | None = None
    ecc_corrected: int | None = None
    ecc_uncorrected: int | None = None
    encoder_utilization: float | None = None
    decoder_utilization: float | None = None
    processes: tuple[ProcessSnapshot, ...] | None = None
    pcie_tx_bytes_per_second: float | None = None
    pcie_rx_bytes_per_second: float | None = None
    pcie_replays: int | None = None  # nvmlDeviceGetPcieReplayCounter
    # (pid, SM utilization 0..1) from nvmlDeviceGetProcessUtilization, sampled in the background; None when
    # not sampled or not supported
    process_sm_utilization: tuple[tuple[int, float], ...] | None = None
    # (pid, memory-bandwidth utilization 0..1: the time device memory was read or written for it), as above
    process_memory_utilization: tuple[tuple[int, float], ...] | None = None
    memory_temperature_celsius: float | None = None
    row_remap: RowRemap | None = None
    board_temperatures: BoardTemperatures | None = None  # None: not read (the GPU did not answer)
    mig_instances: tuple[MigInstanceSnapshot, ...] = ()
    # sampled in the background: GPM support (None: not asked yet), GPM metrics, link and counter health
    gpm_supported: bool | None = None
    gpm: GpmMetrics | None = None
    reliability: Reliability | None = None
    # NVML calls of this sweep that failed with an error costing only their own values (Unknown, NoData, ...;
    # not NotSupported): their fields are left out of this sweep, the GPU stays up
    failed_calls: tuple[str, ...] = ()

    @property
    def missing_fields(self) -> tuple[str, ...]:
        """The fields (CALL_FIELDS' names) this sweep lacks because their call failed, in call order."""
        found = (field for call in self.failed_calls for field in CALL_FIELDS.get(call, (call,)))
        return tuple(dict.fromkeys(found))


@dataclass(frozen=True)
class NodeSnapshot:
    """One NVML sweep of the node. `last_success` is the wall time NVML last answered (None: never)."""

    nvml_up: bool
    driver_version: str
    cuda_version: str
    devices: tuple[DeviceSnapshot, ...]
    collected_at: float
    duration_seconds: float
    last_success: float | None
    nvml_error: str | None = None
    nvml_errors: tuple[NvmlErrorCount, ...] = ()  # every count so far, also while NVML is down


@dataclass(frozen=True)
class ProcessUtilizationSample:
    """Per-process utilization from nvmlDeviceGetProcessUtilization (ratios 0..1)."""

    pid: int
    timestamp_us: int
    sm_utilization: float
    memory_utilization: float
    encoder_utilization: float
    decoder_utilization: float


@dataclass(frozen=True)
class XidEvent:
    """An XID critical error reported by NVML's event API."""

    gpu_index: int | None
    xid: int
    event_type: int
    gpu_instance_id: int | None = None  # MIG GPU instance; None when the event is not about one
    compute_instance_id: int | None = None
