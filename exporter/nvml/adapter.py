"""NVML adapter: the only module that imports pynvml; it turns NVML answers into frozen snapshots.
It owns the NVML session, each GPU's static facts and MIG listing, and the background reads. Its call helpers
(optional / versioned calls, reason bits, static facts) live in exporter/nvml/calls.py, a sweep's per-GPU
reads in exporter/nvml/sweep.py, the XID event set in exporter/nvml/events.py: all call NVML only through
the module object handed over here.

The adapter takes the NVML module-like object as a constructor argument (`pynvml` on a GPU node, a
`exporter.simulator.nvml.SimulatedNvml` in the demo and the tests), so the same code runs on both. NVML errors
are mapped here and in NvmlCalls: NotSupported / NoPermission leave one field out (logged once per GPU and
call); an error saying the board is gone (GpuIsLost, ResetRequired, GpuNotFound, Uninitialized), or one
reading the GPU's identity (handle, UUID, name), marks that GPU down; any other error of one call (Unknown,
CorruptedInforom, NoData, Timeout, ...) leaves that call's values out of this read and is counted
(gpu_exporter_nvml_errors_total); a library-wide failure of every GPU raises `NvmlUnavailableError`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import threading
import time
from collections.abc import Callable
from typing import Any

import pynvml

from exporter.errors import NvmlEventError, NvmlUnavailableError
from exporter.nvml.calls import (
    CUDA_VERSION_CALLS,
    NvmlCalls,
    StaticInfo,
    clocks_event_reasons,
    format_cuda_version,
    mhz,
    text,
)
from exporter.nvml.events import XidEventSet, handle_key
from exporter.nvml.gpm import GpmReader
from exporter.nvml.memory_link import ReliabilityReader
from exporter.nvml.mig import MigLayoutChanged, MigReader
from exporter.nvml.snapshots import (
    BackgroundReading,
    DeviceSnapshot,
    MigInstanceSnapshot,
    NodeSnapshot,
    NvmlErrorCount,
    ProcessSnapshot,
    ProcessUtilizationSample,
    XidEvent,
)
from exporter.nvml.sweep import DeviceReader

__all__ = [
    "CLOCKS_EVENT_REASONS", "BackgroundReading", "DeviceSnapshot", "NodeSnapshot", "NvmlAdapter",
    "ProcessSnapshot", "ProcessUtilizationSample", "XidEvent", "format_cuda_version", "real_nvml",
]

log = logging.getLogger(__name__)

# The reason labels with pynvml's own bits (this pynvml's constants, literal fallback); see nvml_calls.py.
CLOCKS_EVENT_REASONS: tuple[tuple[str, int], ...] = clocks_event_reasons(pynvml)

PCIE_KB = 1024  # nvmlDeviceGetPcieThroughput answers in KB/s


def real_nvml() -> Any:
    """The pynvml module itself: what the adapter uses on a GPU node (and where pynvml's errors live)."""
    return pynvml


class NvmlAdapter:
    """Reads GPUs through an NVML module-like object; thread-safe for the scrape, PCIe and XID threads."""

    def __init__(self, nvml: Any, clock: Callable[[], float] = time.time) -> None:
        for name in ("NVMLError", "NVMLError_NotSupported", "NVMLError_FunctionNotFound", "nvmlInit"):
            if not hasattr(nvml, name):
                raise TypeError(f"NvmlAdapter needs a pynvml-like module; {nvml!r} has no {name}")
        self._nvml = nvml
        self._clock = clock
        self._calls = NvmlCalls(nvml)
        self._error: type[Exception] = nvml.NVMLError
        self._left_out = self._calls.left_out
        self._library_wide = self._calls.library_wide
        self._lock = threading.Lock()
        self._field = self._calls.field
        self._versioned = self._calls.versioned
        self._note_unsupported = self._calls.note_unsupported
        self._static: dict[int, StaticInfo] = {}
        self._device = DeviceReader(nvml, self._calls)
        self._gpm = GpmReader(nvml, self._calls)
        self._mig = MigReader(self._calls)
        self._reliability = ReliabilityReader(self._calls)
        self._count = 0
        self._initialized = False
        self.generation = 0  # bumped by every successful init: handles of an older session are stale
        self.driver_version = ""
        self.cuda_version = ""

    # -- lifecycle ------------------------------------------------------------------------------------
    def init(self) -> None:
        """Load NVML and read the static facts once; raises NvmlUnavailableError with NVML's reason."""
        self._calls.reset()  # a driver swapped while NVML was down may support other call names
        self._gpm.reset()
        self._mig.reset()
        self._reliability.reset()
        try:
            self._nvml.nvmlInit()
            self.driver_version = text(self._nvml.nvmlSystemGetDriverVersion())
            try:
                self.cuda_version = format_cuda_version(int(self._versioned("cuda", CUDA_VERSION_CALLS)))
            except self._left_out:
                self.cuda_version = ""
            count = int(self._nvml.nvmlDeviceGetCount())
        except self._error as exc:
            raise NvmlUnavailableError(f"NVML init failed: {exc} ({type(exc).__name__})") from exc
        except OSError as exc:
            raise NvmlUnavailableError(f"NVML init failed: {exc}") from exc
        with self._lock:
            self._static.clear()
            self._count = count
            self._initialized = True
            self.generation += 1
        for index in range(count):
            # a failure here is reported as gpu_up 0 on the first sweep, and retried there
            with contextlib.suppress(self._error):
                self._static_info(index)

    def shutdown(self) -> None:
        with self._lock:
            was = self._initialized
            self._initialized = False
            self._static.clear()
        if was:
            self._gpm.reset()  # free the GPM samples while the library that allocated them is loaded
            try:
                self._nvml.nvmlShutdown()
            except self._error as exc:
                log.debug("nvmlShutdown: %s", exc)

    @property
    def initialized(self) -> bool:
        return self._initialized

    @property
    def device_count(self) -> int:
        return self._count

    # -- sweeps ---------------------------------------------------------------------------------------
    def read(self) -> NodeSnapshot:
        """Read every GPU once. Raises NvmlUnavailableError when the library as a whole stopped answering."""
        if not self._initialized:
            raise NvmlUnavailableError("NVML is not initialized")
        start = time.perf_counter()
        devices = tuple(self.read_device(index) for index in range(self._count))
        if devices and all(not d.up and d.error and d.error.startswith("library:") for d in devices):
            raise NvmlUnavailableError(f"NVML stopped answering: {devices[0].error}")
        now = self._clock()
        return NodeSnapshot(
            nvml_up=True, driver_version=self.driver_version, cuda_version=self.cuda_version, devices=devices,
            collected_at=now, duration_seconds=time.perf_counter() - start, last_success=now,
            nvml_errors=self._calls.error_counts())

    @property
    def gone_errors(self) -> tuple[type[Exception], ...]:
        """The NVML errors that mark a GPU down on a sweep (the board or the library gone): never one
        field's error."""
        return self._calls.gone

    def error_counts(self) -> tuple[NvmlErrorCount, ...]:
        """NVML call errors that cost one call's values, per (GPU, call, error), since the process started."""
        return self._calls.error_counts()

    def read_device(self, index: int) -> DeviceSnapshot:
        """One GPU; an error that the sweep raises (the board or the library gone, the GPU's identity
        unreadable) gives a snapshot with up=False and the reason."""
        static: StaticInfo | None = None
        try:
            static = self._static_info(index)
            return self._device.read(index, static, self._mig_snapshots)
        except self._error as exc:
            prefix = "library: " if isinstance(exc, self._library_wide) else ""
            reason = f"{prefix}{exc} ({type(exc).__name__})"
            if static is None:
                return DeviceSnapshot(index=index, uuid="", name="", pci_bus_id="", up=False, error=reason)
            return DeviceSnapshot(index=index, uuid=static.uuid, name=static.name,
                                  pci_bus_id=static.pci_bus_id, up=False, error=reason)

    def _static_info(self, index: int) -> StaticInfo:
        """GPU `index`'s facts, read once per session. Any error of the handle, UUID or name is raised (a GPU
        without its identity is down); an error of one optional fact (PCI bus id, max clocks) leaves it out of
        this read, which is then not kept, so the next sweep asks again."""
        info = self._static.get(index)
        if info is not None:
            return info
        with self._calls.recording() as failed:
            info = self._read_static(index)
        if not failed:
            with self._lock:
                self._static[index] = info
        return info

    def _read_static(self, index: int) -> StaticInfo:
        nvml = self._nvml
        handle = nvml.nvmlDeviceGetHandleByIndex(index)
        info = StaticInfo(
            handle=handle,
            uuid=text(nvml.nvmlDeviceGetUUID(handle)),
            name=text(nvml.nvmlDeviceGetName(handle)),
            pci_bus_id=text(self._field(index, "nvmlDeviceGetPciInfo", handle, attr="busId") or ""),
            sm_clock_max_hertz=mhz(self._field(index, "nvmlDeviceGetMaxClockInfo", handle,
                                                     nvml.NVML_CLOCK_SM)),
            memory_clock_max_hertz=mhz(self._field(index, "nvmlDeviceGetMaxClockInfo", handle,
                                                         nvml.NVML_CLOCK_MEM)),
            board_temperatures=self._calls.board_temperatures(index, handle),
        )
        mig = self._mig.devices(index, handle)
        info.mig_devices, info.mig_uuids = mig, tuple(device.uuid for device in mig)
        return info

    def _relist_mig(self, index: int, static: StaticInfo, why: str) -> StaticInfo:
        """List GPU `index`'s MIG devices again (they changed), keeping the ones still there; frees the GPM
        samples of GPU instances that are gone."""
        mig = self._mig.devices(index, static.handle, static.mig_devices)
        info = dataclasses.replace(static, mig_devices=mig, mig_uuids=tuple(device.uuid for device in mig))
        with self._lock:
            if self._static.get(index) is static:
                self._static[index] = info
        self._gpm.forget_instances(index, {d.gpu_instance_id for d in mig if d.gpu_instance_id is not None})
        log.info("GPU %d: MIG devices changed (%s): %d MIG device(s) now", index, why, len(mig))
        return info

    def _mig_snapshots(self, index: int, static: StaticInfo) -> tuple[MigInstanceSnapshot, ...]:
        try:
            return self._mig.snapshots(index, static.mig_devices)
        except MigLayoutChanged as exc:
            static = self._relist_mig(index, static, str(exc))
        try:
            return self._mig.snapshots(index, static.mig_devices)
        except MigLayoutChanged:  # changing while we read: the next sweep lists it again
            return ()

    # -- background-only calls ------------------------------------------------------------------------
    def read_pcie(self, index: int) -> tuple[float | None, float | None]:
        """PCIe tx/rx in bytes/s. Blocks ~20 ms per counter on real GPUs: call it off the scrape path."""
        static = self._static.get(index)
        if static is None:
            return None, None
        nvml = self._nvml
        tx = self._field(index, "nvmlDeviceGetPcieThroughput", static.handle, nvml.NVML_PCIE_UTIL_TX_BYTES)
        rx = self._field(index, "nvmlDeviceGetPcieThroughput", static.handle, nvml.NVML_PCIE_UTIL_RX_BYTES)
        return (None if tx is None else tx * PCIE_KB), (None if rx is None else rx * PCIE_KB)

    def read_background(self, index: int) -> BackgroundReading | None:
        """GPM since the previous call (whole GPU and each MIG GPU instance) and link and counter health;
        many NVML calls on an NVLink board: call it off the scrape path. None before GPU `index` answered."""
        static = self._static.get(index)
        if static is None:
            return None
        with self._calls.recording() as failed:  # a failed read says nothing of the layout: no relist on it
            listed = self._mig.uuids(index, static.handle)
        if not failed and listed != static.mig_uuids:  # created, destroyed, MIG on or off
            static = self._relist_mig(index, static, "listed at the background pass")
        instances = tuple(d.gpu_instance_id for d in static.mig_devices if d.gpu_instance_id is not None)
        try:
            supported, gpm, mig_gpm = self._gpm.read_pass(index, static.handle, instances)
        except MigLayoutChanged as exc:
            self._relist_mig(index, static, str(exc))
            supported, gpm, mig_gpm = self._gpm.supported(index, static.handle), None, ()
        return BackgroundReading(supported, gpm, mig_gpm, self._reliability.read(index, static.handle))

    def process_utilization(
        self, index: int, since_us: int = 0
    ) -> tuple[ProcessUtilizationSample, ...] | None:
        """Per-process utilization samples newer than `since_us`; () when none, None when unsupported."""
        static = self._static_info(index)
        try:
            samples = self._nvml.nvmlDeviceGetProcessUtilization(static.handle, since_us)
        except self._nvml.NVMLError_NotFound:
            return ()
        except self._left_out as exc:
            self._note_unsupported(index, "nvmlDeviceGetProcessUtilization", exc)
            return None
        except self._error as exc:
            if not self._calls.field_error(index, "nvmlDeviceGetProcessUtilization", exc):
                raise
            return None
        return tuple(ProcessUtilizationSample(
            int(s.pid), int(s.timeStamp), s.smUtil / 100.0, s.memUtil / 100.0, s.encUtil / 100.0,
            s.decUtil / 100.0) for s in samples)

    def open_xid_events(self) -> XidEventSet:
        """An NVML event set with XID critical errors registered on every GPU that accepts them.

        Raises NvmlEventError when the set cannot be created; a GPU refusing registration is skipped (logged
        once) and left out of `XidEventSet.registered`.
        """
        nvml = self._nvml
        try:
            event_set = nvml.nvmlEventSetCreate()
        except self._error as exc:
            raise NvmlEventError(f"nvmlEventSetCreate failed: {exc} ({type(exc).__name__})") from exc
        registered: list[int] = []
        for index in range(self._count):
            try:
                static = self._static_info(index)
                nvml.nvmlDeviceRegisterEvents(static.handle, nvml.nvmlEventTypeXidCriticalError, event_set)
            except self._left_out as exc:
                self._note_unsupported(index, "nvmlDeviceRegisterEvents", exc)
            except self._error as exc:
                log.warning("GPU %d: XID events not watched: %s (%s)", index, exc, type(exc).__name__)
            else:
                registered.append(index)
        return XidEventSet(nvml, event_set, registered=tuple(registered), generation=self.generation,
                           index_of_handle=self.index_of_handle)

    def uuid_of(self, index: int) -> str | None:
        """The UUID read at init for GPU `index`; None when it could not be read."""
        static = self._static.get(index)
        return static.uuid if static is not None else None

    def mig_parent(self, mig_uuid: str) -> str | None:
        """The UUID of the GPU a MIG device (`MIG-...`) belongs to, from the MIG devices listed at init."""
        for static in list(self._static.values()):
            if mig_uuid in static.mig_uuids:
                return static.uuid
        return None

    def index_of_handle(self, handle: Any) -> int | None:
        key = handle_key(handle)
        for index, static in list(self._static.items()):
            if static.handle is handle or handle_key(static.handle) == key:
                return index
        try:
            return int(self._nvml.nvmlDeviceGetIndex(handle))
        except self._error:
            return None
