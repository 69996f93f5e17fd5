"""A simulated NVML: the pynvml call surface over a fleet of plausible GPUs, with injected faults.

`SimulatedNvml` has the same function names and signatures as pynvml and raises pynvml's own error classes,
so `exporter.nvml.adapter.NvmlAdapter` runs unchanged on it. Utilization follows a load pattern (or the load
driver: `set_utilization`, `set_processes`, `set_overheat`); power follows utilization up to the power limit,
temperature follows power with a 30 s lag, clocks drop under power cap and heat, energy integrates power.
Time comes from an injectable clock so tests and the demo can drive simulated time. As NVML does, every call
answers FunctionNotFound on a simulated driver older than the branch that brought it (DRIVER_MINIMUM), the
calls nvml.h marks privileged answer NoPermission unless the config grants the privilege, and an enum
argument NVML does not know is InvalidArgument.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from exporter.nvml.adapter import real_nvml
from exporter.simulator.config import OLDEST_DRIVER, ProcessSpec, SimConfig
from exporter.simulator.events import EventSurface, SimEventSet
from exporter.simulator.gpm import GpmSurface
from exporter.simulator.memory_link import ReliabilitySurface
from exporter.simulator.mig import MIG_UNSUPPORTED_CALLS, MigSurface, SimMigHandle
from exporter.simulator.physics import (
    DRIVER_RESERVED_BYTES,
    SimGpu,
    apportion,
    process_memory,
    utilization_percents,
)
from exporter.simulator.structs import SimStruct

# The first driver branch whose libnvidia-ml has each call the exporter makes (by the C symbol pynvml calls:
# nvmlDeviceGetGridLicensableFeatures is _v4, nvmlDeviceGetGpuInstanceProfileInfo is ...V, the memory call
# with a version is nvmlDeviceGetMemoryInfo_v2), dated by the nvml.h of each CUDA release (CUDA 11.0 is
# R450, 11.1 R455, 11.4 R470, 11.6 R510, 11.8 R520, 12.0 R525, 12.2 R535, 13.0 R580). An older simulated
# driver answers FunctionNotFound, as pynvml does for a symbol its library lacks. R450 (the first with MIG)
# is the oldest driver the simulator models: `driver_version` below it is refused.
DRIVER_MINIMUM: dict[str, int] = {
    **{call: OLDEST_DRIVER for call in (
        "nvmlInit", "nvmlShutdown", "nvmlSystemGetDriverVersion", "nvmlSystemGetCudaDriverVersion",
        "nvmlSystemGetCudaDriverVersion_v2", "nvmlDeviceGetCount", "nvmlDeviceGetHandleByIndex",
        "nvmlDeviceGetIndex", "nvmlDeviceGetUUID", "nvmlDeviceGetName", "nvmlDeviceGetPciInfo",
        "nvmlDeviceGetUtilizationRates", "nvmlDeviceGetMemoryInfo", "nvmlDeviceGetTemperature",
        "nvmlDeviceGetTemperatureThreshold",
        "nvmlDeviceGetPowerUsage", "nvmlDeviceGetEnforcedPowerLimit", "nvmlDeviceGetTotalEnergyConsumption",
        "nvmlDeviceGetClockInfo", "nvmlDeviceGetMaxClockInfo", "nvmlDeviceGetFanSpeed",
        "nvmlDeviceGetPerformanceState", "nvmlDeviceGetCurrentClocksThrottleReasons",
        "nvmlDeviceGetTotalEccErrors", "nvmlDeviceGetEncoderUtilization", "nvmlDeviceGetDecoderUtilization",
        "nvmlDeviceGetPcieThroughput", "nvmlDeviceGetPcieReplayCounter", "nvmlDeviceGetProcessUtilization",
        "nvmlDeviceGetFieldValues", "nvmlDeviceGetNvLinkState", "nvmlDeviceGetNvLinkErrorCounter",
        "nvmlDeviceGetViolationStatus", "nvmlDeviceGetRetiredPages", "nvmlDeviceGetRemappedRows",
        "nvmlDeviceGetSupportedEventTypes", "nvmlDeviceRegisterEvents", "nvmlEventSetCreate",
        "nvmlEventSetFree", "nvmlEventSetWait_v2", "nvmlDeviceGetMigMode", "nvmlDeviceGetMaxMigDeviceCount",
        "nvmlDeviceGetMigDeviceHandleByIndex", "nvmlDeviceGetGpuInstanceId", "nvmlDeviceGetComputeInstanceId",
        "nvmlDeviceGetGpuInstanceById", "nvmlGpuInstanceGetInfo", "nvmlDeviceGetGpuInstanceProfileInfo")},
    "nvmlDeviceGetComputeRunningProcesses_v2": 455,
    "nvmlDeviceGetAttributes_v2": 455,
    "nvmlDeviceGetGridLicensableFeatures": 470,
    "nvmlDeviceGetComputeRunningProcesses_v3": 510,
    "nvmlDeviceGetMemoryInfo_v2": 510,
    "nvmlDeviceGetGpuInstanceProfileInfoV": 510,
    **{call: 520 for call in ("nvmlGpmQueryDeviceSupport", "nvmlGpmSampleAlloc", "nvmlGpmSampleFree",
                              "nvmlGpmSampleGet", "nvmlGpmMetricsGet")},
    "nvmlGpmMigSampleGet": 525,
    "nvmlDeviceGetCurrentClocksEventReasons": 535,
    "nvmlDeviceGetGpuInstanceProfileInfoById": 580,
}
# The calls nvml.h marks "Requires privileged user" (root, or the mig/monitor capability for MIG):
# NoPermission unless the config says the exporter has them (`privileged: true`); the base DaemonSet drops
# every capability.
PRIVILEGED_CALLS = frozenset({"nvmlDeviceGetGpuInstanceById"})


@dataclass(eq=False)
class SimHandle:
    """What nvmlDeviceGetHandleByIndex returns."""

    index: int


class SimulatedNvml(MigSurface, GpmSurface, ReliabilitySurface, EventSurface):
    """The fake pynvml module: create one per simulated node and pass it to NvmlAdapter."""

    if TYPE_CHECKING:  # pynvml's constants, structures and error classes, set on each instance below

        def __getattr__(self, name: str) -> Any: ...

    def __init__(self, config: SimConfig, clock: Callable[[], float] = time.monotonic,
                 pcie_latency_seconds: float | None = None) -> None:
        real = real_nvml()
        for name in dir(real):  # pynvml's constants, structures and error classes, shared not copied
            if name.startswith(("NVML_", "NVMLError", "nvmlClocks", "nvmlEventType", "c_nvml")) or \
                    name in ("NVMLLibraryMismatchError", "nvmlMemory_v2"):
                setattr(self, name, getattr(real, name))
        self.config = config
        self._clock = clock
        self._start = clock()
        self._wall_start = time.time()
        self._pcie_latency = (config.pcie_latency_seconds if pcie_latency_seconds is None
                              else pcie_latency_seconds)
        self._lock = threading.RLock()
        self._events = threading.Condition(self._lock)
        self._gpus = [SimGpu(i, spec, config.seed, 0.0, config.faults) for i, spec in enumerate(config.gpus)]
        self._handles: list[SimHandle] = [SimHandle(i) for i in range(len(self._gpus))]
        for gpu in self._gpus:
            self._relayout(gpu, gpu.mig, initial=True)
        self._initialized = 0
        self._event_sets: list[SimEventSet] = []
        self._xid_schedule = tuple((n, f) for n, f in enumerate(config.faults) if f.type == "xid")
        # NVML calls made, by name: lets tests prove what is (and is not) on the scrape path
        self.calls: Counter[str] = Counter()

    # -- load driver (demo, tests) --------------------------------------------------------------------
    def now(self) -> float:
        """Simulated seconds since this backend was created."""
        return self._clock() - self._start

    @property
    def device_count(self) -> int:
        return len(self._gpus)

    def set_utilization(self, index: int, utilization: float | None) -> None:
        """Drive GPU `index` at this utilization (0..1); None returns it to its configured load pattern."""
        if utilization is not None and not 0.0 <= utilization <= 1.0:
            raise ValueError(f"utilization must be within 0..1 (got {utilization})")
        with self._lock:
            gpu = self._gpus[index]
            gpu.advance(self.now())
            gpu.utilization_override = utilization

    def set_processes(self, index: int, processes: Sequence[tuple[int, int]] | None) -> None:
        """Replace GPU `index`'s process list with (pid, used memory bytes); None restores the config's."""
        with self._lock:
            self._gpus[index].processes_override = None if processes is None else tuple(
                ProcessSpec(int(pid), int(memory)) for pid, memory in processes)

    def set_lost(self, index: int, lost: bool) -> None:
        """Make GPU `index` answer NVMLError_GpuIsLost (True) or recover (False)."""
        with self._lock:
            self._gpus[index].lost = lost

    def set_overheat(self, index: int, celsius: float | None) -> None:
        """Heat GPU `index` toward `celsius` (30 s lag) like a failed fan would; None lets it cool down."""
        with self._lock:
            self._gpus[index].set_overheat(celsius, self.now())

    def utilization_of(self, index: int) -> float:
        """The utilization GPU `index` runs at now (what NVML would report, before rounding)."""
        with self._lock:
            return self._gpus[index].utilization(self.now())

    # -- fault machinery ------------------------------------------------------------------------------
    def _enter(self, call: str, index: int | None = None) -> float:
        """Count the call, apply the faults active now, and return simulated time."""
        self.calls[call] += 1
        t = self.now()
        for fault in self.config.faults:
            if not fault.active(t):
                continue
            if fault.type == "nvml_unavailable":
                if call == "nvmlInit" or self._initialized:
                    raise getattr(self, f"NVMLError_{fault.error}")()
            elif fault.type == "function_not_found" and call in fault.calls and fault.applies_to(index):
                raise self.NVMLError_FunctionNotFound()
        if call != "nvmlInit" and not self._initialized:
            raise self.NVMLError_Uninitialized()
        self._driver_has(call)
        if index is not None:
            if index >= len(self._gpus) or index < 0:
                raise self.NVMLError_InvalidArgument()
            if self._gpus[index].lost or any(f.type == "gpu_lost" and f.active(t) and f.applies_to(index)
                                             for f in self.config.faults):
                raise self.NVMLError_GpuIsLost()
        for fault in self.config.faults:  # an error fault also fails calls not about one GPU (gpu: all)
            if fault.type in ("not_supported", "error") and call in fault.calls and fault.active(t) \
                    and fault.applies_to(index) and (index is not None or fault.type == "error"):
                error = fault.error if fault.type == "error" else "NotSupported"
                raise getattr(self, f"NVMLError_{error}")()
        return t

    def _driver_has(self, symbol: str) -> None:
        """FunctionNotFound when the simulated driver is older than the branch that brought `symbol`."""
        if DRIVER_MINIMUM.get(symbol, OLDEST_DRIVER) > self.config.driver_major:
            raise self.NVMLError_FunctionNotFound()

    def _privileged(self, call: str) -> None:
        """NoPermission for a call nvml.h marks privileged, unless the config grants the privilege."""
        if call in PRIVILEGED_CALLS and not self.config.privileged:
            raise self.NVMLError_NoPermission()

    def _enum(self, value: int, *allowed: int) -> None:
        """InvalidArgument for an enum value NVML does not know, as NVML checks its arguments."""
        if value not in allowed:
            raise self.NVMLError_InvalidArgument()

    def _gpu(self, call: str, handle: SimHandle) -> tuple[SimGpu, float]:
        if not isinstance(handle, SimHandle):
            raise self.NVMLError_InvalidArgument()
        t = self._enter(call, handle.index)
        gpu = self._gpus[handle.index]
        self._apply_mig_faults(gpu, t)
        if gpu.mig and call in MIG_UNSUPPORTED_CALLS:
            raise self.NVMLError_NotSupported()
        gpu.advance(t)
        return gpu, t

    # -- pynvml surface: library ----------------------------------------------------------------------
    def nvmlInit(self) -> None:
        with self._lock:
            self._enter("nvmlInit")
            self._initialized += 1

    def nvmlShutdown(self) -> None:
        with self._lock:
            self._enter("nvmlShutdown")
            self._initialized = max(self._initialized - 1, 0)

    def nvmlSystemGetDriverVersion(self) -> str:
        with self._lock:
            self._enter("nvmlSystemGetDriverVersion")
            return str(self.config.driver_version)

    def nvmlSystemGetCudaDriverVersion(self) -> int:
        with self._lock:
            self._enter("nvmlSystemGetCudaDriverVersion")
            return 12040

    def nvmlSystemGetCudaDriverVersion_v2(self) -> int:
        with self._lock:
            self._enter("nvmlSystemGetCudaDriverVersion_v2")
            return 12040

    def nvmlDeviceGetCount(self) -> int:
        with self._lock:
            self._enter("nvmlDeviceGetCount")
            return len(self._gpus)

    def nvmlDeviceGetHandleByIndex(self, index: int) -> SimHandle:
        with self._lock:
            self._enter("nvmlDeviceGetHandleByIndex", index)
            return self._handles[index]

    # -- pynvml surface: device -----------------------------------------------------------------------
    def nvmlDeviceGetIndex(self, handle: SimHandle) -> int:
        with self._lock:
            return self._gpu("nvmlDeviceGetIndex", handle)[0].index

    def nvmlDeviceGetUUID(self, handle: SimHandle | SimMigHandle) -> str:
        with self._lock:
            if isinstance(handle, SimMigHandle):
                return self.mig_uuid_of("nvmlDeviceGetUUID", handle)
            return self._gpu("nvmlDeviceGetUUID", handle)[0].uuid

    def nvmlDeviceGetName(self, handle: SimHandle | SimMigHandle) -> str:
        with self._lock:
            if isinstance(handle, SimMigHandle):
                return self.mig_device_name(handle)
            return self._gpu("nvmlDeviceGetName", handle)[0].spec.model.name

    def nvmlDeviceGetPciInfo(self, handle: SimHandle) -> SimStruct:
        with self._lock:
            gpu = self._gpu("nvmlDeviceGetPciInfo", handle)[0]
            return SimStruct(busId=gpu.pci_bus_id.encode(), busIdLegacy=gpu.pci_bus_id.encode(), domain=0,
                        bus=0x18 + 0x10 * gpu.index, device=0, pciDeviceId=0x233010DE)

    def nvmlDeviceGetUtilizationRates(self, handle: SimHandle) -> SimStruct:
        with self._lock:
            gpu, t = self._gpu("nvmlDeviceGetUtilizationRates", handle)
            sm, memory = utilization_percents(gpu.utilization(t))
            return SimStruct(gpu=sm, memory=memory)

    def nvmlDeviceGetMemoryInfo(self, handle: SimHandle | SimMigHandle, version: int | None = None) -> Any:
        with self._lock:
            if isinstance(handle, SimMigHandle):
                return self.mig_memory_info(handle)
            gpu, t = self._gpu("nvmlDeviceGetMemoryInfo", handle)
            if version is not None:  # pynvml calls nvmlDeviceGetMemoryInfo_v2 with a version
                self._driver_has("nvmlDeviceGetMemoryInfo_v2")
                self._enum(version, self.nvmlMemory_v2)
            total = gpu.spec.model.memory_bytes
            used = gpu.memory_used(t)
            if version == self.nvmlMemory_v2:  # _v2 counts what the driver reserves apart from `used`
                reserved = min(DRIVER_RESERVED_BYTES, used)
                return SimStruct(version=version, total=total, reserved=reserved, free=total - used,
                            used=used - reserved)
            return SimStruct(total=total, free=total - used, used=used)

    def nvmlDeviceGetTemperature(self, handle: SimHandle, sensor: int) -> int:
        with self._lock:
            gpu, _ = self._gpu("nvmlDeviceGetTemperature", handle)
            if sensor != self.NVML_TEMPERATURE_GPU:
                raise self.NVMLError_InvalidArgument()
            return round(gpu.temperature)

    def nvmlDeviceGetTemperatureThreshold(self, handle: SimHandle, threshold: int) -> int:
        """The model's shutdown, slowdown and GPU max operating temperatures (models.Thermal); the other
        thresholds (memory max, acoustic, GPS) are NotSupported, an unknown one InvalidArgument."""
        with self._lock:
            thermal = self._gpu("nvmlDeviceGetTemperatureThreshold", handle)[0].spec.model.thermal
            if not 0 <= threshold < self.NVML_TEMPERATURE_THRESHOLD_COUNT:
                raise self.NVMLError_InvalidArgument()
            celsius = {self.NVML_TEMPERATURE_THRESHOLD_SHUTDOWN: thermal.shutdown_celsius,
                       self.NVML_TEMPERATURE_THRESHOLD_SLOWDOWN: thermal.slowdown_celsius,
                       self.NVML_TEMPERATURE_THRESHOLD_GPU_MAX: thermal.gpu_max_celsius}.get(threshold)
            if celsius is None:
                raise self.NVMLError_NotSupported()
            return round(celsius)

    def nvmlDeviceGetPowerUsage(self, handle: SimHandle) -> int:
        with self._lock:
            gpu, t = self._gpu("nvmlDeviceGetPowerUsage", handle)
            return round(gpu.power_watts(t) * 1000)

    def nvmlDeviceGetEnforcedPowerLimit(self, handle: SimHandle) -> int:
        with self._lock:
            return round(self._gpu("nvmlDeviceGetEnforcedPowerLimit", handle)[0].spec.model.power_limit_watts
                         * 1000)

    def nvmlDeviceGetTotalEnergyConsumption(self, handle: SimHandle) -> int:
        with self._lock:
            return int(self._gpu("nvmlDeviceGetTotalEnergyConsumption", handle)[0].energy_mj)

    def nvmlDeviceGetClockInfo(self, handle: SimHandle, type: int) -> int:
        with self._lock:
            gpu, t = self._gpu("nvmlDeviceGetClockInfo", handle)
            self._enum(type, *self._clock_types())
            return gpu.sm_clock_mhz(t) if type == self.NVML_CLOCK_SM else gpu.spec.model.memory_clock_max_mhz

    def _clock_types(self) -> tuple[int, ...]:
        return (self.NVML_CLOCK_GRAPHICS, self.NVML_CLOCK_SM, self.NVML_CLOCK_MEM, self.NVML_CLOCK_VIDEO)

    def nvmlDeviceGetMaxClockInfo(self, handle: SimHandle, type: int) -> int:
        with self._lock:
            model = self._gpu("nvmlDeviceGetMaxClockInfo", handle)[0].spec.model
            self._enum(type, *self._clock_types())
            return model.sm_clock_max_mhz if type == self.NVML_CLOCK_SM else model.memory_clock_max_mhz

    def nvmlDeviceGetFanSpeed(self, handle: SimHandle) -> int:
        with self._lock:
            gpu, _ = self._gpu("nvmlDeviceGetFanSpeed", handle)
            if not gpu.spec.model.has_fan:
                raise self.NVMLError_NotSupported()
            return round(30 + 60 * min(max((gpu.temperature - 40.0) / 45.0, 0.0), 1.0))

    def nvmlDeviceGetPerformanceState(self, handle: SimHandle) -> int:
        with self._lock:
            gpu, t = self._gpu("nvmlDeviceGetPerformanceState", handle)
            return 0 if gpu.utilization(t) >= 0.02 else 8

    def nvmlDeviceGetCurrentClocksEventReasons(self, handle: SimHandle) -> int:
        with self._lock:
            gpu, t = self._gpu("nvmlDeviceGetCurrentClocksEventReasons", handle)
            return gpu.reasons(t)

    def nvmlDeviceGetCurrentClocksThrottleReasons(self, handle: SimHandle) -> int:
        with self._lock:
            gpu, t = self._gpu("nvmlDeviceGetCurrentClocksThrottleReasons", handle)
            return gpu.reasons(t)

    def nvmlDeviceGetTotalEccErrors(self, handle: SimHandle, errorType: int, counterType: int) -> int:
        with self._lock:
            gpu, _ = self._gpu("nvmlDeviceGetTotalEccErrors", handle)
            self._enum(errorType, self.NVML_MEMORY_ERROR_TYPE_CORRECTED,
                       self.NVML_MEMORY_ERROR_TYPE_UNCORRECTED)
            self._enum(counterType, self.NVML_VOLATILE_ECC, self.NVML_AGGREGATE_ECC)
            corrected = errorType == self.NVML_MEMORY_ERROR_TYPE_CORRECTED
            return gpu.ecc_corrected if corrected else gpu.ecc_uncorrected

    def nvmlDeviceGetEncoderUtilization(self, handle: SimHandle) -> list[int]:
        with self._lock:
            self._gpu("nvmlDeviceGetEncoderUtilization", handle)
            return [0, 167000]

    def nvmlDeviceGetDecoderUtilization(self, handle: SimHandle) -> list[int]:
        with self._lock:
            self._gpu("nvmlDeviceGetDecoderUtilization", handle)
            return [0, 167000]

    def nvmlDeviceGetPcieThroughput(self, device: SimHandle, counter: int) -> int:
        """Sleeps like the real call (about 20 ms: NVML samples the counter over a window)."""
        with self._lock:
            gpu, t = self._gpu("nvmlDeviceGetPcieThroughput", device)
            self._enum(counter, self.NVML_PCIE_UTIL_TX_BYTES, self.NVML_PCIE_UTIL_RX_BYTES)
            share = 0.35 if counter == self.NVML_PCIE_UTIL_TX_BYTES else 0.15
            value = int(gpu.spec.model.pcie_max_kb_per_second * share * gpu.utilization(t))
        if self._pcie_latency > 0:
            time.sleep(self._pcie_latency)
        return value

    def _process_list(self, call: str, handle: SimHandle) -> list[SimStruct]:
        with self._lock:
            gpu, t = self._gpu(call, handle)
            util = gpu.utilization(t)
            return [SimStruct(pid=p.pid, usedGpuMemory=process_memory(p, util),
                         gpuInstanceId=self.mig_ids_of_process(gpu, i)[0],
                         computeInstanceId=self.mig_ids_of_process(gpu, i)[1])
                    for i, p in enumerate(gpu.processes())]

    def nvmlDeviceGetComputeRunningProcesses_v3(self, handle: SimHandle) -> list[SimStruct]:
        return self._process_list("nvmlDeviceGetComputeRunningProcesses_v3", handle)

    def nvmlDeviceGetComputeRunningProcesses_v2(self, handle: SimHandle) -> list[SimStruct]:
        return self._process_list("nvmlDeviceGetComputeRunningProcesses_v2", handle)

    def nvmlDeviceGetComputeRunningProcesses(self, handle: SimHandle) -> list[SimStruct]:
        """pynvml maps the unversioned name to _v3 and turns its FunctionNotFound into a mismatch error."""
        try:
            return self._process_list("nvmlDeviceGetComputeRunningProcesses_v3", handle)
        except self.NVMLError_FunctionNotFound as exc:
            raise self.NVMLLibraryMismatchError("Unversioned function called and the pyNVML version does not "
                                                "match the NVML lib version.") from exc

    def nvmlDeviceGetProcessUtilization(self, handle: SimHandle, timeStamp: int) -> list[SimStruct]:
        """One sample per process: the GPU's SM and memory utilization of this instant split by the processes'
        `sm_share` / `memory_share` weights (time-slicing: they add up to nvmlDeviceGetUtilizationRates' whole
        percents); NotFound when no process ran since `timeStamp`, as NVML answers."""
        with self._lock:
            gpu, t = self._gpu("nvmlDeviceGetProcessUtilization", handle)
            now_us = int((self._wall_start + t) * 1e6)
            processes = gpu.processes()
            if not processes or now_us <= timeStamp:
                raise self.NVMLError_NotFound()
            sm, memory = utilization_percents(gpu.utilization(t))
            sm_parts = apportion(sm, [p.sm_share for p in processes])
            memory_parts = apportion(memory, [p.memory_weight for p in processes])
            return [SimStruct(pid=p.pid, timeStamp=now_us, smUtil=sm_part, memUtil=memory_part, encUtil=0,
                              decUtil=0)
                    for p, sm_part, memory_part in zip(processes, sm_parts, memory_parts, strict=True)]
