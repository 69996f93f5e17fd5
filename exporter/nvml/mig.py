"""MIG devices of a GPU in MIG mode: listed by the adapter when it first reads a GPU and again whenever they
change, their memory read on every sweep (each MIG device on its own handle).

MIG devices come and go while MIG mode stays on: NVIDIA's DRA driver creates a GPU instance per claim (from
v25.12), an operator runs `nvidia-smi mig -cgi` / `-dgi`. Each background pass compares the GPU's MIG device
UUIDs (`MigReader.uuids`: the mode, then a handle and a UUID per MIG device index) with the last listing and
lists again on any difference; a device whose UUID is still there keeps its handle and what was read of it,
if that handle still answers. A GPU in MIG mode with no instance yet lists nothing (its whole-GPU series are
served), which is logged once, not every pass. Between passes, a stale handle on the sweep path (NVML answers
InvalidArgument or NotFound for a destroyed instance) raises MigLayoutChanged and the adapter lists again
instead of marking the GPU down.

Everything a MIG device says of itself needs no privilege (nvml.h marks none of these "Requires privileged
user"): its GPU and compute instance ids (nvmlDeviceGetGpuInstanceId / nvmlDeviceGetComputeInstanceId on the
MIG handle), its name (`NVIDIA H100 80GB HBM3 MIG 1g.10gb`), its size (nvmlDeviceGetAttributes: slices,
memory, multiprocessors). The profile (id and name, `1g.10gb`) is the entry of the board's profile table
(nvmlDeviceGetGpuInstanceProfileInfo over NVML's profile indexes, also unprivileged; the ...V call with the
name from R510, the older one without) named in the MIG device's name, else the one entry of that size.

The placement start of a GPU instance is known only to nvmlGpuInstanceGetInfo, on a handle from
nvmlDeviceGetGpuInstanceById, which nvml.h marks "Requires privileged user" (root, or the `mig/monitor`
capability): the base DaemonSet drops every capability, so it answers NoPermission there (logged once per
GPU) and placement_start stays None. Where it answers, it also cross-checks the profile (a disagreement is
logged and NVML's privileged answer wins). NVIDIA's DRA driver names a MIG device by profile id and placement
start (exporter/scrape/dra.py); without the placement a name is matched by profile id alone when that GPU has
one GPU instance of that profile (exporter/profiling/families.py).
"""

from __future__ import annotations

import dataclasses
import logging
import threading
from dataclasses import dataclass
from typing import Any

from exporter.nvml.calls import NvmlCalls, text
from exporter.nvml.snapshots import MigInstanceSnapshot

log = logging.getLogger(__name__)

PRIVILEGED_GPU_INSTANCE_CALL = "nvmlDeviceGetGpuInstanceById"


@dataclass(frozen=True)
class MigDevice:
    """What a MIG device says once per listing (kept while it stays on its GPU)."""

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
    """A GPU instance profile: the board's table (unprivileged) or nvmlGpuInstanceGetInfo (privileged)."""

    name: str = ""
    profile_id: int | None = None
    placement_start: int | None = None
    slices: int | None = None
    memory_mib: int | None = None
    multiprocessors: int | None = None


class MigLayoutChanged(Exception):
    """A MIG device or GPU instance handle of this GPU is stale: its MIG layout changed."""


class MigReader:
    """Lists a GPU's MIG devices and reads their memory; remembers each GPU's profile table per session."""

    def __init__(self, calls: NvmlCalls) -> None:
        self._calls = calls
        self._lock = threading.Lock()
        self._tables: dict[int, tuple[_Profile, ...]] = {}  # GPU index -> the board's profiles
        self._logged: set[tuple[int, str]] = set()  # (GPU index, what) logged once per session

    def reset(self) -> None:
        with self._lock:
            self._tables.clear()
            self._logged.clear()

    def mig_mode(self, index: int, handle: Any) -> bool:
        """True when GPU `index` is in MIG mode now (False when it is not, or cannot be)."""
        mode = self._calls.optional(index, "nvmlDeviceGetMigMode", handle)
        return bool(mode) and int(mode[0]) == getattr(self._calls.nvml, "NVML_DEVICE_MIG_ENABLE", 1)

    def uuids(self, index: int, handle: Any) -> tuple[str, ...]:
        """The UUIDs of GPU `index`'s MIG devices now, in MIG device index order: what a background pass
        compares with the last listing. () when MIG is off or on with no instance."""
        return tuple(uuid for _, _, uuid in self._handles(index, handle))

    def _handles(self, index: int, handle: Any) -> list[tuple[int, Any, str]]:
        """(MIG device index, handle, UUID) of each MIG device of GPU `index` now."""
        calls, nvml = self._calls, self._calls.nvml
        if not self.mig_mode(index, handle):
            return []
        found = []
        for slot in range(int(calls.optional(index, "nvmlDeviceGetMaxMigDeviceCount", handle) or 0)):
            try:
                mig = nvml.nvmlDeviceGetMigDeviceHandleByIndex(handle, slot)
                found.append((slot, mig, text(nvml.nvmlDeviceGetUUID(mig))))
            except nvml.NVMLError:  # NotFound: that index holds no MIG device
                continue
        if not found:
            self._once(index, "empty", "GPU %d: MIG mode is on with no MIG device yet; its whole-GPU series "
                                       "are served until one is created", index)
        else:
            with self._lock:
                self._logged.discard((index, "empty"))  # logged again if it empties later
        return found

    def devices(self, index: int, handle: Any, previous: tuple[MigDevice, ...] = ()) -> tuple[MigDevice, ...]:
        """The MIG devices of GPU `index`; () when MIG is off, on with no instance, or not supported. A device
        of `previous` whose UUID is still listed keeps its handle and readings while that handle answers."""
        kept = {device.uuid: device for device in previous}
        found = []
        for slot, mig, uuid in self._handles(index, handle):
            old = kept.get(uuid)
            if old is not None and self._answers(old.handle, uuid):
                found.append(dataclasses.replace(old, slot=slot))
                continue
            calls = self._calls
            gpu_instance = calls.optional(index, "nvmlDeviceGetGpuInstanceId", mig)
            compute_instance = calls.optional(index, "nvmlDeviceGetComputeInstanceId", mig)
            gi = None if gpu_instance is None else int(gpu_instance)
            profile = self._profile(index, handle, mig, gi)
            ci = None if compute_instance is None else int(compute_instance)
            found.append(MigDevice(mig, uuid, slot, gi, ci, profile.name, profile.profile_id,
                                   profile.placement_start))
        return tuple(found)

    def _answers(self, handle: Any, uuid: str) -> bool:
        try:
            return text(self._calls.nvml.nvmlDeviceGetUUID(handle)) == uuid
        except self._calls.nvml.NVMLError:
            return False

    def _once(self, index: int, what: str, message: str, *args: Any, warning: bool = False) -> None:
        with self._lock:
            if (index, what) in self._logged:
                return
            self._logged.add((index, what))
        (log.warning if warning else log.info)(message, *args)

    def _profile(self, index: int, handle: Any, mig: Any, gpu_instance_id: int | None) -> _Profile:
        """The MIG device's profile from what it says unprivileged, cross-checked (and given its placement)
        by the privileged call where that answers."""
        own = self._own_profile(index, handle, mig)
        if gpu_instance_id is None:
            return own
        checked = self._privileged_profile(index, handle, gpu_instance_id)
        if checked is None:
            return own
        if own.profile_id is not None and own.profile_id != checked.profile_id:
            self._once(index, f"profile {gpu_instance_id}", "GPU %d: GPU instance %d says profile %s of "
                       "itself, nvmlGpuInstanceGetInfo says %s: using the latter", index, gpu_instance_id,
                       own.profile_id, checked.profile_id, warning=True)
        named = next((p.name for p in self._table(index, handle) if p.profile_id == checked.profile_id), "")
        agrees = own.profile_id in (None, checked.profile_id)
        return dataclasses.replace(checked, name=named or (own.name if agrees else ""))

    def _own_profile(self, index: int, handle: Any, mig: Any) -> _Profile:
        """The board's profile this MIG device is, by the profile named in its name, else by its size (the
        one profile of its slices, memory and multiprocessors); _Profile() when neither tells."""
        table = self._table(index, handle)
        name = self._calls.optional(index, "nvmlDeviceGetName", mig)
        suffix = text(name).rpartition("MIG ")[2].strip() if name is not None and "MIG " in text(name) else ""
        by_name = [p for p in table if suffix and p.name == suffix]
        if len(by_name) == 1:
            return by_name[0]
        size = self._calls.optional(index, "nvmlDeviceGetAttributes", mig)
        if size is None:
            return _Profile(name=suffix)
        whole = int(size.computeInstanceSliceCount) == int(size.gpuInstanceSliceCount)
        by_size = [p for p in table if p.slices == int(size.gpuInstanceSliceCount)
                   and p.memory_mib == int(size.memorySizeMB)
                   and (not whole or p.multiprocessors == int(size.multiprocessorCount))]
        if len(by_size) != 1:
            return _Profile(name=suffix)
        return dataclasses.replace(by_size[0], name=by_size[0].name or suffix)  # a table without names: R470

    def _privileged_profile(self, index: int, handle: Any, gpu_instance_id: int) -> _Profile | None:
        """Profile id and placement from nvmlGpuInstanceGetInfo; None where the privileged call is refused
        (logged once per GPU) or not supported."""
        calls = self._calls
        try:
            instance = calls.nvml.nvmlDeviceGetGpuInstanceById(handle, gpu_instance_id)
            info = calls.nvml.nvmlGpuInstanceGetInfo(instance)
        except calls.nvml.NVMLError_NoPermission:
            self._once(index, "privilege", "GPU %d: %s answers NoPermission (it needs root or the "
                       "mig/monitor capability): MIG profiles are read from the MIG devices themselves, "
                       "placements are not known", index, PRIVILEGED_GPU_INSTANCE_CALL)
            return None
        except calls.left_out as exc:
            calls.note_unsupported(index, PRIVILEGED_GPU_INSTANCE_CALL, exc)
            return None
        except (calls.nvml.NVMLError_NotFound, calls.nvml.NVMLError_InvalidArgument):
            return None  # destroyed since it was listed: the next pass lists again
        placement = getattr(info, "placement", None)
        return _Profile(profile_id=int(info.profileId),
                        placement_start=None if placement is None else int(placement.start))

    def _table(self, index: int, handle: Any) -> tuple[_Profile, ...]:
        """Every GPU instance profile the board has (nvmlDeviceGetGpuInstanceProfileInfo over NVML's profile
        indexes; a profile the board lacks answers NotSupported or InvalidArgument); read once per session."""
        with self._lock:
            known = self._tables.get(index)
        if known is not None:
            return known
        nvml = self._calls.nvml
        refused = (*self._calls.left_out, nvml.NVMLError_InvalidArgument, nvml.NVMLError_NotFound)
        found = []
        version = 2
        for profile in range(int(getattr(nvml, "NVML_GPU_INSTANCE_PROFILE_COUNT", 0x12))):
            try:
                info = nvml.nvmlDeviceGetGpuInstanceProfileInfo(handle, profile, version)
            except self._calls.fallback_errors:
                if version == 1:
                    break
                version = 1  # before R510: the older structure, without the name
                try:
                    info = nvml.nvmlDeviceGetGpuInstanceProfileInfo(handle, profile, version)
                except refused:
                    continue
            except refused:
                continue
            found.append(_Profile(name=text(getattr(info, "name", b"")).removeprefix("MIG ").strip(),
                                  profile_id=int(info.id), slices=int(info.sliceCount),
                                  memory_mib=int(info.memorySizeMB),
                                  multiprocessors=int(info.multiprocessorCount)))
        if not found:
            self._calls.note_unsupported(index, "nvmlDeviceGetGpuInstanceProfileInfo",
                                         nvml.NVMLError_NotSupported())
        table = tuple(found)
        with self._lock:
            self._tables[index] = table
        return table

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
