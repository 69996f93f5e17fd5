"""The MIG part of the simulated NVML surface: a GPU group with `mig: N` in the YAML is in MIG mode with N GPU
instances of the group's `mig_profile`, each split into `mig_compute_instances` compute instances; every
compute instance is a MIG device whose UUID (`MIG-...`) is what the device plugin would advertise.
`mig_enabled: true` with no `mig` is MIG mode on with no instance yet.

Like real NVML, a GPU in MIG mode does not support device or per-process utilization
(`MIG_UNSUPPORTED_CALLS` raise NVMLError_NotSupported); memory, power, temperature, clocks, ECC and the
process list still answer for the whole GPU. GPU instance ids come from the profile's placement (7..13 for
`1g.10gb`), compute instance ids count from 0 in each GPU instance. A GPU instance's memory is shared by its
compute instances (`nvmlDeviceGetMemoryInfo` on any of their handles: the processes placed on it, process i
on GPU instance i mod N) and it has its own share of the GPU's load for GPM (`nvmlGpmMigSampleGet`).

The layout changes at run time in two ways. A whole re-partition (a `mig_layout` fault at its time, or
`set_mig_layout`), as an operator's `nvidia-smi mig -dci -dgi` then `-cgi` would: every handle of the old
layout then answers InvalidArgument and the old GPU instance ids NotFound, as NVML answers for destroyed
instances. And one GPU instance created or destroyed while the others run (a `mig_create` / `mig_destroy`
fault, or `create_mig_instance` / `destroy_mig_instance`), as NVIDIA's DRA driver does per claim: the other
instances' handles, ids and UUIDs stay as they were. A handle carries its GPU instance's serial and answers
while that instance exists.

What a MIG device says of itself without privileges (nvml.h: no "Requires privileged user"): its UUID, its
GPU and compute instance ids, its name (`NVIDIA H100 80GB HBM3 MIG 1g.10gb`), its memory and its attributes
(nvmlDeviceGetAttributes: multiprocessors, slices, memory). nvmlDeviceGetGpuInstanceById, which nvml.h marks
"Requires privileged user", answers NoPermission unless the config says `privileged: true`. Profiles have
NVML's two numbers: the profile index nvmlDeviceGetGpuInstanceProfileInfo takes and the profile id
nvmlGpuInstanceGetInfo reports (what nvmlDeviceGetGpuInstanceProfileInfoById, R580 and newer only, takes).

Kept apart from exporter/simulator/nvml.py so each stays small; `SimulatedNvml` inherits these methods.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any

from exporter.nvml.adapter import real_nvml
from exporter.simulator.models import MAX_MIG_SLICES, MigInstance, MigLayout, MigProfile
from exporter.simulator.physics import SimGpu, process_memory

_pynvml = real_nvml()
MIG_RESERVED_BYTES = 128 * 1024 * 1024  # what the driver keeps on each GPU instance

NVML_DEVICE_MIG_DISABLE = 0
NVML_DEVICE_MIG_ENABLE = 1

# NVML's docs: "On MIG-enabled GPUs, querying device utilization rates / process utilization is not currently
# supported" (both raise NVML_ERROR_NOT_SUPPORTED).
MIG_UNSUPPORTED_CALLS = frozenset({"nvmlDeviceGetUtilizationRates", "nvmlDeviceGetProcessUtilization"})
MIG_DEVICE_SLOTS = 7  # nvmlDeviceGetMaxMigDeviceCount on an A100 / H100 in MIG mode


@dataclass(eq=False)
class SimMigHandle:
    """What nvmlDeviceGetMigDeviceHandleByIndex returns: compute instance `compute_instance` of the GPU
    instance with `serial` on GPU `parent`."""

    parent: int
    serial: int
    compute_instance: int = 0


@dataclass(eq=False)
class SimGpuInstance:
    """What nvmlDeviceGetGpuInstanceById returns."""

    parent: int
    gpu_instance_id: int
    serial: int


def mig_uuid(seed: int, index: int, slot: int, generation: int = 0) -> str:
    key = f"simulated-mig:{seed}:{index}:{slot}" + (f":{generation}" if generation else "")
    digest = hashlib.sha256(key.encode()).hexdigest()
    return f"MIG-{digest[:8]}-{digest[8:12]}-{digest[12:16]}-{digest[16:20]}-{digest[20:32]}"


class MigSurface:
    """pynvml's MIG calls over the simulated GPUs (needs `_gpu`, `_gpus`, `_handles`, `_lock`, `config`,
    `_privileged` of SimulatedNvml)."""

    _lock: Any
    _gpus: list[SimGpu]
    config: Any

    def _gpu(self, call: str, handle: Any) -> tuple[SimGpu, float]:  # provided by SimulatedNvml
        raise NotImplementedError

    def _privileged(self, call: str) -> None:  # provided by SimulatedNvml
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
                layout = MigLayout(self._profile_of(gpu, profile), gpu_instances, compute_instances)
                problem = layout.fits()
                if problem is not None:
                    raise ValueError(problem)
            self._relayout(gpu, layout)

    def create_mig_instance(self, index: int, profile: str | None = None, compute_instances: int = 1) -> int:
        """Create one GPU instance of `profile` (default the smallest) at its first free placement on GPU
        `index`, in MIG mode, leaving the others as they are (NVIDIA's DRA driver does this per claim); its
        GPU instance id. ValueError when MIG is off or it does not fit."""
        with self._lock:
            gpu = self._gpus[index]
            if gpu.mig is None:
                raise ValueError(f"GPU {index} is not in MIG mode")
            found = self._profile_of(gpu, profile)
            problem = MigLayout(found, 1, compute_instances).fits()
            if problem is not None:
                raise ValueError(problem)
            instance = self._place(gpu, found, compute_instances)
            if instance is None:
                raise ValueError(f"GPU {index}: no free placement for a {found.name} GPU instance")
            gpu.mig_instances = tuple(sorted((*gpu.mig_instances, instance), key=lambda i: i.gpu_instance_id))
            return instance.gpu_instance_id

    def destroy_mig_instance(self, index: int, gpu_instance_id: int) -> None:
        """Destroy one GPU instance of GPU `index` (and its compute instances); the others stay as they are.
        ValueError when there is no such instance."""
        with self._lock:
            gpu = self._gpus[index]
            kept = tuple(i for i in gpu.mig_instances if i.gpu_instance_id != gpu_instance_id)
            if len(kept) == len(gpu.mig_instances):
                raise ValueError(f"GPU {index} has no GPU instance {gpu_instance_id}")
            gpu.mig_instances = kept

    @staticmethod
    def _profile_of(gpu: SimGpu, name: str | None) -> MigProfile:
        model = gpu.spec.model
        found = model.mig_profile(name) if name else next(iter(model.mig_profiles), None)
        if found is None:
            raise ValueError(f"GPU {gpu.index} ({model.key}) has no MIG profile {name!r}")
        return found

    def _serial(self) -> int:
        serial = int(self.__dict__.get("_mig_serial", 0)) + 1
        self.__dict__["_mig_serial"] = serial
        return serial

    def _relayout(self, gpu: SimGpu, layout: MigLayout | None, *, initial: bool = False) -> None:
        """Give `gpu` this layout (None: MIG off): new GPU instances, new UUIDs (the same ones for the same
        GPU and layout generation), so every handle of the old layout is stale."""
        if not initial:
            gpu.mig_generation += 1
        gpu.mig = layout
        instances = []
        for k in range(layout.gpu_instances if layout else 0):
            assert layout is not None
            computes = layout.compute_instances
            uuids = tuple(mig_uuid(self.config.seed, gpu.index, k * computes + c, gpu.mig_generation)
                          for c in range(computes))
            first, slices = layout.profile.first_gpu_instance_id, layout.profile.slices
            instances.append(MigInstance(layout.profile, first + k, k * slices, uuids, self._serial()))
        gpu.mig_instances = tuple(instances)

    def _place(self, gpu: SimGpu, profile: MigProfile, compute_instances: int) -> MigInstance | None:
        """A new GPU instance at the first placement whose slices are free and whose memory fits."""
        used = {s for i in gpu.mig_instances
                for s in range(i.placement_start, i.placement_start + i.profile.slices)}
        memory = sum(i.profile.memory_eighths for i in gpu.mig_instances)
        ids = {i.gpu_instance_id for i in gpu.mig_instances}
        if memory + profile.memory_eighths > 8:
            return None
        for start in range(0, MAX_MIG_SLICES - profile.slices + 1, profile.slices):
            if used & set(range(start, start + profile.slices)):
                continue
            gpu_instance_id = profile.first_gpu_instance_id + start // profile.slices
            while gpu_instance_id in ids:
                gpu_instance_id += 1
            serial = self._serial()
            uuids = tuple(mig_uuid(self.config.seed, gpu.index, 1000 * serial + c, gpu.mig_generation)
                          for c in range(compute_instances))
            return MigInstance(profile, gpu_instance_id, start, uuids, serial)
        return None

    def _apply_mig_faults(self, gpu: SimGpu, t: float) -> None:
        """Every mig_layout, mig_create and mig_destroy fault due for this GPU, once each, in file order
        (a mig_layout fault replaces whatever the earlier ones made)."""
        applied: set[tuple[int, int]] = self.__dict__.setdefault("_mig_faults_applied", set())
        for n, fault in enumerate(self.config.faults):
            if (gpu.index, n) in applied or not fault.active(t) or not fault.applies_to(gpu.index):
                continue
            if fault.type == "mig_layout":
                self._relayout(gpu, fault.mig)
            elif fault.type == "mig_create" and fault.mig is not None and gpu.mig is not None:
                for _ in range(fault.mig.gpu_instances):
                    instance = self._place(gpu, fault.mig.profile, fault.mig.compute_instances)
                    if instance is not None:
                        gpu.mig_instances = tuple(sorted((*gpu.mig_instances, instance),
                                                         key=lambda i: i.gpu_instance_id))
            elif fault.type == "mig_destroy":
                gpu.mig_instances = tuple(i for i in gpu.mig_instances
                                          if i.gpu_instance_id not in fault.gpu_instance_ids)
            else:
                continue
            applied.add((gpu.index, n))

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
            return MIG_DEVICE_SLOTS if gpu.mig else 0

    @staticmethod
    def _mig_devices(gpu: SimGpu) -> list[tuple[MigInstance, int]]:
        """(GPU instance, compute instance id) of each MIG device, in NVML's MIG device index order."""
        return [(instance, c) for instance in gpu.mig_instances for c in range(len(instance.uuids))]

    def nvmlDeviceGetMigDeviceHandleByIndex(self, device: Any, index: int) -> SimMigHandle:
        with self._lock:
            gpu, _ = self._gpu("nvmlDeviceGetMigDeviceHandleByIndex", device)
            if not gpu.mig:
                raise _pynvml.NVMLError_NotSupported()
            devices = self._mig_devices(gpu)
            if not 0 <= index < len(devices):
                raise _pynvml.NVMLError_NotFound()
            instance, compute = devices[index]
            return SimMigHandle(gpu.index, instance.serial, compute)

    def mig_uuid_of(self, call: str, handle: SimMigHandle) -> str:
        _, _, instance = self._mig(call, handle)
        return instance.uuids[handle.compute_instance]

    def _mig(self, call: str, handle: Any) -> tuple[SimGpu, float, MigInstance]:
        """The parent GPU of a MIG device or GPU instance handle and its GPU instance (InvalidArgument for a
        whole-GPU handle or a handle of an instance that is gone, as NVML answers for a destroyed one)."""
        if not isinstance(handle, SimMigHandle | SimGpuInstance):
            raise _pynvml.NVMLError_InvalidArgument()
        gpu, t = self._gpu(call, self._handles[handle.parent])  # type: ignore[attr-defined]
        instance = next((i for i in gpu.mig_instances if i.serial == handle.serial), None)
        if gpu.mig is None or instance is None:
            raise _pynvml.NVMLError_InvalidArgument()
        return gpu, t, instance

    def nvmlDeviceGetGpuInstanceId(self, device: Any) -> int:
        with self._lock:
            return self._mig("nvmlDeviceGetGpuInstanceId", device)[2].gpu_instance_id

    def nvmlDeviceGetComputeInstanceId(self, device: Any) -> int:
        with self._lock:
            self._mig("nvmlDeviceGetComputeInstanceId", device)
            return int(device.compute_instance)

    def mig_device_name(self, handle: SimMigHandle) -> str:
        """nvmlDeviceGetName on a MIG device: the board's name and the profile, as nvidia-smi -L shows it."""
        gpu, _, instance = self._mig("nvmlDeviceGetName", handle)
        return f"{gpu.spec.model.name} MIG {instance.profile.name}"

    def nvmlDeviceGetAttributes_v2(self, device: Any) -> Any:
        """A MIG device's size (multiprocessors, slices, memory); NotSupported on a whole GPU, as on the
        boards the exporter reads."""
        with self._lock:
            if not isinstance(device, SimMigHandle):
                self._gpu("nvmlDeviceGetAttributes_v2", device)
                raise _pynvml.NVMLError_NotSupported()
            gpu, _, instance = self._mig("nvmlDeviceGetAttributes_v2", device)
            model, profile = gpu.spec.model, instance.profile
            computes = len(instance.uuids)
            attributes = _pynvml.c_nvmlDeviceAttributes()
            attributes.multiprocessorCount = profile.slices // computes * model.mig_sms_per_slice
            attributes.gpuInstanceSliceCount = profile.slices
            attributes.computeInstanceSliceCount = profile.slices // computes
            attributes.memorySizeMB = _mig_total(model.memory_bytes, profile.memory_eighths) // (1024 * 1024)
            return attributes

    def nvmlDeviceGetAttributes(self, device: Any) -> Any:
        """pynvml maps the unversioned name to _v2."""
        return self.nvmlDeviceGetAttributes_v2(device)

    def nvmlDeviceGetGpuInstanceById(self, device: Any, gpuInstanceId: int) -> SimGpuInstance:
        """nvml.h: "Requires privileged user" (NoPermission unless the config says `privileged: true`)."""
        with self._lock:
            gpu, _ = self._gpu("nvmlDeviceGetGpuInstanceById", device)
            self._privileged("nvmlDeviceGetGpuInstanceById")
            instance = self._instance(gpu, gpuInstanceId)
            return SimGpuInstance(gpu.index, gpuInstanceId, instance.serial)

    def nvmlGpuInstanceGetInfo(self, gpuInstance: Any) -> Any:
        with self._lock:
            gpu, _, instance = self._mig("nvmlGpuInstanceGetInfo", gpuInstance)
            placement = _Bag(start=instance.placement_start, size=instance.profile.slices)
            device = self._handles[gpu.index]  # type: ignore[attr-defined]
            return _Bag(device=device, id=instance.gpu_instance_id, profileId=instance.profile.profile_id,
                        placement=placement)

    def nvmlDeviceGetGpuInstanceProfileInfo(self, device: Any, profile: int, version: int = 2) -> Any:
        """By profile index (NVML_GPU_INSTANCE_PROFILE_*): NotSupported for a profile this board lacks.
        pynvml calls the C function nvmlDeviceGetGpuInstanceProfileInfoV for version 2 (R470 and newer),
        nvmlDeviceGetGpuInstanceProfileInfo for version 1 (no name in its structure)."""
        with self._lock:
            call = "nvmlDeviceGetGpuInstanceProfileInfo" + ("V" if version == 2 else "")
            gpu, _ = self._gpu(call, device)
            if version not in (1, 2) or not 0 <= profile < _pynvml.NVML_GPU_INSTANCE_PROFILE_COUNT:
                raise _pynvml.NVMLError_InvalidArgument()
            info = self._profile_info(gpu, lambda p: p.nvml_profile == profile,
                                      _pynvml.NVMLError_NotSupported)
            if version == 1:
                info.name = b""  # not in the v1 structure
            return info

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
        info.multiprocessorCount = profile.slices * model.mig_sms_per_slice
        info.memorySizeMB = _mig_total(model.memory_bytes, profile.memory_eighths) // (1024 * 1024)
        info.name = f"MIG {profile.name}".encode()
        return info

    def mig_memory_info(self, handle: SimMigHandle) -> Any:
        """nvmlDeviceGetMemoryInfo on a MIG device: its GPU instance's memory (shared by the instance's
        compute instances) and the processes placed on that GPU instance."""
        gpu, t, instance = self._mig("nvmlDeviceGetMemoryInfo", handle)
        total = _mig_total(gpu.spec.model.memory_bytes, instance.profile.memory_eighths)
        util = gpu.utilization(t)
        position = gpu.mig_instances.index(instance)
        used = MIG_RESERVED_BYTES + sum(
            process_memory(p, util) for i, p in enumerate(gpu.processes())
            if i % len(gpu.mig_instances) == position)
        used = min(used, total)
        return _Bag(total=total, free=total - used, used=used)

    def mig_instance_utilization(self, gpu: SimGpu, gpu_instance_id: int, t: float) -> float:
        """The load of one GPU instance: the GPU's, scaled per instance so they differ (NotFound if none)."""
        position = gpu.mig_instances.index(self._instance(gpu, gpu_instance_id))
        return float(gpu.utilization(t) * (0.5 + 0.5 * (position + 1) / len(gpu.mig_instances)))

    @staticmethod
    def mig_ids_of_process(gpu: SimGpu, position: int) -> tuple[int, int]:
        """(gpuInstanceId, computeInstanceId) of the `position`-th process of a GPU (0xFFFFFFFF: no MIG)."""
        if not gpu.mig or not gpu.mig_instances:
            return 0xFFFFFFFF, 0xFFFFFFFF
        return gpu.mig_instances[position % len(gpu.mig_instances)].gpu_instance_id, 0

    @staticmethod
    def _instance(gpu: SimGpu, gpu_instance_id: int) -> MigInstance:
        if not gpu.mig:
            raise _pynvml.NVMLError_NotSupported()
        found = next((i for i in gpu.mig_instances if i.gpu_instance_id == gpu_instance_id), None)
        if found is None:
            raise _pynvml.NVMLError_NotFound()
        return found


class _Bag:
    """Attribute bag for the structures holding a device handle (a ctypes field cannot hold ours)."""

    def __init__(self, **fields: Any) -> None:
        self.__dict__.update(fields)


def _mig_total(memory_bytes: int, eighths: int) -> int:
    """A GPU instance's memory: its eighths of the board, less what the MIG layout reserves, in whole MiB."""
    mib = 1024 * 1024
    return (memory_bytes * eighths // 8 - 4 * eighths * mib) // mib * mib
