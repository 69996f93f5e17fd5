"""The NVML call helpers of the adapter (exporter/nvml/adapter.py): optional calls, newer-to-older call
fallback, clocks-event reason bits, static per-GPU facts and unit helpers.

Kept apart so the adapter stays small. Nothing here imports pynvml: every call goes through the module-like
object the adapter was given (`pynvml` or `SimulatedNvml`), so only the NVML side (exporter/nvml/) ever calls
an NVML function.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from exporter.nvml.snapshots import BoardTemperatures, NvmlErrorCount

log = logging.getLogger("exporter.nvml.adapter")

# `reason` label value -> (pynvml constant suffix, the bit as a fallback for a pynvml without the constant).
# The constant is read as nvmlClocksEventReason<suffix>, else nvmlClocksThrottleReason<suffix> (older
# pynvml), else the literal.
CLOCKS_EVENT_REASON_NAMES: tuple[tuple[str, str, int], ...] = (
    ("gpu_idle", "GpuIdle", 0x1),
    ("applications_clocks_setting", "ApplicationsClocksSetting", 0x2),
    ("sw_power_cap", "SwPowerCap", 0x4),
    ("hw_slowdown", "HwSlowdown", 0x8),
    ("sync_boost", "SyncBoost", 0x10),
    ("sw_thermal", "SwThermalSlowdown", 0x20),
    ("hw_thermal", "HwThermalSlowdown", 0x40),
    ("hw_power_brake", "HwPowerBrakeSlowdown", 0x80),
    ("display_clock_setting", "DisplayClockSetting", 0x100),
)

# Newer call first; older drivers raise FunctionNotFound / NVMLLibraryMismatchError and we try the next.
PROCESS_CALLS = ("nvmlDeviceGetComputeRunningProcesses_v3", "nvmlDeviceGetComputeRunningProcesses_v2",
                 "nvmlDeviceGetComputeRunningProcesses")
CLOCKS_EVENT_CALLS = ("nvmlDeviceGetCurrentClocksEventReasons", "nvmlDeviceGetCurrentClocksThrottleReasons")
CUDA_VERSION_CALLS = ("nvmlSystemGetCudaDriverVersion_v2", "nvmlSystemGetCudaDriverVersion")

MAX_PSTATE = 15  # NVML_PSTATE_15; NVML_PSTATE_UNKNOWN is 32

# Errors after which the whole library must be re-initialised, not just one GPU marked down.
LIBRARY_WIDE = ("NVMLError_Uninitialized", "NVMLError_DriverNotLoaded", "NVMLError_LibraryNotFound",
                "NVMLError_LibRmVersionMismatch")
# Errors that mean the board itself is gone (nvml.h: lost, needs a reset, fell off the bus; Uninitialized
# after a driver reload): they mark the GPU down (gpu_up 0). Looked up by name: an older pynvml may lack one.
GPU_GONE = ("NVMLError_GpuIsLost", "NVMLError_ResetRequired", "NVMLError_GpuNotFound",
            "NVMLError_Uninitialized")
# Errors that, on a MIG device's handle, say it no longer names a MIG device (the GPU was re-partitioned):
# `NvmlCalls.optional` raises them so the MIG reader lists the devices again (exporter/nvml/mig.py). On a
# whole GPU's handle they are one call's error like any other (`NvmlCalls.field`): NVML answers
# InvalidArgument for an argument this driver does not take as well as for a bad handle.
STALE_HANDLE = ("NVMLError_InvalidArgument", "NVMLError_NotFound")


def clocks_event_reasons(nvml: Any) -> tuple[tuple[str, int], ...]:
    """(label, bit) per reason, the bits read from the NVML module's own constants where it has them."""
    found = []
    for label, suffix, literal in CLOCKS_EVENT_REASON_NAMES:
        bit = getattr(nvml, f"nvmlClocksEventReason{suffix}",
                      getattr(nvml, f"nvmlClocksThrottleReason{suffix}", literal))
        found.append((label, int(bit)))
    return tuple(found)


@dataclass
class StaticInfo:
    """What one GPU says once per NVML session."""

    handle: Any
    uuid: str
    name: str
    pci_bus_id: str
    sm_clock_max_hertz: float | None
    memory_clock_max_hertz: float | None
    mig_uuids: tuple[str, ...] = ()
    mig_devices: tuple[Any, ...] = ()  # exporter.nvml.mig.MigDevice, one per MIG device
    board_temperatures: BoardTemperatures | None = None


# BoardTemperatures field -> the pynvml constant nvmlDeviceGetTemperatureThreshold takes for it.
TEMPERATURE_THRESHOLDS = (("shutdown", "NVML_TEMPERATURE_THRESHOLD_SHUTDOWN"),
                          ("slowdown", "NVML_TEMPERATURE_THRESHOLD_SLOWDOWN"),
                          ("gpu_max", "NVML_TEMPERATURE_THRESHOLD_GPU_MAX"))


def error_name(exc: BaseException) -> str:
    """The `error` label of an NVML error: pynvml's class name without its prefix (`Unknown`, `NoData`)."""
    return type(exc).__name__.removeprefix("NVMLError_")


def text(value: Any) -> str:
    return value.decode(errors="replace") if isinstance(value, bytes) else str(value)


def format_cuda_version(value: int) -> str:
    """NVML's 12020 -> "12.2"."""
    return f"{value // 1000}.{(value % 1000) // 10}"


def mhz(value: Any) -> float | None:
    return None if value is None else float(value) * 1e6


def performance_state(value: Any) -> int | None:
    """P0..P15 as NVML numbers them; NVML_PSTATE_UNKNOWN (32) or anything else outside 0..15 is None (left
    out), since gpu_performance_state promises 0..15."""
    if value is None:
        return None
    state = int(value)
    return state if 0 <= state <= MAX_PSTATE else None


class NvmlCalls:
    """Optional and versioned NVML calls; thread-safe. `reset()` on every (re-)init forgets which call name
    worked, since a new driver may have come with the new session.

    What an error of one call costs: NotSupported / NoPermission / FunctionNotFound leave the call's value out
    (`note_unsupported`, logged once at INFO); an error that means the board is gone (GPU_GONE) or the library
    failing (LIBRARY_WIDE) is raised to the caller, and so is a stale handle (STALE_HANDLE) from `optional`,
    the call of MIG handles; any other NVML error (Unknown, CorruptedInforom, NoData, Timeout, ...) leaves
    that call's value out for this read only, is counted per (GPU, call, error) for
    gpu_exporter_nvml_errors_total and logged at WARNING the first time (`field_error`). The counts live as
    long as the process: a re-init does not reset a counter."""

    def __init__(self, nvml: Any) -> None:
        self.nvml = nvml
        mismatch = getattr(nvml, "NVMLLibraryMismatchError", nvml.NVMLError_FunctionNotFound)
        self.left_out: tuple[type[Exception], ...] = (
            nvml.NVMLError_NotSupported, nvml.NVMLError_NoPermission, nvml.NVMLError_FunctionNotFound,
            mismatch)
        self.fallback_errors: tuple[type[Exception], ...] = (nvml.NVMLError_FunctionNotFound, mismatch)
        self.library_wide = tuple(getattr(nvml, n) for n in LIBRARY_WIDE if hasattr(nvml, n))
        self.gone: tuple[type[Exception], ...] = (
            *(getattr(nvml, n) for n in GPU_GONE if hasattr(nvml, n)), *self.library_wide)
        self.stale: tuple[type[Exception], ...] = tuple(
            getattr(nvml, n) for n in STALE_HANDLE if hasattr(nvml, n))
        self._lock = threading.Lock()
        self.resolved: dict[str, str] = {}
        self._unsupported: set[tuple[int, str]] = set()
        self._errors: dict[tuple[int, str, str], int] = {}
        self._failed = threading.local()  # the list `recording()` collects this thread's failed calls in

    def reset(self) -> None:
        with self._lock:
            self.resolved.clear()

    def field(self, index: int, call: str, *args: Any, attr: str | None = None) -> Any:
        """Call NVML on a whole GPU; None when the call is not supported on this GPU or driver (logged once)
        or failed with an error that costs only this value (`field_error`); `gone` errors are raised."""
        return self._call(index, call, args, attr, stale_raised=False)

    def optional(self, index: int, call: str, *args: Any, attr: str | None = None) -> Any:
        """`field`, except that a stale handle (STALE_HANDLE) is raised too: for MIG handles, whose callers
        list the MIG devices again on it."""
        return self._call(index, call, args, attr, stale_raised=True)

    def _call(self, index: int, call: str, args: tuple[Any, ...], attr: str | None,
              stale_raised: bool) -> Any:
        try:
            value = getattr(self.nvml, call)(*args)
        except AttributeError as exc:
            self.note_unsupported(index, call, exc)
            return None
        except self.left_out as exc:
            self.note_unsupported(index, call, exc)
            return None
        except self.nvml.NVMLError as exc:
            if (stale_raised and isinstance(exc, self.stale)) or not self.field_error(index, call, exc):
                raise
            return None
        return getattr(value, attr) if attr else value

    def board_temperatures(self, index: int, handle: Any) -> BoardTemperatures:
        """The board's temperature thresholds; one a board refuses, with any NVML error, is None (they only
        tune the health bands, so they never take a GPU down)."""
        found: dict[str, float | None] = {}
        for field_name, constant in TEMPERATURE_THRESHOLDS:
            which = getattr(self.nvml, constant, None)  # an older pynvml may lack the GPU max constant
            try:
                value = None if which is None else self.optional(
                    index, "nvmlDeviceGetTemperatureThreshold", handle, which)
            except self.nvml.NVMLError as exc:
                log.debug("GPU %d: %s threshold: %s", index, field_name, exc)
                value = None
            found[field_name] = None if value is None else float(value)
        return BoardTemperatures(**found)

    def optional_versioned(self, index: int, logical: str, calls: tuple[str, ...], *args: Any) -> Any:
        try:
            return self.versioned(logical, calls, *args)
        except self.left_out as exc:
            self.note_unsupported(index, "/".join(calls), exc)
            return None
        except self.nvml.NVMLError as exc:
            if not self.field_error(index, self.resolved.get(logical, calls[0]), exc):
                raise
            return None

    def field_error(self, index: int, call: str, exc: BaseException) -> bool:
        """Count `exc` of `call` on GPU `index` and note the call as failed in this thread's `recording()`;
        False (nothing noted) when `exc` says the GPU or the library is gone (`gone`): the caller raises
        it."""
        if isinstance(exc, self.gone):
            return False
        self.count_error(index, call, exc)
        return True

    def count_error(self, index: int, call: str, exc: BaseException) -> None:
        """`field_error` without the check: for a caller that knows what `exc` means for its call (GPM's
        refused pair is an InvalidArgument)."""
        key = (index, call, error_name(exc))
        with self._lock:
            first = key not in self._errors
            self._errors[key] = self._errors.get(key, 0) + 1
        failed: list[str] | None = getattr(self._failed, "calls", None)
        if failed is not None:
            failed.append(call)
        if first:
            log.warning("GPU %d: %s failed: %s (%s); its values are left out while it fails, the GPU's other "
                        "series stay (counted in gpu_exporter_nvml_errors_total, logged once)", index, call,
                        exc, type(exc).__name__)

    @contextmanager
    def recording(self) -> Iterator[list[str]]:
        """Within the block, the calls of this thread that `field_error` noted are appended to the list."""
        outer = getattr(self._failed, "calls", None)
        failed: list[str] = []
        self._failed.calls = failed
        try:
            yield failed
        finally:
            self._failed.calls = outer

    def error_counts(self) -> tuple[NvmlErrorCount, ...]:
        """Every (GPU, call, error) `field_error` counted since the process started, with its count."""
        with self._lock:
            counts = sorted(self._errors.items())
        return tuple(NvmlErrorCount(gpu, call, error, count) for (gpu, call, error), count in counts)

    def versioned(self, logical: str, calls: tuple[str, ...], *args: Any) -> Any:
        """Try the newest call name first, fall back to older ones; remember the one that worked."""
        resolved = self.resolved.get(logical)
        if resolved is not None:
            return getattr(self.nvml, resolved)(*args)
        last: Exception = self.nvml.NVMLError_FunctionNotFound()
        for name in calls:
            fn = getattr(self.nvml, name, None)
            if fn is None:
                continue
            try:
                value = fn(*args)
            except self.fallback_errors as exc:
                log.debug("%s unavailable (%s); trying the older call", name, type(exc).__name__)
                last = exc
                continue
            with self._lock:
                self.resolved[logical] = name
            return value
        raise last

    def note_unsupported(self, index: int, call: str, exc: BaseException) -> None:
        key = (index, call)
        with self._lock:
            if key in self._unsupported:
                return
            self._unsupported.add(key)
        log.info("GPU %d: %s not supported (%s); its series are left out", index, call, type(exc).__name__)
