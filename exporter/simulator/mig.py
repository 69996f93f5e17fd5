"""The MIG part of the simulated NVML surface: a GPU group with `mig: N` in the YAML is in MIG mode with N GPU
instances of the group's `mig_profile`, each split into `mig_compute_instances` compute instances; every
compute instance is a MIG device whose UUID (`MIG-...`) is what the device plugin would advertise.

Like real NVML, a GPU in MIG mode does not support device or per-process utilization
(`MIG_UNSUPPORTED_CALLS` raise NVMLError_NotSupported); memory, power, temperature, clocks, ECC and the
process list still answer for the whole GPU. GPU instance ids come from the profile's placement (7..13 for
`1g.10gb`), compute instance ids count from 0 in each GPU instance. A GPU instance's memory is shared by its
compute instances (`nvmlDeviceGetMemoryInfo` on any of their handles: the processes placed on it, process i
on GPU instance i mod N) and it has its own share of the GPU's load for GPM (`nvmlGpmMigSampleGet`).

The layout changes at run time (a `mig_layout` fault at its time, or `set_mig_layout`), as an operator's
`nvidia-smi mig -dci/-dgi/-cgi` would: handles of the old layout then answer InvalidArgument and the old
GPU instance ids NotFound, as NVML answers for destroyed instances. Profiles have NVML's two numbers: the
profile index nvmlDeviceGetGpuInstanceProfileInfo takes and the profile id nvmlGpuInstanceGetInfo reports
(what nvmlDeviceGetGpuInstanceProfileInfoById, R580 and newer only, takes).

Kept apart from exporter/simulator/nvml.py so each stays small; `SimulatedNvml` inherits these methods.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any

from exporter.nvml.adapter import real_nvml
from exporter.simulator.models import MigLayout
from exporter.simulator.physics import SimGpu, process_memory

_pynvml = real_nvml()
MIG_RESERVED_BYTES = 128 * 1024 * 1024  # what the driver keeps on each GPU instance

NVML_DEVICE_MIG_DISABLE = 0
NVML_DEVICE_MIG_ENABLE = 1

# NVML's docs: "On MIG-enabled GPUs, querying device utilization rates / process utilization is not currently
# supported" (both raise NVML_ERROR_NOT_SUPPORTED).
MIG_UNSUPPORTED_CALLS = frozenset({"nvmlDeviceGetUtilizationRates", "nvmlDeviceGetProcessUtilization"})


@dataclass(eq=False)
class SimMigHandle:
    """What nvmlDeviceGetMigDeviceHandleByIndex returns: MIG device `slot` of GPU `parent`'s layout
    `generation`."""

    parent: int
    slot: int
    generation: int = 0


@dataclass(eq=False)
class SimGpuInstance:
    """What nvmlDeviceGetGpuInstanceById returns."""

    parent: int
    gpu_instance_id: int
    generation: int


def mig_uuid(seed: int, index: int, slot: int, generation: int = 0) -> str:
    key = f"simulated-mig:{seed}:{index}:{slot}" + (f":{generation}" if generation else "")
    digest = hashlib.sha256(key.encode()).hexdigest()
    return f"MIG-{digest[:8]}-{digest[8:12]}-{digest[12:16]}-{digest[16:20]}-{digest[20:32]}"


class MigSurface:
    """pynvml's MIG calls over the simulated GPUs (needs `_gpu`, `_gpus`, `_handles`, `_lock`, `config` of
    SimulatedNvml)."""

    _lock: Any
    _gpus: list[SimGpu]
    config: Any

    def _gpu(self, call: str, handle: Any) -> tuple[SimGpu, float]:  # provided by SimulatedNvml
        raise NotImplementedError

    # -- load driver (tests) --------------------------------------------------------------------------
    def set_mig_layout(self, index: int, gpu_instances: int, profile: str | None = None,
                       compute_instances: int = 1) -> None:
        """Re-partition GPU `index` now: `gpu_instances` of `profile` (default the smallest), each split into
        `compute_instances`; 0 GPU instances turns MIG off. Handles of the old layout go stale."""
        with self._lock:
            gpu = self._gpus[index]
            layout = None
            if gpu_instances:
                model = gpu.spec.model
                found = model.mig_profile(profile) if profile else next(iter(model.mig_profiles), None)
                if found is None:
                    raise ValueError(f"GPU {index} ({gpu.spec.model.key}) has no MIG profile {profile!r}")
                layout = MigLayout(found, gpu_instances, compute_instances)
                problem = layout.fits()
                if problem is not None:
                    raise ValueError(problem)
            self._relayout(gpu, layout)

    @staticmethod
    def _relayout(gpu: SimGpu, layout: MigLayout | None) -> None:
        gpu.mig = layout
        gpu.mig_generation += 1

    def _apply_mig_faults(self, gpu: SimGpu, t: float) -> None:
        """The layout of the latest mig_layout fault due for this GPU (applied once, when it falls due)."""
        due = [(n, f) for n, f in enumerate(self.config.faults)
               if f.type == "mig_layout" and f.active(t) and f.applies_to(gpu.index)]
        applied: dict[int, int] = self.__dict__.setdefault("_mig_faults_applied", {})
        if due and applied.get(gpu.index, -1) < due[-1][0]:
            applied[gpu.index] = due[-1][0]
            self._relayout(gpu, due[-1][1].mig)

    # -- pynvml surface -------------------------------------------------------------------------------
    def nvmlDeviceGetMigMode(self, device: Any) -> list[int]:
        with self._lock:
            gpu, _ = self._gpu("nvmlDeviceGetMigMode", device)
            if not gpu.spec.model.mig_capable:
                raise _pynvml.NVMLError_NotSupported()
            mode = NVML_DEVICE_MIG_ENABLE if gpu.mig else NVML_DEVICE_MIG_DISABLE
            return [mode, mode]

    def nvmlDeviceGetMaxMigDeviceCount(self, device: Any) -> int:
        with self._lock:
            gpu, _ = self._gpu("nvmlDeviceGetMaxMigDeviceCount", device)
            return 7 if gpu.mig else 0

    def nvmlDeviceGetMigDeviceHandleByIndex(self, device: Any, index: int) -> SimMigHandle:
        with self._lock:
            gpu, _ = self._gpu("nvmlDeviceGetMigDeviceHandleByIndex", device)
            if not gpu.mig:
                raise _pynvml.NVMLError_NotSupported()
            if not 0 <= index < gpu.mig.devices:
                raise _pynvml.NVMLError_NotFound()
            return SimMigHandle(gpu.index, index, gpu.mig_generation)

    def mig_uuid_of(self, call: str, handle: SimMigHandle) -> str:
        self._mig(call, handle)
        return mig_uuid(self.config.seed, handle.parent, handle.slot, handle.generation)

    def _mig(self, call: str, handle: Any) -> tuple[SimGpu, float, MigLayout]:
        """The parent GPU of a MIG device or GPU instance handle and its layout (InvalidArgument for a
        whole-GPU handle or a handle of an older layout, as NVML answers for a destroyed instance)."""
        if not isinstance(handle, SimMigHandle | SimGpuInstance):
            raise _pynvml.NVMLError_InvalidArgument()
        gpu, t = self._gpu(call, self._handles[handle.parent])  # type: ignore[attr-defined]
        if gpu.mig is None or handle.generation != gpu.mig_generation:
            raise _pynvml.NVMLError_InvalidArgument()
        return gpu, t, gpu.mig

    def nvmlDeviceGetGpuInstanceId(self, device: Any) -> int:
        with self._lock:
            _, _, layout = self._mig("nvmlDeviceGetGpuInstanceId", device)
            return int(layout.profile.first_gpu_instance_id + device.slot // layout.compute_instances)

    def nvmlDeviceGetComputeInstanceId(self, device: Any) -> int:
        with self._lock:
            _, _, layout = self._mig("nvmlDeviceGetComputeInstanceId", device)
            return int(device.slot % layout.compute_instances)

    def nvmlDeviceGetGpuInstanceById(self, device: Any, gpuInstanceId: int) -> SimGpuInstance:
        with self._lock:
            gpu, _ = self._gpu("nvmlDeviceGetGpuInstanceById", device)
            self._instance_slot(gpu, gpuInstanceId)
            return SimGpuInstance(gpu.index, gpuInstanceId, gpu.mig_generation)

    def nvmlGpuInstanceGetInfo(self, gpuInstance: Any) -> Any:
        with self._lock:
            gpu, _, layout = self._mig("nvmlGpuInstanceGetInfo", gpuInstance)
            slot = self._instance_slot(gpu, gpuInstance.gpu_instance_id)
            placement = _Bag(start=slot * layout.profile.slices, size=layout.profile.slices)
            device = self._handles[gpu.index]  # type: ignore[attr-defined]
            return _Bag(device=device, id=gpuInstance.gpu_instance_id, profileId=layout.profile.profile_id,
                        placement=placement)

    def nvmlDeviceGetGpuInstanceProfileInfo(self, device: Any, profile: int, version: int = 2) -> Any:
        """By profile index (NVML_GPU_INSTANCE_PROFILE_*): NotSupported for a profile this board lacks."""
        with self._lock:
            gpu, _ = self._gpu("nvmlDeviceGetGpuInstanceProfileInfo", device)
            if not 0 <= profile < _pynvml.NVML_GPU_INSTANCE_PROFILE_COUNT:
                raise _pynvml.NVMLError_InvalidArgument()
            return self._profile_info(gpu, lambda p: p.nvml_profile == profile,
                                      _pynvml.NVMLError_NotSupported)

    def nvmlDeviceGetGpuInstanceProfileInfoById(self, device: Any, profileId: int) -> Any:
        """By profile id (R580 and newer; an older driver raises FunctionNotFound before this runs)."""
        with self._lock:
            gpu, _ = self._gpu("nvmlDeviceGetGpuInstanceProfileInfoById", device)
            return self._profile_info(gpu, lambda p: p.profile_id == profileId,
                                      _pynvml.NVMLError_InvalidArgument)

    @staticmethod
    def _profile_info(gpu: SimGpu, match: Any, missing: type[Exception]) -> Any:
        """pynvml's c_nvmlGpuInstanceProfileInfo_v2_t, `name` as nvidia-smi shows it (`MIG 1g.10gb`)."""
        model = gpu.spec.model
        profile = next((p for p in model.mig_profiles if match(p)), None)
        if profile is None:
            raise _pynvml.NVMLError_NotSupported() if not model.mig_capable else missing()
        info = _pynvml.c_nvmlGpuInstanceProfileInfo_v2_t()
        info.id, info.sliceCount = profile.profile_id, profile.slices
        info.instanceCount = 7 // profile.slices
        info.memorySizeMB = _mig_total(model.memory_bytes, profile.memory_eighths) // (1024 * 1024)
        info.name = f"MIG {profile.name}".encode()
        return info

    def mig_memory_info(self, handle: SimMigHandle) -> Any:
        """nvmlDeviceGetMemoryInfo on a MIG device: its GPU instance's memory (shared by the instance's
        compute instances) and the processes placed on that GPU instance."""
        gpu, t, layout = self._mig("nvmlDeviceGetMemoryInfo", handle)
        total = _mig_total(gpu.spec.model.memory_bytes, layout.profile.memory_eighths)
        util = gpu.utilization(t)
        instance = handle.slot // layout.compute_instances
        used = MIG_RESERVED_BYTES + sum(
            process_memory(p, util) for i, p in enumerate(gpu.processes())
            if i % layout.gpu_instances == instance)
        used = min(used, total)
        return _Bag(total=total, free=total - used, used=used)

    def mig_instance_utilization(self, gpu: SimGpu, gpu_instance_id: int, t: float) -> float:
        """The load of one GPU instance: the GPU's, scaled per instance so they differ (NotFound if none)."""
        slot = self._instance_slot(gpu, gpu_instance_id)
        assert gpu.mig is not None  # _instance_slot raised otherwise
        return float(gpu.utilization(t) * (0.5 + 0.5 * (slot + 1) / gpu.mig.gpu_instances))

    @staticmethod
    def mig_ids_of_process(gpu: SimGpu, position: int) -> tuple[int, int]:
        """(gpuInstanceId, computeInstanceId) of the `position`-th process of a GPU (0xFFFFFFFF: no MIG)."""
        if not gpu.mig:
            return 0xFFFFFFFF, 0xFFFFFFFF
        return gpu.mig.profile.first_gpu_instance_id + position % gpu.mig.gpu_instances, 0

    @staticmethod
    def _instance_slot(gpu: SimGpu, gpu_instance_id: int) -> int:
        if not gpu.mig:
            raise _pynvml.NVMLError_NotSupported()
        slot = gpu_instance_id - gpu.mig.profile.first_gpu_instance_id
        if not 0 <= slot < gpu.mig.gpu_instances:
            raise _pynvml.NVMLError_NotFound()
        return int(slot)


class _Bag:
    """Attribute bag for the structures holding a device handle (a ctypes field cannot hold ours)."""

    def __init__(self, **fields: Any) -> None:
        self.__dict__.update(fields)


def _mig_total(memory_bytes: int, eighths: int) -> int:
    """A GPU instance's memory: its eighths of the board, less what the MIG layout reserves, in whole MiB."""
    mib = 1024 * 1024
    return (memory_bytes * eighths // 8 - 4 * eighths * mib) // mib * mib
