"""From kubelet device allocations to "which containers hold this GPU": pure functions, no gRPC.

The kubelet reports device ids exactly as the NVIDIA device plugin advertised them:
- `GPU-<uuid>`: a whole GPU (deviceIDStrategy uuid, the default);
- `GPU-<uuid>::<n>`: replica n of a time-sliced GPU; the suffix is stripped, so every replica holder of one
  GPU lands on the same key and the GPU shows several holders;
- `MIG-<uuid>` (optionally `::<n>` too): a MIG device. With a `mig_parent` lookup (MIG uuid -> parent GPU
  uuid, from NVML) the holder is filed under the parent GPU's uuid, keeping the MIG id in
  `DeviceHolder.device_id`; without one, or when the lookup does not know the id, it stays filed under the
  MIG uuid itself.
- GKE's device plugin: `nvidia<minor>` (a whole GPU, by its device minor), `nvidia<minor>/vgpu<n>` (replica n
  of a time-shared GPU: the suffix is stripped like `::<n>`), `nvidia<minor>/gi<id>` (a MIG GPU instance);
- Dynamic Resource Allocation (the kubelet's `dynamic_resources`): NVIDIA's DRA driver (`gpu.nvidia.com`)
  names its devices by device minor, `gpu-<minor>` for a whole GPU and `gpu-<minor>-mig-...` for a MIG
  device; the driver name stands in for the resource name and the claim rides along on the holder;
- anything else (deviceIDStrategy index: `0`, `1`, `0:1`, the GKE and the DRA ids) is filed under the id as
  given; exporter/pods/attribution.py's `by_uuid` maps index and minor ids to GPU uuids.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

GPU_RESOURCE = "nvidia.com/gpu"
# The device plugin's time-slicing / MPS with renameByDefault advertises shared GPUs under this name.
SHARED_GPU_RESOURCE = "nvidia.com/gpu.shared"
DEFAULT_RESOURCE_NAMES: tuple[str, ...] = (GPU_RESOURCE, SHARED_GPU_RESOURCE)
MIG_RESOURCE_PREFIX = "nvidia.com/mig-"  # MIG resources (`nvidia.com/mig-1g.10gb`, `...gb.shared`) always
# NVIDIA's DRA driver: its allocations carry this driver name where a device plugin's carry a resource name.
DRA_GPU_DRIVER = "gpu.nvidia.com"

_REPLICA_SUFFIX = re.compile(r"(?:::[0-9]+|(?<=\S)/vgpu[0-9]+)\Z")  # `GPU-<uuid>::3`, GKE `nvidia0/vgpu3`

MigParentLookup = Callable[[str], "str | None"]


@dataclass(frozen=True, order=True)
class DeviceAllocation:
    """One device id the kubelet assigned to one container, as read from List (no interpretation yet)."""

    namespace: str
    pod: str
    container: str
    resource: str  # the extended resource (`nvidia.com/gpu`), or the DRA driver (`gpu.nvidia.com`)
    device_id: str  # the device plugin's id, or the DRA device name (`gpu-0`)
    claim: str = ""  # DRA only: the ResourceClaim's name (`<namespace>/<name>` outside the pod's namespace)
    pool: str = ""  # DRA only: the resource pool (NVIDIA's driver names it after the node)


@dataclass(frozen=True, order=True)
class DeviceHolder:
    """A container holding (a share or a MIG slice of) a GPU. Ordered, so holder tuples are stable."""

    namespace: str
    pod: str
    container: str
    resource: str
    device_id: str  # normalized id the holder was granted: `GPU-<uuid>` or `MIG-<uuid>` (no `::<n>`)
    claim: str = ""  # the DRA ResourceClaim it was granted through; "" for a device plugin's device


def resource_filter(names: Iterable[str] = DEFAULT_RESOURCE_NAMES) -> Callable[[str], bool]:
    """A filter accepting the given resource names (like dcgm-exporter's --nvidia-resource-names), every
    MIG resource (`nvidia.com/mig-*`) and NVIDIA's DRA driver (`gpu.nvidia.com`)."""
    accepted = frozenset(names) | {DRA_GPU_DRIVER}
    return lambda name: name in accepted or name.startswith(MIG_RESOURCE_PREFIX)


def is_gpu_resource(resource_name: str) -> bool:
    """True for the default resource names (whole and renamed shared GPUs), MIG slices and NVIDIA's DRA
    driver."""
    return resource_name in (*DEFAULT_RESOURCE_NAMES, DRA_GPU_DRIVER) or resource_name.startswith(
        MIG_RESOURCE_PREFIX)


def normalize_device_id(device_id: str) -> str:
    """Strip the time-slicing replica suffix: `GPU-abc::3` -> `GPU-abc`, `nvidia0/vgpu3` -> `nvidia0`. Nothing
    else: an id with spaces or a line end around it (`gpu-0\n`) is not the GPU's id, so it names no GPU."""
    return _REPLICA_SUFFIX.sub("", device_id)


def is_mig_device_id(device_id: str) -> bool:
    return device_id.startswith("MIG-")


def build_holder_map(
    allocations: Iterable[DeviceAllocation],
    mig_parent: MigParentLookup | None = None,
    resource_filter: Callable[[str], bool] = is_gpu_resource,
) -> dict[str, tuple[DeviceHolder, ...]]:
    """Key (GPU uuid, or MIG uuid / raw id, see module doc) -> sorted unique holders of that device.

    A container granted several replicas of one time-sliced GPU appears once; two containers sharing a GPU
    appear as two holders.
    """
    holders: dict[str, set[DeviceHolder]] = {}
    for allocation in allocations:
        if not resource_filter(allocation.resource):
            continue
        device_id = normalize_device_id(allocation.device_id)
        if not device_id:
            continue
        key = device_id
        if mig_parent is not None and is_mig_device_id(device_id):
            key = mig_parent(device_id) or device_id
        holder = DeviceHolder(
            namespace=allocation.namespace,
            pod=allocation.pod,
            container=allocation.container,
            resource=allocation.resource,
            device_id=device_id,
            claim=allocation.claim,
        )
        holders.setdefault(key, set()).add(holder)
    return {key: tuple(sorted(found)) for key, found in holders.items()}


def single_holder(holders: Mapping[str, tuple[DeviceHolder, ...]], uuid: str) -> DeviceHolder | None:
    """The holder whose labels go on the device series: only when exactly ONE container holds the GPU."""
    found = holders.get(uuid, ())
    containers = {(holder.namespace, holder.pod, holder.container) for holder in found}
    return found[0] if len(containers) == 1 else None
