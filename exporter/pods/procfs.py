"""Which pod a GPU process belongs to: read `<proc root>/<pid>/cgroup`, then match against the GPU's holders.

The cgroup path names the pod UID and the container id, for cgroup v1 and v2 and both kubelet cgroup drivers:

    0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod<uid_with_underscores>.slice/
        cri-containerd-<64 hex>.scope                                         (systemd; also crio-, docker-)
    11:memory:/kubepods/besteffort/pod<uid>/<64 hex>                          (cgroupfs)

The kubelet's List API returns pod names but no UIDs or container ids, so a UID alone does not give a name.
`ProcessAttributor.locate(pid, holders)` resolves, in this order:
1. `resolver(pod_uid)` -> PodRef, when the caller has one (e.g. built from the API server); the container is
   taken from the GPU's holders of that pod when exactly one container of it holds the GPU;
2. the pod name from the process's `HOSTNAME` (`<proc root>/<pid>/environ`, which the container runtime sets
   to the pod name) matched against the holders' pod names. A HOSTNAME that names no holder means the process
   is in another pod (one that reached the GPU without being allocated it): never credited to a holder;
3. only when HOSTNAME cannot be read (another uid's environ needs CAP_SYS_PTRACE and CAP_DAC_READ_SEARCH):
   the GPU's single holder, when exactly one container holds it.
A process outside any pod cgroup (host process, plain docker container) is never attributed; anything
ambiguous stays unattributed rather than guessed. `locate` says why (`Unattributed`), because `pod_usage`
must tell "certainly no holder's" (counts for the device only) from "some holder's, unknown which".

`pod_usage()` turns the attributions into per-container utilization and memory of one GPU (the gpu_pod_*
series): the device values for an exclusive GPU, the sum of the container's processes for a shared one.

`read_driver_minors()` reads `<proc root>/driver/nvidia/gpus/*/information` for the device minor of each GPU
(`/dev/nvidia<minor>`, which GKE's device plugin uses as device id `nvidia<minor>`; not the NVML index).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Protocol

from exporter.pods.podresources.mapping import DeviceHolder
from plumbing.numbers import ascii_int

DEFAULT_PROC_ROOT = "/proc"

_UID = r"[0-9a-f]{8}[-_]?[0-9a-f]{4}[-_]?[0-9a-f]{4}[-_]?[0-9a-f]{4}[-_]?[0-9a-f]{12}"
_POD_COMPONENT = re.compile(rf"(?:.*-)?pod(?P<uid>{_UID})(?:\.slice)?")
_CONTAINER_COMPONENT = re.compile(
    r"(?:(?:cri-containerd|containerd|docker|crio|cri-o|libpod)-)?(?P<id>[0-9a-f]{64})(?:\.scope)?"
)


@dataclass(frozen=True)
class CgroupIdentity:
    pod_uid: str  # canonical form: lower-case with dashes (static pods: 32 hex, no dashes)
    container_id: str | None  # 64 hex; None when the process sits in the pod-level cgroup


@dataclass(frozen=True)
class PodRef:
    namespace: str
    name: str


class Unattributed(StrEnum):
    """Why a GPU process has no holder: all but UNKNOWN are certain (the process is no holder's)."""

    NOT_IN_POD = "not_in_pod"  # no pod cgroup: a host process or a container outside Kubernetes
    OTHER_POD = "other_pod"  # in a pod that holds no share of this GPU (by HOSTNAME or resolver)
    GONE = "gone"  # exited between NVML's process list and the read of /proc
    UNKNOWN = "unknown"  # in a pod, maybe a holder's, but which one cannot be told


class AttributionMethod(StrEnum):
    RESOLVER = "resolver"
    HOSTNAME = "hostname"
    SINGLE_HOLDER = "single_holder"


@dataclass(frozen=True)
class ProcessAttribution:
    namespace: str
    pod: str
    container: str  # "" when the pod is known but not which of its containers
    pod_uid: str
    container_id: str | None
    method: AttributionMethod


PodResolver = Callable[[str], "PodRef | None"]
Located = ProcessAttribution | Unattributed


def _canonical_uid(raw: str) -> str:
    """systemd slice names carry the UID with underscores (`-` separates slice levels)."""
    return raw.replace("_", "-").lower()


def parse_cgroup(text: str) -> CgroupIdentity | None:
    """Pod UID and container id from the contents of /proc/<pid>/cgroup; None when not in a pod cgroup."""
    best: CgroupIdentity | None = None
    for line in text.splitlines():
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        identity = parse_cgroup_path(parts[2])
        if identity is None:
            continue
        if identity.container_id is not None:
            return identity
        best = best or identity
    return best


def parse_cgroup_path(path: str) -> CgroupIdentity | None:
    components = [c for c in path.strip().split("/") if c]
    for position, component in enumerate(components):
        pod = _POD_COMPONENT.fullmatch(component)
        if pod is None:
            continue
        container_id = None
        for later in components[position + 1 :]:
            container = _CONTAINER_COMPONENT.fullmatch(later)
            if container is not None:
                container_id = container.group("id")
                break
        return CgroupIdentity(_canonical_uid(pod.group("uid")), container_id)
    return None


def read_cgroup_identity(pid: int, proc_root: str | Path = DEFAULT_PROC_ROOT) -> CgroupIdentity | None:
    """None when the process is gone, unreadable, or not in a pod cgroup."""
    text = _read_cgroup(pid, proc_root)
    return None if text is None else parse_cgroup(text)


def _read_cgroup(pid: int, proc_root: str | Path) -> str | None:
    """The cgroup file (mode 0444: readable without any capability); None when the process is gone."""
    try:
        return (Path(proc_root) / str(pid) / "cgroup").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None


def read_hostname(pid: int, proc_root: str | Path = DEFAULT_PROC_ROOT) -> str | None:
    """HOSTNAME from the process environment; None when unreadable (needs the same uid or CAP_SYS_PTRACE)."""
    try:
        raw = (Path(proc_root) / str(pid) / "environ").read_bytes()
    except OSError:
        return None
    for entry in raw.split(b"\0"):
        if entry.startswith(b"HOSTNAME="):
            value = entry[len(b"HOSTNAME=") :].decode("utf-8", errors="replace").strip()
            return value or None
    return None


class ProcessAttributor:
    """Attributes GPU processes to pods; construct once with the proc root (`--proc-root`, default /proc)."""

    def __init__(
        self,
        proc_root: str | Path = DEFAULT_PROC_ROOT,
        *,
        resolver: PodResolver | None = None,
        use_hostname: bool = True,
    ) -> None:
        self.proc_root = Path(proc_root)
        self._resolver = resolver
        self._use_hostname = use_hostname

    def identity(self, pid: int) -> CgroupIdentity | None:
        return read_cgroup_identity(pid, self.proc_root)

    def attribute(self, pid: int, holders: Sequence[DeviceHolder]) -> ProcessAttribution | None:
        """The pod/container of `pid`, given the holders of the GPU it runs on; None when unattributed."""
        found = self.locate(pid, holders)
        return found if isinstance(found, ProcessAttribution) else None

    def locate(self, pid: int, holders: Sequence[DeviceHolder]) -> Located:
        """Like `attribute`, but an unattributed process comes with the reason (see the module doc)."""
        text = _read_cgroup(pid, self.proc_root)
        if text is None:
            return Unattributed.GONE
        identity = parse_cgroup(text)
        if identity is None:
            return Unattributed.NOT_IN_POD
        if self._resolver is not None:
            ref = self._resolver(identity.pod_uid)
            if ref is not None:
                containers = _containers_of(holders, ref.namespace, ref.name)  # none: the pod holds no share
                container = containers[0] if len(containers) == 1 else ""
                return self._result(ref.namespace, ref.name, container, identity, AttributionMethod.RESOLVER)
        if not holders:
            return Unattributed.OTHER_POD  # nobody holds this GPU: whatever pod it is in holds none of it
        hostname = read_hostname(pid, self.proc_root) if self._use_hostname else None
        if hostname is not None:
            pods = {(h.namespace, h.pod) for h in holders if h.pod == hostname}
            if not pods:
                return Unattributed.OTHER_POD
            if len(pods) > 1:
                return Unattributed.UNKNOWN  # the same pod name in two namespaces
            namespace, pod = next(iter(pods))
            containers = _containers_of(holders, namespace, pod)
            container = containers[0] if len(containers) == 1 else ""
            return self._result(namespace, pod, container, identity, AttributionMethod.HOSTNAME)
        containers_holding = {(h.namespace, h.pod, h.container) for h in holders}
        if len(containers_holding) == 1:
            namespace, pod, container = next(iter(containers_holding))
            return self._result(namespace, pod, container, identity, AttributionMethod.SINGLE_HOLDER)
        return Unattributed.UNKNOWN

    @staticmethod
    def _result(
        namespace: str, pod: str, container: str, identity: CgroupIdentity, method: AttributionMethod
    ) -> ProcessAttribution:
        return ProcessAttribution(
            namespace=namespace,
            pod=pod,
            container=container,
            pod_uid=identity.pod_uid,
            container_id=identity.container_id,
            method=method,
        )


def _containers_of(holders: Sequence[DeviceHolder], namespace: str, pod: str) -> list[str]:
    return sorted({h.container for h in holders if h.namespace == namespace and h.pod == pod})


# --- per-pod usage of one GPU (gpu_pod_utilization_ratio, gpu_pod_memory_used_bytes) ---
class GpuProcessLike(Protocol):
    """What NVML's process list gives per process (exporter.nvml.adapter.ProcessSnapshot fits)."""

    @property
    def pid(self) -> int: ...

    @property
    def used_memory_bytes(self) -> int | None: ...


@dataclass(frozen=True)
class PodUsage:
    """One container's share of one GPU."""

    namespace: str
    pod: str
    container: str
    utilization_ratio: float | None  # 0..1; None when per-process utilization is not available
    memory_used_bytes: int | None  # None when process memory is not available
    exclusive: bool  # True: the only container on the GPU, the values are the device's


def pod_usage(
    holders: Sequence[DeviceHolder],
    processes: Sequence[GpuProcessLike] | None,
    attributions: Mapping[int, Located | None],
    process_sm_utilization: Mapping[int, float] | None,
    device_utilization_ratio: float | None,
    device_memory_used_bytes: int | None,
    *,
    partitioned: bool = False,
) -> tuple[PodUsage, ...]:
    """One entry per container holding the GPU, never counting a process twice.

    Exclusive GPU: the device's own utilization and used memory. Shared GPU: the sum over the processes
    attributed to that container (`attributions`, pid -> ProcessAttributor.locate's answer;
    `process_sm_utilization`, pid -> SM percent 0..100 from nvmlDeviceGetProcessUtilization, None when NVML
    cannot tell). A container with no process on the GPU gets 0. A process certainly no holder's (outside any
    pod, in another pod, gone) counts only in the device series. If any process may be a holder's but not
    known whose (`unattributed_pids`), or NVML cannot list the processes (`processes` None: not supported,
    no permission), every holder's values are None: a sum missing that process would be a lower bound, and
    the 0 of a holder it might belong to a fabrication. `partitioned` (MIG holders) takes the process-sum
    path even for a single container, whose slice is not the whole device.
    """
    containers = sorted({(h.namespace, h.pod, h.container) for h in holders})
    if not containers:
        return ()
    if len(containers) == 1 and not partitioned:
        namespace, pod, container = containers[0]
        usage = PodUsage(namespace, pod, container, device_utilization_ratio, device_memory_used_bytes, True)
        return (usage,)
    if processes is None or unattributed_pids(holders, processes, attributions):
        return tuple(PodUsage(*key, None, None, False) for key in containers)
    sm_by_pid = None if process_sm_utilization is None else {
        pid: percent / 100.0 for pid, percent in process_sm_utilization.items()}
    utilization = None if sm_by_pid is None else _sum_by_holder(processes, attributions, containers,
                                                                sm_by_pid)
    memory: dict[tuple[str, str, str], int] = dict.fromkeys(containers, 0)
    memory_known: dict[tuple[str, str, str], bool] = dict.fromkeys(containers, True)
    for process in processes:
        key = _holder_of(attributions.get(process.pid), containers)
        if key is None:
            continue
        if process.used_memory_bytes is None:
            memory_known[key] = False
        else:
            memory[key] += process.used_memory_bytes
    return tuple(
        PodUsage(
            namespace=key[0],
            pod=key[1],
            container=key[2],
            utilization_ratio=None if utilization is None else min(utilization[key], 1.0),
            memory_used_bytes=memory[key] if memory_known[key] else None,
            exclusive=False,
        )
        for key in containers
    )


@dataclass(frozen=True)
class PodProcessUtilization:
    """One container's part of one GPU's activity, summed over its processes' NVML samples (ratios 0..1)."""

    namespace: str
    pod: str
    container: str
    sm_ratio: float  # time its kernels ran on the GPU
    memory_bandwidth_ratio: float | None  # time device memory was read or written for it; None: not sampled


def pod_process_utilization(
    holders: Sequence[DeviceHolder],
    processes: Sequence[GpuProcessLike] | None,
    attributions: Mapping[int, Located | None],
    sm_by_pid: Mapping[int, float] | None,
    memory_by_pid: Mapping[int, float] | None,
) -> tuple[PodProcessUtilization, ...]:
    """Per holding container, the sum over its processes of NVML's per-process SM and memory-bandwidth
    utilization (pid -> ratio 0..1, nvmlDeviceGetProcessUtilization averaged over the last sampling window;
    a listed process without a sample ran no kernel then: 0), capped at 1; exclusive and shared GPUs alike.

    () when NVML has no per-process utilization (`sm_by_pid` None: unsupported, MIG mode, not sampled yet),
    cannot list the processes, or a process may be a holder's but not known whose (a sum without it would be
    a lower bound, a 0 a fabrication), as for pod_usage.
    """
    containers = sorted({(h.namespace, h.pod, h.container) for h in holders})
    if (not containers or sm_by_pid is None or processes is None
            or unattributed_pids(holders, processes, attributions)):
        return ()
    sm = _sum_by_holder(processes, attributions, containers, sm_by_pid)
    memory = None if memory_by_pid is None else _sum_by_holder(processes, attributions, containers,
                                                                 memory_by_pid)
    return tuple(PodProcessUtilization(*key, min(sm[key], 1.0),
                                       None if memory is None else min(memory[key], 1.0))
                 for key in containers)


def _sum_by_holder(processes: Sequence[GpuProcessLike], attributions: Mapping[int, Located | None],
                   containers: Sequence[tuple[str, str, str]],
                   by_pid: Mapping[int, float]) -> dict[tuple[str, str, str], float]:
    """Per holder container, the sum of `by_pid` over its processes (0 for a holder with none; a process
    no holder's, or not known whose, left out)."""
    sums = dict.fromkeys(containers, 0.0)
    for process in processes:
        key = _holder_of(attributions.get(process.pid), containers)
        if key is not None and key is not _UNKNOWN:
            sums[key] += by_pid.get(process.pid, 0.0)
    return sums


def unattributed_pids(holders: Sequence[DeviceHolder], processes: Sequence[GpuProcessLike],
                      attributions: Mapping[int, Located | None]) -> tuple[int, ...]:
    """Processes that may belong to one of the GPU's holders but not known which (a pid missing from
    `attributions` has not been looked at: unknown too)."""
    containers = sorted({(h.namespace, h.pod, h.container) for h in holders})
    return tuple(p.pid for p in processes if _holder_of(attributions.get(p.pid), containers) is _UNKNOWN)


_UNKNOWN = ("?", "?", "?")  # _holder_of's answer for "maybe a holder's, unknown which"


def _holder_of(
    found: Located | None, containers: Sequence[tuple[str, str, str]]
) -> tuple[str, str, str] | None:
    """The holder container of one process, None when certainly none, `_UNKNOWN` when it cannot be told."""
    if found is None or found is Unattributed.UNKNOWN:
        return _UNKNOWN
    if isinstance(found, Unattributed):
        return None
    of_pod = [c for c in containers if c[0] == found.namespace and c[1] == found.pod]
    if not of_pod:
        return None  # its pod holds no share of this GPU
    if found.container:
        key = (found.namespace, found.pod, found.container)
        return key if key in of_pod else None  # another container of a holder pod: not a holder
    return of_pod[0] if len(of_pod) == 1 else _UNKNOWN


# --- device minors from the driver (GKE's device plugin names GPUs `nvidia<minor>`) ---
def read_driver_minors(devices: Iterable[tuple[str, str]], proc_root: str | Path = DEFAULT_PROC_ROOT,
                       ) -> dict[int, str]:
    """Device minor -> GPU uuid, for `devices` given as (uuid, NVML PCI bus id), from the driver's
    `<proc root>/driver/nvidia/gpus/<bus>/information` (`Device Minor:`, `Bus Location:`, `GPU UUID:`).

    Matched by PCI bus location (the UUID line reads `??` on some drivers), else by UUID; {} without a driver.
    """
    by_bus = {_bus_key(bus): uuid for uuid, bus in devices if uuid and _bus_key(bus)}
    uuids = {uuid for uuid, _ in devices if uuid}
    found: dict[int, str] = {}
    for info in sorted((Path(proc_root) / "driver" / "nvidia" / "gpus").glob("*/information")):
        try:
            text = info.read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        fields = {key.strip(): value.strip() for key, _, value in
                  (line.partition(":") for line in text.splitlines()) if value}
        minor = fields.get("Device Minor", "")
        if ascii_int(minor) is None:
            continue
        uuid = by_bus.get(_bus_key(fields.get("Bus Location", info.parent.name)))
        if uuid is None and fields.get("GPU UUID") in uuids:
            uuid = fields["GPU UUID"]
        if uuid is not None:
            found[int(minor)] = uuid  # ASCII digits: checked above
    return found


def _bus_key(bus_id: str) -> tuple[int, ...] | None:
    """`00000000:18:00.0` (NVML) and `0000:18:00.0` (driver) as one key: (domain, bus, device, function)."""
    match = _BUS_ID.fullmatch(bus_id.strip())
    return None if match is None else tuple(int(part, 16) for part in match.groups())


_BUS_ID = re.compile(r"([0-9a-fA-F]+):([0-9a-fA-F]+):([0-9a-fA-F]+)\.([0-9a-fA-F]+)")
