"""Which pod a GPU process belongs to: read `<proc root>/<pid>/cgroup`, then match against the GPU's holders.

The cgroup path names the pod UID and the container id, for cgroup v1 and v2 and both kubelet cgroup drivers:

    0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod<uid_with_underscores>.slice/
        cri-containerd-<64 hex>.scope                                         (systemd; also crio-, docker-)
    11:memory:/kubepods/besteffort/pod<uid>/<64 hex>                          (cgroupfs)

The kubelet's List API returns pod names but no UIDs or container ids, so a UID alone does not give a name.
`ProcessAttributor.attribute(pid, holders)` resolves, in this order:
1. `resolver(pod_uid)` -> PodRef, when the caller has one (e.g. built from the API server); the container is
   taken from the GPU's holders of that pod when exactly one container of it holds the GPU;
2. the pod name from the process's `HOSTNAME` (`<proc root>/<pid>/environ`, which the container runtime sets
   to the pod name) matched against the holders' pod names, when exactly one holder matches;
3. the GPU's single holder, when exactly one container holds it.
A process outside any pod cgroup (host process, plain docker container) is never attributed; anything
ambiguous (a shared GPU with no name match) stays unattributed rather than guessed.

`pod_usage()` turns the attributions into per-container utilization and memory of one GPU (the gpu_pod_*
series): the device values for an exclusive GPU, the sum of the container's processes for a shared one.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Protocol

from exporter.podresources.mapping import DeviceHolder

DEFAULT_PROC_ROOT = "/proc"

_UID = r"[0-9a-f]{8}[-_]?[0-9a-f]{4}[-_]?[0-9a-f]{4}[-_]?[0-9a-f]{4}[-_]?[0-9a-f]{12}"
_POD_COMPONENT = re.compile(rf"^(?:.*-)?pod(?P<uid>{_UID})(?:\.slice)?$")
_CONTAINER_COMPONENT = re.compile(
    r"^(?:(?:cri-containerd|containerd|docker|crio|cri-o|libpod)-)?(?P<id>[0-9a-f]{64})(?:\.scope)?$"
)


@dataclass(frozen=True)
class CgroupIdentity:
    pod_uid: str  # canonical form: lower-case with dashes (static pods: 32 hex, no dashes)
    container_id: str | None  # 64 hex; None when the process sits in the pod-level cgroup


@dataclass(frozen=True)
class PodRef:
    namespace: str
    name: str


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
        pod = _POD_COMPONENT.match(component)
        if pod is None:
            continue
        container_id = None
        for later in components[position + 1 :]:
            container = _CONTAINER_COMPONENT.match(later)
            if container is not None:
                container_id = container.group("id")
                break
        return CgroupIdentity(_canonical_uid(pod.group("uid")), container_id)
    return None


def read_cgroup_identity(pid: int, proc_root: str | Path = DEFAULT_PROC_ROOT) -> CgroupIdentity | None:
    """None when the process is gone, unreadable, or not in a pod cgroup."""
    try:
        text = (Path(proc_root) / str(pid) / "cgroup").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    return parse_cgroup(text)


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
        """The pod/container of `pid`, given the holders of the GPU it runs on; None when unknown."""
        identity = self.identity(pid)
        if identity is None:
            return None
        if self._resolver is not None:
            ref = self._resolver(identity.pod_uid)
            if ref is not None:
                containers = _containers_of(holders, ref.namespace, ref.name)
                container = containers[0] if len(containers) == 1 else ""
                return self._result(ref.namespace, ref.name, container, identity, AttributionMethod.RESOLVER)
        if self._use_hostname and holders:
            hostname = read_hostname(pid, self.proc_root)
            if hostname is not None:
                matching = [h for h in holders if h.pod == hostname]
                pods = {(h.namespace, h.pod) for h in matching}
                if len(pods) == 1:
                    namespace, pod = next(iter(pods))
                    containers = _containers_of(holders, namespace, pod)
                    container = containers[0] if len(containers) == 1 else ""
                    return self._result(namespace, pod, container, identity, AttributionMethod.HOSTNAME)
        containers_holding = {(h.namespace, h.pod, h.container) for h in holders}
        if len(containers_holding) == 1:
            namespace, pod, container = next(iter(containers_holding))
            return self._result(namespace, pod, container, identity, AttributionMethod.SINGLE_HOLDER)
        return None

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
    """What NVML's process list gives per process (exporter.nvml.ProcessSnapshot fits)."""

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
    processes: Sequence[GpuProcessLike],
    attributions: Mapping[int, ProcessAttribution | None],
    process_sm_utilization: Mapping[int, float] | None,
    device_utilization_ratio: float | None,
    device_memory_used_bytes: int | None,
    *,
    partitioned: bool = False,
) -> tuple[PodUsage, ...]:
    """One entry per container holding the GPU, never counting a process twice.

    Exclusive GPU: the device's own utilization and used memory. Shared GPU: the sum over the processes
    attributed to that container (`attributions`, pid -> ProcessAttribution, from ProcessAttributor;
    `process_sm_utilization`, pid -> SM percent 0..100 from nvmlDeviceGetProcessUtilization, None when NVML
    cannot tell). A container with no process on the GPU gets 0. Processes attributed to no holder count
    only in the device series. A process attributed to a pod but not a container counts for that pod's
    container when it has exactly one on this GPU. `partitioned` (MIG holders) takes the process-sum path even
    for a single container, whose slice is not the whole device.
    """
    containers = sorted({(h.namespace, h.pod, h.container) for h in holders})
    if not containers:
        return ()
    if len(containers) == 1 and not partitioned:
        namespace, pod, container = containers[0]
        usage = PodUsage(namespace, pod, container, device_utilization_ratio, device_memory_used_bytes, True)
        return (usage,)
    utilization: dict[tuple[str, str, str], float] = dict.fromkeys(containers, 0.0)
    memory: dict[tuple[str, str, str], int] = dict.fromkeys(containers, 0)
    memory_known: dict[tuple[str, str, str], bool] = dict.fromkeys(containers, True)
    for process in processes:
        key = _container_key(attributions.get(process.pid), containers)
        if key is None:
            continue
        if process_sm_utilization is not None:
            utilization[key] += process_sm_utilization.get(process.pid, 0.0) / 100.0
        if process.used_memory_bytes is None:
            memory_known[key] = False
        else:
            memory[key] += process.used_memory_bytes
    return tuple(
        PodUsage(
            namespace=key[0],
            pod=key[1],
            container=key[2],
            utilization_ratio=None if process_sm_utilization is None else min(utilization[key], 1.0),
            memory_used_bytes=memory[key] if memory_known[key] else None,
            exclusive=False,
        )
        for key in containers
    )


def _container_key(
    attribution: ProcessAttribution | None, containers: Sequence[tuple[str, str, str]]
) -> tuple[str, str, str] | None:
    if attribution is None:
        return None
    if attribution.container:
        key = (attribution.namespace, attribution.pod, attribution.container)
        return key if key in containers else None
    of_pod = [c for c in containers if c[0] == attribution.namespace and c[1] == attribution.pod]
    return of_pod[0] if len(of_pod) == 1 else None
