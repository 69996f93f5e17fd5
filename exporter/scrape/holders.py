"""Who holds a GPU or a MIG device, from the device ids the kubelet reports: pure, no gRPC, no NVML calls.

The pod families (exporter/pods/), the device series (exporter/collector.py), the profiling families
(exporter/profiling/) and the status API all label a series with the one container holding the device, and
decide it here.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from exporter.nvml.snapshots import MigInstanceSnapshot
from exporter.scrape.dra import dra_mig

WHOLE_GPU_RESOURCE = "nvidia.com/gpu"
# MIG device ids under any resource name: the device plugin's `mig-strategy=single` advertises MIG devices as
# nvidia.com/gpu (`MIG-<uuid>`, or `<gpu>:<mig>` with deviceIDStrategy=index), and so does GKE
# (`nvidia<minor>/gi<id>`, `/vgpu<n>` when time-shared too).
_MIG_DEVICE_ID = re.compile(r"MIG-.*|[0-9]+:[0-9]+|nvidia[0-9]+/gi[0-9]+(?:/vgpu[0-9]+)?")


@dataclass(frozen=True)
class PodRef:
    """A container holding a GPU (or running a GPU process): the resource and device id it was granted."""

    namespace: str
    pod: str
    container: str
    resource: str = WHOLE_GPU_RESOURCE
    device_id: str = ""  # as the plugin named it: `GPU-<uuid>`, `MIG-<uuid>`, `0`, `0:1`, `nvidia0/gi1`, ...
    claim: str = ""  # the DRA ResourceClaim it holds the device through; "" for a device plugin's device

    @property
    def is_mig(self) -> bool:
        """A MIG slice: a MIG resource (`nvidia.com/mig-*`), or a MIG device id under any resource name
        (`MIG-<uuid>`, the index strategy's `0:1`, GKE's `nvidia0/gi1`, DRA's `gpu-0-mig-...`)."""
        return (self.resource.startswith("nvidia.com/mig-") or dra_mig(self.device_id) is not None
                or _MIG_DEVICE_ID.fullmatch(self.device_id) is not None)


def exclusive_holder(held: Sequence[PodRef]) -> PodRef | None:
    """The container whose labels go on the device series: exactly one container holds the whole GPU.

    None when unallocated, time-sliced between containers, or partitioned into MIG devices (a MIG holder
    uses a slice, so the device values are not its own).
    """
    if not held or any(ref.is_mig for ref in held):
        return None
    first = held[0]
    if all((ref.namespace, ref.pod, ref.container) == (first.namespace, first.pod, first.container)
           for ref in held):
        return first
    return None


def mig_holder(held: Sequence[PodRef], gpu_index: int, mig: MigInstanceSnapshot,
               siblings: Sequence[MigInstanceSnapshot] = ()) -> PodRef | None:
    """The one container holding this MIG device; None when none does, or several share it. `siblings` are
    the GPU's MIG devices (this one among them): a DRA name is matched by profile alone when they hold one GPU
    instance of that profile and the placement is not known (see _is_dra_name_of)."""
    gke = re.compile(rf"/gi{mig.gpu_instance_id}(?:/|\Z)") if mig.gpu_instance_id is not None else None
    found = [ref for ref in held if ref.device_id == mig.uuid or ref.device_id == f"{gpu_index}:{mig.slot}"
             or (gke is not None and gke.search(ref.device_id) is not None)
             or _is_dra_name_of(ref, mig, siblings)]
    containers = {(r.namespace, r.pod, r.container) for r in found}
    return found[0] if len(containers) == 1 else None


def _is_dra_name_of(ref: PodRef, mig: MigInstanceSnapshot, siblings: Sequence[MigInstanceSnapshot]) -> bool:
    """The DRA driver's name of this MIG device (the parent GPU is already the one the holder is filed under):
    same GPU instance profile and placement where NVML told the placement (a privileged call); without it,
    the same profile when this is the GPU's only GPU instance of that profile, which no other can be."""
    named = dra_mig(ref.device_id) if ref.claim else None
    if named is None or mig.profile_id is None or named.profile_id != mig.profile_id:
        return False
    if mig.placement_start is not None:
        return named.placement_start == mig.placement_start
    same = {s.gpu_instance_id for s in siblings if s.profile_id == mig.profile_id}
    return mig.gpu_instance_id is not None and same == {mig.gpu_instance_id}
