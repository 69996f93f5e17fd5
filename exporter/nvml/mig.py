"""MIG devices of a GPU in MIG mode, read by the adapter once per layout (static) and on every sweep (memory
of each MIG device, on its own handle).

The profile name (`1g.10gb`) comes from the GPU instance's profile: nvmlDeviceGetGpuInstanceById ->
nvmlGpuInstanceGetInfo().profileId -> nvmlDeviceGetGpuInstanceProfileInfoById().name (`MIG 1g.10gb`), as
nvidia-smi shows it. That last call exists only from driver R580: on older drivers (FunctionNotFound) the
board's profiles are listed once with nvmlDeviceGetGpuInstanceProfileInfo over every profile index, and the
name is the one whose `id` is the instance's profileId. "" only when the driver refuses all of these.

The profile id and placement start of each GPU instance come from the same nvmlGpuInstanceGetInfo: NVIDIA's
DRA driver names a MIG device by them (exporter/pods/dra.py).

A MIG layout can change while the exporter runs (an operator re-partitions a GPU): the old handles then
answer InvalidArgument or NotFound, which `MigReader.snapshots` raises as MigLayoutChanged so the adapter
lists the GPU's MIG devices again instead of marking the GPU down.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any

from exporter.nvml.calls import NvmlCalls, text
from exporter.nvml.snapshots import MigInstanceSnapshot


@dataclass(frozen=True)
class MigDevice:
    """What a MIG device says once per NVML session."""

    handle: Any
    uuid: str
    slot: int
    gpu_instance_id: int | None
    compute_instance_id: int | None
    profile: str
    profile_id: int | None = None
    placement_start: int | None = None


@dataclass(frozen=True)
class _Profile:
    """What nvmlGpuInstanceGetInfo tells of a GPU instance: its profile (id and name) and placement."""

    name: str = ""
    profile_id: int | None = None
    placement_start: int | None = None


class MigLayoutChanged(Exception):
    """A MIG device or GPU instance handle of this GPU is stale: its MIG layout changed."""


class MigReader:
    """Lists a GPU's MIG devices and reads their memory; remembers each GPU's profile names per session."""

    def __init__(self, calls: NvmlCalls) -> None:
        self._calls = calls
        self._lock = threading.Lock()
        self._names: dict[int, dict[int, str]] = {}  # GPU index -> profile id -> name

    def reset(self) -> None:
        with self._lock:
            self._names.clear()

    def mig_mode(self, index: int, handle: Any) -> bool:
        """True when GPU `index` is in MIG mode now (False when it is not, or cannot be)."""
        mode = self._calls.optional(index, "nvmlDeviceGetMigMode", handle)
        return bool(mode) and int(mode[0]) == getattr(self._calls.nvml, "NVML_DEVICE_MIG_ENABLE", 1)

    def devices(self, index: int, handle: Any) -> tuple[MigDevice, ...]:
        """The MIG devices of GPU `index`; () when MIG is off or not supported."""
        calls, nvml = self._calls, self._calls.nvml
        if not self.mig_mode(index, handle):
            return ()
        found = []
        for slot in range(int(calls.optional(index, "nvmlDeviceGetMaxMigDeviceCount", handle) or 0)):
            try:
                mig = nvml.nvmlDeviceGetMigDeviceHandleByIndex(handle, slot)
                uuid = text(nvml.nvmlDeviceGetUUID(mig))
            except nvml.NVMLError:  # NotFound: that slot holds no MIG device
                continue
            gpu_instance = calls.optional(index, "nvmlDeviceGetGpuInstanceId", mig)
            compute_instance = calls.optional(index, "nvmlDeviceGetComputeInstanceId", mig)
            profile = self._profile(index, handle, gpu_instance)
            found.append(MigDevice(mig, uuid, slot, None if gpu_instance is None else int(gpu_instance),
                                   None if compute_instance is None else int(compute_instance),
                                   profile.name, profile.profile_id, profile.placement_start))
        return tuple(found)

    def _profile(self, index: int, handle: Any, gpu_instance_id: int | None) -> _Profile:
        if gpu_instance_id is None:
            return _Profile()
        calls = self._calls
        instance = calls.optional(index, "nvmlDeviceGetGpuInstanceById", handle, gpu_instance_id)
        info = None if instance is None else calls.optional(index, "nvmlGpuInstanceGetInfo", instance)
        if info is None:
            return _Profile()
        profile_id = int(info.profileId)
        placement = getattr(info, "placement", None)
        start = None if placement is None else int(placement.start)
        return _Profile(self._profile_name(index, handle, profile_id), profile_id, start)

    def _profile_name(self, index: int, handle: Any, profile_id: int) -> str:
        calls = self._calls
        with self._lock:
            known = self._names.get(index, {}).get(profile_id)
        if known is not None:
            return known
        missing: tuple[type[Exception], ...] = (*calls.fallback_errors, AttributeError)
        try:
            name = text(calls.nvml.nvmlDeviceGetGpuInstanceProfileInfoById(handle, profile_id).name)
            names = {profile_id: name}
        except missing:  # before R580: list the board's profiles instead
            names = self._profiles_by_index(index, handle)
        except calls.left_out as exc:
            calls.note_unsupported(index, "nvmlDeviceGetGpuInstanceProfileInfoById", exc)
            names = {}
        names = {key: name.removeprefix("MIG ").strip() for key, name in names.items()}
        names.setdefault(profile_id, "")  # asked once: a profile no call names stays unnamed this session
        with self._lock:
            self._names.setdefault(index, {}).update(names)
        return names[profile_id]

    def _profiles_by_index(self, index: int, handle: Any) -> dict[int, str]:
        """profile id -> name of every GPU instance profile the board has (nvmlDeviceGetGpuInstanceProfileInfo
        over NVML's profile indexes; a profile the board lacks answers NotSupported or InvalidArgument)."""
        nvml = self._calls.nvml
        refused = (*self._calls.left_out, nvml.NVMLError_InvalidArgument, nvml.NVMLError_NotFound)
        names = {}
        for profile in range(int(getattr(nvml, "NVML_GPU_INSTANCE_PROFILE_COUNT", 0x12))):
            try:
                info = nvml.nvmlDeviceGetGpuInstanceProfileInfo(handle, profile)
            except refused:
                continue
            names[int(info.id)] = text(info.name)
        if not names:
            self._calls.note_unsupported(index, "nvmlDeviceGetGpuInstanceProfileInfo",
                                         nvml.NVMLError_NotSupported())
        return names

    def snapshots(self, index: int, devices: tuple[MigDevice, ...]) -> tuple[MigInstanceSnapshot, ...]:
        """Each MIG device with its memory now (nvmlDeviceGetMemoryInfo on the MIG handle); raises
        MigLayoutChanged when a handle is stale."""
        nvml = self._calls.nvml
        found = []
        for device in devices:
            try:
                memory = self._calls.optional(index, "nvmlDeviceGetMemoryInfo", device.handle)
            except (nvml.NVMLError_InvalidArgument, nvml.NVMLError_NotFound) as exc:
                raise MigLayoutChanged(f"MIG device {device.uuid}: {type(exc).__name__}") from exc
            found.append(MigInstanceSnapshot(
                uuid=device.uuid, slot=device.slot, gpu_instance_id=device.gpu_instance_id,
                compute_instance_id=device.compute_instance_id, profile=device.profile,
                profile_id=device.profile_id, placement_start=device.placement_start,
                memory_used_bytes=None if memory is None else int(memory.used),
                memory_free_bytes=None if memory is None else int(memory.free),
                memory_total_bytes=None if memory is None else int(memory.total)))
        return tuple(found)
