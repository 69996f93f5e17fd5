"""The device names of NVIDIA's DRA driver (`gpu.nvidia.com`), as the kubelet reports them in a container's
`dynamic_resources`: pure functions, no gRPC.

The driver publishes each GPU as `gpu-<minor>` (its device minor, `/dev/nvidia<minor>`; releases before
mid-2025 used the NVML index, which is the minor on most nodes) and each MIG device as
`gpu-<minor>-mig-<profile>-<profile id>-<placement start>` (`gpu-0-mig-1g10gb-19-0`, the profile name without
its dots), or `gpu-<minor>-mig-<profile id>-<placement start>-<placement size>` before 2026. Neither the name
nor its CDI device id (`k8s.gpu.nvidia.com/claim=<claim uid>-gpu-0`) carries a UUID: dcgm-exporter reads
the UUID from the ResourceSlice through the API server, which this exporter does not call. The minor is
mapped to a UUID by the driver's own table on the node (exporter/pods/procfs.py's `read_driver_minors`), and
a MIG device is told apart on its GPU by its GPU instance's profile id and placement start. NVML tells the
profile id unprivileged, the placement start only to a privileged caller (exporter/nvml/mig.py); without it a
name is matched by profile id alone where its GPU has one GPU instance of that profile
(exporter/scrape/holders.py's `mig_holder`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_N = "([0-9]{1,9})"  # ASCII digits, bounded: a name is input from the kubelet, never trusted
_GPU = re.compile(rf"gpu-{_N}")
# gpu-<minor>-mig-<rest>: the rest is `<profile>-<profile id>-<start>` or `<profile id>-<start>-<size>`
_PROFILE = "([a-z0-9-]{0,60}[a-z][a-z0-9-]{0,60})"  # `1g10gb`, `1g10gb-me`: a letter, never all digits
_MIG = re.compile(rf"gpu-{_N}-mig-(?:{_PROFILE}-{_N}-{_N}|{_N}-{_N}-[0-9]{{1,9}})")


@dataclass(frozen=True)
class DraMig:
    """A MIG device named by the DRA driver: its parent's device minor and where it sits on that GPU."""

    minor: int
    profile_id: int
    placement_start: int


def dra_mig(name: str) -> DraMig | None:
    """The MIG device a DRA device name denotes; None for a whole GPU or any other name."""
    match = _MIG.fullmatch(name)
    if match is None:
        return None
    minor, _, profile_id, start, old_profile_id, old_start = match.groups()
    if profile_id is None:
        profile_id, start = old_profile_id, old_start
    return DraMig(int(minor), int(profile_id), int(start))


def dra_minor(name: str) -> int | None:
    """The device minor of the GPU a DRA device name is on (`gpu-3`, `gpu-3-mig-...`); None otherwise."""
    match = _GPU.fullmatch(name)
    if match is not None:
        return int(match.group(1))
    mig = dra_mig(name)
    return None if mig is None else mig.minor
