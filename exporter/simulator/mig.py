"""The MIG part of the simulated NVML surface: a GPU group with `mig: N` in the YAML is in MIG mode with N
MIG devices whose UUIDs (`MIG-...`) are what the device plugin would advertise as `nvidia.com/mig-*` ids.

Like real NVML, a GPU in MIG mode does not support device or per-process utilization
(`MIG_UNSUPPORTED_CALLS` raise NVMLError_NotSupported); memory, power, temperature, clocks, ECC and the
process list still answer for the whole GPU. Each MIG device is one GPU instance of the group's
`mig_profile` (GPU instance ids from the profile's placement, compute instance 0 filling it) with its own
memory (`nvmlDeviceGetMemoryInfo` on its handle: the processes placed on it, process i on MIG device
i mod N) and its own share of the GPU's load for GPM (`nvmlGpmMigSampleGet`).

Kept apart from exporter/simulator/nvml.py so each stays small; `SimulatedNvml` inherits these methods.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any

from exporter.nvml.adapter import real_nvml
from exporter.simulator.physics import process_memory

_pynvml = real_nvml()
MIG_RESERVED_BYTES = 128 * 1024 * 1024  # what the driver keeps on each MIG device

NVML_DEVICE_MIG_DISABLE = 0
NVML_DEVICE_MIG_ENABLE = 1

# NVML's docs: "On MIG-enabled GPUs, querying device utilization rates / process utilization is not currently
# supported" (both raise NVML_ERROR_NOT_SUPPORTED).
MIG_UNSUPPORTED_CALLS = frozenset({"nvmlDeviceGetUtilizationRates", "nvmlDeviceGetProcessUtilization"})


@dataclass(eq=False)
class SimMigHandle:
    """What nvmlDeviceGetMigDeviceHandleByIndex returns: MIG device `slot` of GPU `parent`."""

    parent: int
    slot: int


def mig_uuid(seed: int, index: int, slot: int) -> str:
    digest = hashlib.sha256(f"simulated-mig:{seed}:{index}:{slot}".encode()).hexdigest()
    return f"MIG-{digest[:8]}-{digest[8:12]}-{digest[12:16]}-{digest[16:20]}-{digest[20:32]}"


class MigSurface:
    """pynvml's MIG calls over the simulated GPUs (needs `_gpu`, `_lock`, `config` of SimulatedNvml)."""

    _lock: Any
    config: Any

    def _gpu(self, call: str, handle: Any) -> tuple[Any, float]:  # provided by SimulatedNvml
        raise NotImplementedError

    def nvmlDeviceGetMigMode(self, device: Any) -> list[int]:
        with self._lock:
            gpu, _ = self._gpu("nvmlDeviceGetMigMode", device)
            mode = NVML_DEVICE_MIG_ENABLE if gpu.spec.mig_devices else NVML_DEVICE_MIG_DISABLE
            return [mode, mode]

    def nvmlDeviceGetMaxMigDeviceCount(self, device: Any) -> int:
        with self._lock:
            gpu, _ = self._gpu("nvmlDeviceGetMaxMigDeviceCount", device)
            return 7 if gpu.spec.mig_devices else 0

    def nvmlDeviceGetMigDeviceHandleByIndex(self, device: Any, index: int) -> SimMigHandle:
        with self._lock:
            gpu, _ = self._gpu("nvmlDeviceGetMigDeviceHandleByIndex", device)
            if not gpu.spec.mig_devices:
                raise self.NVMLError_NotSupported()  # type: ignore[attr-defined]
            if not 0 <= index < gpu.spec.mig_devices:
                raise self.NVMLError_NotFound()  # type: ignore[attr-defined]
            return SimMigHandle(gpu.index, index)

    def mig_uuid_of(self, handle: SimMigHandle) -> str:
        return mig_uuid(self.config.seed, handle.parent, handle.slot)

    # -- MIG instances --------------------------------------------------------------------------------
    def _mig(self, call: str, handle: Any) -> tuple[Any, float]:
        """The parent GPU of a MIG device handle (InvalidArgument for a whole-GPU handle, as NVML)."""
        if not isinstance(handle, SimMigHandle):
            raise _pynvml.NVMLError_InvalidArgument()
        return self._gpu(call, self._handles[handle.parent])  # type: ignore[attr-defined]

    def nvmlDeviceGetGpuInstanceId(self, device: Any) -> int:
        with self._lock:
            gpu, _ = self._mig("nvmlDeviceGetGpuInstanceId", device)
            return int(gpu.spec.mig_profile.first_gpu_instance_id + device.slot)

    def nvmlDeviceGetComputeInstanceId(self, device: Any) -> int:
        with self._lock:
            self._mig("nvmlDeviceGetComputeInstanceId", device)
            return 0

    def nvmlDeviceGetGpuInstanceById(self, device: Any, gpuInstanceId: int) -> SimMigHandle:
        """A GPU instance handle; this simulator's GPU instances and MIG devices are one to one."""
        with self._lock:
            gpu, _ = self._gpu("nvmlDeviceGetGpuInstanceById", device)
            return SimMigHandle(gpu.index, self._slot_of(gpu, gpuInstanceId))

    def nvmlGpuInstanceGetInfo(self, gpuInstance: Any) -> Any:
        with self._lock:
            gpu, _ = self._mig("nvmlGpuInstanceGetInfo", gpuInstance)
            profile = gpu.spec.mig_profile
            placement = _Bag(start=gpuInstance.slot * profile.slices, size=profile.slices)
            return _Bag(device=self._handles[gpu.index],  # type: ignore[attr-defined]
                        id=profile.first_gpu_instance_id + gpuInstance.slot, profileId=profile.nvml_profile,
                        placement=placement)

    def nvmlDeviceGetGpuInstanceProfileInfoById(self, device: Any, profileId: int) -> Any:
        """pynvml's c_nvmlGpuInstanceProfileInfo_v2_t, `name` as nvidia-smi shows it (`MIG 1g.10gb`)."""
        with self._lock:
            gpu, _ = self._gpu("nvmlDeviceGetGpuInstanceProfileInfoById", device)
            model = gpu.spec.model
            profile = next((p for p in model.mig_profiles if p.nvml_profile == profileId), None)
            if profile is None:
                raise _pynvml.NVMLError_NotSupported() if not model.mig_capable else \
                    _pynvml.NVMLError_InvalidArgument()
            info = _pynvml.c_nvmlGpuInstanceProfileInfo_v2_t()
            info.id, info.sliceCount = profile.nvml_profile, profile.slices
            info.instanceCount = 7 // profile.slices
            info.memorySizeMB = _mig_total(model.memory_bytes, profile.memory_eighths) // (1024 * 1024)
            info.name = f"MIG {profile.name}".encode()
            return info

    def mig_memory_info(self, handle: SimMigHandle) -> Any:
        """nvmlDeviceGetMemoryInfo on a MIG device: its slice of memory and the processes placed on it."""
        gpu, t = self._mig("nvmlDeviceGetMemoryInfo", handle)
        total = _mig_total(gpu.spec.model.memory_bytes, gpu.spec.mig_profile.memory_eighths)
        util = gpu.utilization(t)
        used = MIG_RESERVED_BYTES + sum(
            process_memory(p, util) for i, p in enumerate(gpu.processes())
            if i % gpu.spec.mig_devices == handle.slot)
        used = min(used, total)
        return _Bag(total=total, free=total - used, used=used)

    def mig_instance_utilization(self, gpu: Any, gpu_instance_id: int, t: float) -> float:
        """The load of one GPU instance: the GPU's, scaled per instance so they differ (NotFound if none)."""
        slot = self._slot_of(gpu, gpu_instance_id)
        return float(gpu.utilization(t) * (0.5 + 0.5 * (slot + 1) / gpu.spec.mig_devices))

    def mig_ids_of_process(self, gpu: Any, position: int) -> tuple[int, int]:
        """(gpuInstanceId, computeInstanceId) of the `position`-th process of a GPU (0xFFFFFFFF: no MIG)."""
        if not gpu.spec.mig_devices:
            return 0xFFFFFFFF, 0xFFFFFFFF
        return gpu.spec.mig_profile.first_gpu_instance_id + position % gpu.spec.mig_devices, 0

    @staticmethod
    def _slot_of(gpu: Any, gpu_instance_id: int) -> int:
        if not gpu.spec.mig_devices:
            raise _pynvml.NVMLError_NotSupported()
        slot = gpu_instance_id - gpu.spec.mig_profile.first_gpu_instance_id
        if not 0 <= slot < gpu.spec.mig_devices:
            raise _pynvml.NVMLError_NotFound()
        return int(slot)


class _Bag:
    """Attribute bag for the structures holding a device handle (a ctypes field cannot hold ours)."""

    def __init__(self, **fields: Any) -> None:
        self.__dict__.update(fields)


def _mig_total(memory_bytes: int, eighths: int) -> int:
    """A MIG device's memory: its eighths of the board, less what the MIG layout reserves, in whole MiB."""
    mib = 1024 * 1024
    return (memory_bytes * eighths // 8 - 4 * eighths * mib) // mib * mib
