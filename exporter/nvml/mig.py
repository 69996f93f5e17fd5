"""MIG devices of a GPU in MIG mode, read by the adapter once per NVML session (static) and on every sweep
(memory of each MIG device, on its own handle).

The profile name (`1g.10gb`) comes from the GPU instance's profile: nvmlDeviceGetGpuInstanceById ->
nvmlGpuInstanceGetInfo().profileId -> nvmlDeviceGetGpuInstanceProfileInfoById().name (`MIG 1g.10gb`), as
nvidia-smi shows it; "" when the driver refuses any of these.
"""

from __future__ import annotations

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


def mig_devices(calls: NvmlCalls, index: int, handle: Any) -> tuple[MigDevice, ...]:
    """The MIG devices of GPU `index`; () when MIG is off or not supported."""
    nvml = calls.nvml
    mode = calls.optional(index, "nvmlDeviceGetMigMode", handle)
    if not mode or int(mode[0]) != getattr(nvml, "NVML_DEVICE_MIG_ENABLE", 1):
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
        found.append(MigDevice(mig, uuid, slot, None if gpu_instance is None else int(gpu_instance),
                               None if compute_instance is None else int(compute_instance),
                               _profile(calls, index, handle, gpu_instance)))
    return tuple(found)


def _profile(calls: NvmlCalls, index: int, handle: Any, gpu_instance_id: int | None) -> str:
    if gpu_instance_id is None:
        return ""
    instance = calls.optional(index, "nvmlDeviceGetGpuInstanceById", handle, gpu_instance_id)
    info = None if instance is None else calls.optional(index, "nvmlGpuInstanceGetInfo", instance)
    profile = None if info is None else calls.optional(
        index, "nvmlDeviceGetGpuInstanceProfileInfoById", handle, int(info.profileId))
    return "" if profile is None else text(profile.name).removeprefix("MIG ").strip()


def mig_snapshots(calls: NvmlCalls, index: int,
                  devices: tuple[MigDevice, ...]) -> tuple[MigInstanceSnapshot, ...]:
    """Each MIG device with its memory now (nvmlDeviceGetMemoryInfo on the MIG handle)."""
    found = []
    for device in devices:
        memory = calls.optional(index, "nvmlDeviceGetMemoryInfo", device.handle)
        found.append(MigInstanceSnapshot(
            uuid=device.uuid, slot=device.slot, gpu_instance_id=device.gpu_instance_id,
            compute_instance_id=device.compute_instance_id, profile=device.profile,
            memory_used_bytes=None if memory is None else int(memory.used),
            memory_total_bytes=None if memory is None else int(memory.total)))
    return tuple(found)
