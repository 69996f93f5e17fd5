"""What a sweep reads of one GPU: the fields that change between sweeps (utilization, memory, power,
temperature, clocks, ECC, processes, row remapping), as one DeviceSnapshot.

Kept apart from exporter/nvml/adapter.py, which owns the NVML session, each GPU's static facts and MIG
listing, and the background reads; like every NVML-side module but the adapter, nothing here imports pynvml:
calls go through the module-like object the adapter was given.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from exporter.nvml.calls import (
    CLOCKS_EVENT_CALLS,
    PROCESS_CALLS,
    NvmlCalls,
    StaticInfo,
    clocks_event_reasons,
    mhz,
    performance_state,
)
from exporter.nvml.memory_link import memory_temperature, row_remap
from exporter.nvml.snapshots import DeviceSnapshot, MigInstanceSnapshot, ProcessSnapshot

MigSnapshots = Callable[[int, StaticInfo], tuple[MigInstanceSnapshot, ...]]


class DeviceReader:
    """Reads one GPU's changing fields per sweep through the adapter's NvmlCalls."""

    def __init__(self, nvml: Any, calls: NvmlCalls) -> None:
        self._nvml = nvml
        self._calls = calls
        self._reasons = clocks_event_reasons(nvml)
        self._left_out = calls.left_out
        self._optional = calls.field
        self._optional_versioned = calls.optional_versioned
        self._note_unsupported = calls.note_unsupported

    def read(self, index: int, s: StaticInfo, mig_instances: MigSnapshots) -> DeviceSnapshot:
        """GPU `index`'s fields now; `mig_instances` reads its MIG instances (the adapter relists a layout
        that changed). NotSupported leaves a field out for the session; an error of one call (Unknown, NoData,
        ...) leaves that call's fields out of this sweep, named in `failed_calls`; an error saying the board
        or the library is gone (NvmlCalls.gone) is raised to the adapter, which marks the GPU down."""
        with self._calls.recording() as failed:
            device = self._read(index, s)
        return dataclasses.replace(device, failed_calls=tuple(dict.fromkeys(failed)),
                                   mig_instances=mig_instances(index, s))

    def _read(self, index: int, s: StaticInfo) -> DeviceSnapshot:
        nvml, h, opt = self._nvml, s.handle, self._optional
        util = opt(index, "nvmlDeviceGetUtilizationRates", h)
        memory, reserved = self._memory(index, h)
        power = opt(index, "nvmlDeviceGetPowerUsage", h)
        limit = opt(index, "nvmlDeviceGetEnforcedPowerLimit", h)
        energy = opt(index, "nvmlDeviceGetTotalEnergyConsumption", h)
        fan = opt(index, "nvmlDeviceGetFanSpeed", h)
        reasons = self._optional_versioned(index, "clocks_event_reasons", CLOCKS_EVENT_CALLS, h)
        encoder = opt(index, "nvmlDeviceGetEncoderUtilization", h)
        decoder = opt(index, "nvmlDeviceGetDecoderUtilization", h)
        processes = self._optional_versioned(index, "processes", PROCESS_CALLS, h)
        return DeviceSnapshot(
            index=index, uuid=s.uuid, name=s.name, pci_bus_id=s.pci_bus_id, up=True,
            utilization=None if util is None else util.gpu / 100.0,
            memory_utilization=None if util is None else util.memory / 100.0,
            memory_used_bytes=None if memory is None else int(memory.used),
            memory_free_bytes=None if memory is None else int(memory.free),
            memory_total_bytes=None if memory is None else int(memory.total),
            memory_reserved_bytes=reserved,
            pcie_replays=opt(index, "nvmlDeviceGetPcieReplayCounter", h),
            temperature_celsius=opt(index, "nvmlDeviceGetTemperature", h, nvml.NVML_TEMPERATURE_GPU),
            power_watts=None if power is None else power / 1000.0,
            power_limit_watts=None if limit is None else limit / 1000.0,
            energy_joules=None if energy is None else energy / 1000.0,
            sm_clock_hertz=mhz(opt(index, "nvmlDeviceGetClockInfo", h, nvml.NVML_CLOCK_SM)),
            memory_clock_hertz=mhz(opt(index, "nvmlDeviceGetClockInfo", h, nvml.NVML_CLOCK_MEM)),
            sm_clock_max_hertz=s.sm_clock_max_hertz,
            memory_clock_max_hertz=s.memory_clock_max_hertz,
            fan_speed_ratio=None if fan is None else fan / 100.0,
            performance_state=performance_state(opt(index, "nvmlDeviceGetPerformanceState", h)),
            clocks_event_reasons=None if reasons is None else tuple(
                (label, bool(int(reasons) & bit)) for label, bit in self._reasons),
            ecc_corrected=opt(index, "nvmlDeviceGetTotalEccErrors", h, nvml.NVML_MEMORY_ERROR_TYPE_CORRECTED,
                              nvml.NVML_VOLATILE_ECC),
            ecc_uncorrected=opt(index, "nvmlDeviceGetTotalEccErrors", h,
                                nvml.NVML_MEMORY_ERROR_TYPE_UNCORRECTED, nvml.NVML_VOLATILE_ECC),
            encoder_utilization=None if encoder is None else encoder[0] / 100.0,
            decoder_utilization=None if decoder is None else decoder[0] / 100.0,
            processes=None if processes is None else tuple(
                ProcessSnapshot(int(p.pid), None if p.usedGpuMemory is None else int(p.usedGpuMemory))
                for p in processes),
            memory_temperature_celsius=memory_temperature(self._calls, index, h),
            row_remap=row_remap(self._calls, index, h),
            board_temperatures=s.board_temperatures,
        )

    def _memory(self, index: int, handle: Any) -> tuple[Any, int | None]:
        """nvmlDeviceGetMemoryInfo and the reserved bytes: _v2 where the driver has it (its `used` leaves the
        reserved memory out; ours keeps it in, total - free, as _v1 and before), else _v1 and None."""
        version = getattr(self._nvml, "nvmlMemory_v2", None)
        older: tuple[type[Exception], ...] = (*self._calls.fallback_errors, TypeError)
        if version is not None and self._calls.resolved.get("memory") != "v1":
            try:
                memory = self._nvml.nvmlDeviceGetMemoryInfo(handle, version)
            except older:
                self._calls.resolved["memory"] = "v1"
            except self._left_out as exc:
                self._note_unsupported(index, "nvmlDeviceGetMemoryInfo_v2", exc)
                return None, None
            except self._nvml.NVMLError as exc:
                if not self._calls.field_error(index, "nvmlDeviceGetMemoryInfo", exc):
                    raise
                return None, None
            else:
                total, free = int(memory.total), int(memory.free)
                return _Memory(total=total, free=free, used=total - free), int(memory.reserved)
        return self._optional(index, "nvmlDeviceGetMemoryInfo", handle), None


@dataclasses.dataclass(frozen=True)
class _Memory:
    """nvmlDeviceGetMemoryInfo's three numbers, _v1's meaning (used = total - free)."""

    total: int
    free: int
    used: int
