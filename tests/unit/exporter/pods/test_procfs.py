"""cgroup parsing for every driver/runtime layout, and process -> pod attribution on a fixture proc tree."""

from __future__ import annotations

from pathlib import Path

import pytest

from exporter.pods.podresources import DeviceHolder
from exporter.pods.procfs import (
    AttributionMethod,
    CgroupIdentity,
    PodProcessUtilization,
    PodRef,
    PodUsage,
    ProcessAttribution,
    ProcessAttributor,
    Unattributed,
    parse_cgroup,
    pod_process_utilization,
    pod_usage,
    read_cgroup_identity,
    read_driver_minors,
    read_hostname,
    unattributed_pids,
)

UID = "3f1c2a4b-5d6e-4f70-8a9b-0c1d2e3f4a5b"
UID_ = UID.replace("-", "_")
CID = "a" * 40 + "0123456789abcdef01234567"
STATIC_UID = "5c7cfd7c0f7b83e0c52e4b0b0ac7a6b7"
GPU = "nvidia.com/gpu"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        pytest.param(
            f"0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{UID_}.slice/"
            f"cri-containerd-{CID}.scope\n",
            CgroupIdentity(UID, CID),
            id="v2-systemd-containerd",
        ),
        pytest.param(
            f"0::/kubepods.slice/kubepods-pod{UID_}.slice/crio-{CID}.scope\n",
            CgroupIdentity(UID, CID),
            id="v2-systemd-crio-guaranteed",
        ),
        pytest.param(
            f"0::/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod{UID_}.slice/docker-{CID}.scope",
            CgroupIdentity(UID, CID),
            id="v2-systemd-docker",
        ),
        pytest.param(
            f"12:pids:/kubepods/besteffort/pod{UID}/{CID}\n11:memory:/kubepods/besteffort/pod{UID}/{CID}\n",
            CgroupIdentity(UID, CID),
            id="v1-cgroupfs",
        ),
        pytest.param(
            f"4:devices:/kubepods/pod{UID}/{CID}\n1:name=systemd:/kubepods/pod{UID}/{CID}\n",
            CgroupIdentity(UID, CID),
            id="v1-cgroupfs-guaranteed",
        ),
        pytest.param(
            "11:cpuset:/\n"
            f"10:memory:/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{UID_}.slice/"
            f"cri-containerd-{CID}.scope\n",
            CgroupIdentity(UID, CID),
            id="v1-systemd-mixed-lines",
        ),
        pytest.param(
            f"0::/docker/{'f' * 64}/kubepods/burstable/pod{UID}/{CID}\n",
            CgroupIdentity(UID, CID),
            id="nested-kind-node",
        ),
        pytest.param(
            f"0::/kubepods/burstable/pod{STATIC_UID}/{CID}\n",
            CgroupIdentity(STATIC_UID, CID),
            id="static-pod-hash-uid",
        ),
        pytest.param(
            f"0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{UID_}.slice\n",
            CgroupIdentity(UID, None),
            id="pod-level-only",
        ),
        pytest.param(
            f"0::/kubepods.slice/kubepods-pod{UID_}.slice/crio-conmon-{CID}.scope\n",
            CgroupIdentity(UID, None),
            id="crio-conmon-is-not-the-container",
        ),
        pytest.param("0::/user.slice/user-1000.slice/session-3.scope\n", None, id="host-process"),
        pytest.param(f"0::/system.slice/docker-{CID}.scope\n", None, id="plain-docker"),
        pytest.param("", None, id="empty"),
        pytest.param("garbage without colons\n", None, id="garbage"),
    ],
)
def test_parse_cgroup(text: str, expected: CgroupIdentity | None) -> None:
    assert parse_cgroup(text) == expected


def make_proc(root: Path, pid: int, cgroup: str | None, hostname: str | None = None) -> None:
    directory = root / str(pid)
    directory.mkdir(parents=True)
    if cgroup is not None:
        (directory / "cgroup").write_text(cgroup)
    env = [b"PATH=/usr/bin", b"NVIDIA_VISIBLE_DEVICES=GPU-1"]
    if hostname is not None:
        env.append(b"HOSTNAME=" + hostname.encode())
    (directory / "environ").write_bytes(b"\0".join(env) + b"\0")


def pod_cgroup(uid: str, cid: str = CID) -> str:
    return f"0::/kubepods/burstable/pod{uid}/{cid}\n"


@pytest.fixture
def proc(tmp_path: Path) -> Path:
    root = tmp_path / "proc"
    make_proc(root, 100, pod_cgroup(UID), hostname="trainer-0")
    make_proc(root, 200, pod_cgroup("11111111-2222-3333-4444-555555555555", "b" * 64), hostname="llm-1")
    make_proc(root, 300, "0::/user.slice/session-1.scope\n", hostname="node-a")
    make_proc(root, 400, pod_cgroup(UID), hostname=None)
    return root


def holder(namespace: str, pod: str, container: str = "main") -> DeviceHolder:
    return DeviceHolder(namespace, pod, container, GPU, "GPU-1")


def test_read_helpers(proc: Path) -> None:
    assert read_cgroup_identity(100, proc) == CgroupIdentity(UID, CID)
    assert read_cgroup_identity(999, proc) is None
    assert read_hostname(100, proc) == "trainer-0"
    assert read_hostname(400, proc) is None
    assert read_hostname(999, proc) is None


def test_single_holder_gets_the_process(proc: Path) -> None:
    result = ProcessAttributor(proc).attribute(400, [holder("ml", "trainer-0")])
    assert result == ProcessAttribution("ml", "trainer-0", "main", UID, CID, AttributionMethod.SINGLE_HOLDER)


def test_host_process_is_never_attributed(proc: Path) -> None:
    assert ProcessAttributor(proc).attribute(300, [holder("ml", "trainer-0")]) is None
    assert ProcessAttributor(proc).attribute(999, [holder("ml", "trainer-0")]) is None  # process gone


def test_shared_gpu_resolved_by_hostname(proc: Path) -> None:
    holders = [holder("ml", "trainer-0"), holder("serve", "llm-1", "server")]
    attributor = ProcessAttributor(proc)
    first = attributor.attribute(100, holders)
    second = attributor.attribute(200, holders)
    assert first is not None and (first.namespace, first.pod, first.container) == ("ml", "trainer-0", "main")
    assert first.method is AttributionMethod.HOSTNAME
    assert second is not None
    assert (second.namespace, second.pod, second.container) == ("serve", "llm-1", "server")


def test_shared_gpu_ambiguous_stays_empty(proc: Path) -> None:
    holders = [holder("a", "x"), holder("b", "y")]
    assert ProcessAttributor(proc).attribute(100, holders) is None  # hostname matches no holder
    assert ProcessAttributor(proc).attribute(400, holders) is None  # no hostname at all
    assert ProcessAttributor(proc, use_hostname=False).attribute(
        100, [holder("ml", "trainer-0"), holder("b", "y")]
    ) is None
    # the same pod name in two namespaces is ambiguous too
    same_name = [holder("a", "trainer-0"), holder("b", "trainer-0")]
    assert ProcessAttributor(proc).attribute(100, same_name) is None


def test_pod_with_two_containers_on_the_gpu_gets_no_container(proc: Path) -> None:
    holders = [holder("ml", "trainer-0", "main"), holder("ml", "trainer-0", "aux"), holder("b", "y")]
    result = ProcessAttributor(proc).attribute(100, holders)
    assert result is not None and (result.pod, result.container) == ("trainer-0", "")


def test_resolver_wins_and_is_keyed_by_pod_uid(proc: Path) -> None:
    asked: list[str] = []

    def resolver(uid: str) -> PodRef | None:
        asked.append(uid)
        return PodRef("ml", "trainer-0") if uid == UID else None

    holders = [holder("ml", "trainer-0"), holder("serve", "llm-1")]
    attributor = ProcessAttributor(proc, resolver=resolver, use_hostname=False)
    result = attributor.attribute(400, holders)
    assert result == ProcessAttribution("ml", "trainer-0", "main", UID, CID, AttributionMethod.RESOLVER)
    assert attributor.attribute(200, holders) is None  # resolver does not know it, GPU shared
    assert asked == [UID, "11111111-2222-3333-4444-555555555555"]


def test_process_of_unallocated_gpu(proc: Path) -> None:
    assert ProcessAttributor(proc).attribute(100, []) is None


# --- pod_usage ---
GIB = 1024**3


class Proc:
    def __init__(self, pid: int, used: int | None) -> None:
        self.pid = pid
        self.used_memory_bytes = used


def attributed(pid_to_pod: dict[int, tuple[str, str, str] | None]) -> dict[int, ProcessAttribution | None]:
    return {
        pid: None if ref is None else ProcessAttribution(*ref, UID, CID, AttributionMethod.HOSTNAME)
        for pid, ref in pid_to_pod.items()
    }


def test_pod_usage_exclusive_gpu_is_the_device_value() -> None:
    usage = pod_usage([holder("ml", "t")], [Proc(1, 5 * GIB)], {}, None, 0.7, 9 * GIB)
    assert usage == (PodUsage("ml", "t", "main", 0.7, 9 * GIB, True),)


def test_pod_usage_shared_gpu_sums_each_containers_processes() -> None:
    holders = [holder("a", "p1"), holder("b", "p2"), holder("c", "idle")]
    processes = [Proc(1, 2 * GIB), Proc(2, 3 * GIB), Proc(3, 4 * GIB), Proc(4, 1 * GIB)]
    attributions: dict[int, ProcessAttribution | Unattributed | None] = {
        **attributed({1: ("a", "p1", "main"), 2: ("a", "p1", "main"), 3: ("b", "p2", "")}),
        4: Unattributed.NOT_IN_POD}
    usage = pod_usage(holders, processes, attributions, {1: 20.0, 2: 15.0, 3: 50.0, 4: 10.0}, 0.95, 10 * GIB)
    assert usage == (
        PodUsage("a", "p1", "main", 0.35, 5 * GIB, False),
        PodUsage("b", "p2", "main", 0.5, 4 * GIB, False),  # pod-only attribution, one container of it
        PodUsage("c", "idle", "main", 0.0, 0, False),
    )
    # never more than the device: pid 4 is in no pod
    assert sum(u.memory_used_bytes or 0 for u in usage) == 9 * GIB


def test_pod_usage_unknowns_stay_unknown() -> None:
    holders = [holder("a", "p1"), holder("b", "p2")]
    attributions = attributed({1: ("a", "p1", "main"), 2: ("x", "elsewhere", "main")})
    usage = pod_usage(holders, [Proc(1, None), Proc(2, GIB)], attributions, None, 0.5, GIB)
    found = [(u.pod, u.utilization_ratio, u.memory_used_bytes) for u in usage]
    assert found == [("p1", None, None), ("p2", None, 0)]
    assert pod_usage([], [Proc(1, GIB)], {}, None, 0.5, GIB) == ()


def test_pod_usage_caps_at_one() -> None:
    holders = [holder("a", "p1"), holder("b", "p2")]
    both_p1 = attributed({1: ("a", "p1", "main"), 2: ("a", "p1", "main")})
    usage = pod_usage(holders, [Proc(1, 0), Proc(2, 0)], both_p1, {1: 80.0, 2: 70.0}, 1.0, 0)
    assert usage[0].utilization_ratio == 1.0


# --- a HOSTNAME that names another pod is never guessed away; unattributable processes blank the GPU ---
def test_hostname_naming_a_pod_that_does_not_hold_the_gpu_is_not_credited_to_the_single_holder(
        proc: Path) -> None:
    """pid 100 is `trainer-0` by its HOSTNAME; the GPU's only holder is another pod (a pod that reached the
    GPU without requesting it, e.g. NVIDIA_VISIBLE_DEVICES=all): it must not be credited to the holder."""
    attributor = ProcessAttributor(proc)
    assert attributor.attribute(100, [holder("serve", "llm-1")]) is None
    assert attributor.locate(100, [holder("serve", "llm-1")]) is Unattributed.OTHER_POD
    # HOSTNAME matching a pod name in two namespaces: in a holder pod, but which one is unknown
    same_name = [holder("a", "trainer-0"), holder("b", "trainer-0")]
    assert attributor.locate(100, same_name) is Unattributed.UNKNOWN


def test_single_holder_rule_applies_only_when_hostname_cannot_be_read(proc: Path) -> None:
    make_proc(proc, 500, pod_cgroup(UID), hostname=None)
    (proc / "500" / "environ").unlink()  # another uid's environ without CAP_SYS_PTRACE: unreadable
    result = ProcessAttributor(proc).attribute(500, [holder("ml", "trainer-0")])
    assert result is not None and result.method is AttributionMethod.SINGLE_HOLDER
    assert ProcessAttributor(proc).locate(500, [holder("a", "x"), holder("b", "y")]) is Unattributed.UNKNOWN


def test_locate_says_why_a_process_has_no_holder(proc: Path) -> None:
    attributor = ProcessAttributor(proc)
    assert attributor.locate(300, [holder("ml", "trainer-0")]) is Unattributed.NOT_IN_POD  # host process
    assert attributor.locate(999, [holder("ml", "trainer-0")]) is Unattributed.GONE
    assert attributor.locate(100, []) is Unattributed.OTHER_POD  # nobody holds this GPU
    found = attributor.locate(100, [holder("ml", "trainer-0"), holder("b", "y")])
    assert isinstance(found, ProcessAttribution) and found.pod == "trainer-0"


def test_pod_usage_of_a_shared_gpu_with_unattributable_processes_is_unknown_not_zero() -> None:
    """The audit case: processes at 40 % and 50 % on a 90 % GPU whose environ cannot be read: both holders
    used to read 0.0 and 0 bytes. Unknown is left out (None), never a fabricated 0."""
    holders = [holder("a", "p1"), holder("b", "p2")]
    processes = [Proc(1, 3 * GIB), Proc(2, 5 * GIB)]
    unknown = {1: Unattributed.UNKNOWN, 2: Unattributed.UNKNOWN}
    usage = pod_usage(holders, processes, unknown, {1: 40.0, 2: 50.0}, 0.9, 8 * GIB)
    assert [(u.pod, u.utilization_ratio, u.memory_used_bytes) for u in usage] == [
        ("p1", None, None), ("p2", None, None)]
    # one attributed, one unknown: p1's sum would be a lower bound and p2's 0 a guess: both unknown
    half = {1: attributed({1: ("a", "p1", "main")})[1], 2: Unattributed.UNKNOWN}
    assert all(u.utilization_ratio is None and u.memory_used_bytes is None
               for u in pod_usage(holders, processes, half, {1: 40.0, 2: 50.0}, 0.9, 8 * GIB))
    # a pid never looked at (missing from the mapping) is unknown too
    assert pod_usage(holders, processes, {}, {1: 40.0, 2: 50.0}, 0.9, 8 * GIB)[0].memory_used_bytes is None
    assert unattributed_pids(holders, processes, half) == (2,)


def test_pod_usage_processes_known_to_be_no_holders_count_only_for_the_device() -> None:
    holders = [holder("a", "p1"), holder("b", "p2")]
    processes = [Proc(1, 3 * GIB), Proc(2, 5 * GIB), Proc(3, GIB), Proc(4, GIB)]
    attributions: dict[int, ProcessAttribution | Unattributed | None] = {
        1: attributed({1: ("a", "p1", "main")})[1], 2: Unattributed.NOT_IN_POD, 3: Unattributed.OTHER_POD,
        4: Unattributed.GONE}
    usage = pod_usage(holders, processes, attributions, {1: 40.0, 2: 50.0}, 0.9, 10 * GIB)
    assert [(u.pod, u.utilization_ratio, u.memory_used_bytes) for u in usage] == [
        ("p1", 0.4, 3 * GIB), ("p2", 0.0, 0)]
    assert unattributed_pids(holders, processes, attributions) == ()
    # a pod with two containers on the GPU and a process attributed to the pod only: which one is unknown
    two = [holder("a", "p1", "main"), holder("a", "p1", "aux")]
    pod_only = {1: ProcessAttribution("a", "p1", "", UID, CID, AttributionMethod.HOSTNAME)}
    assert unattributed_pids(two, [Proc(1, GIB)], pod_only) == (1,)


# --- pod_process_utilization: NVML's per-process SM and memory-bandwidth utilization summed per holder ---
def test_process_utilization_sums_each_holders_processes_unscaled() -> None:
    """Two pods time-slicing a GPU: each gets the sum of its processes' samples (0 for a holder whose
    processes had no sample in the window, i.e. ran no kernel); a process in no pod counts for nobody."""
    holders = [holder("a", "p1"), holder("b", "p2"), holder("c", "idle")]
    processes = [Proc(1, GIB), Proc(2, GIB), Proc(3, GIB), Proc(4, GIB), Proc(5, GIB)]
    attributions: dict[int, ProcessAttribution | Unattributed | None] = {
        **attributed({1: ("a", "p1", "main"), 2: ("a", "p1", "main"), 3: ("b", "p2", ""),
                      5: ("c", "idle", "main")}),
        4: Unattributed.NOT_IN_POD}
    sm = {1: 0.2, 2: 0.15, 3: 0.5, 4: 0.1}
    memory = {1: 0.1, 2: 0.05, 3: 0.25, 4: 0.02}
    found = pod_process_utilization(holders, processes, attributions, sm, memory)
    assert found == (
        PodProcessUtilization("a", "p1", "main", pytest.approx(0.35), pytest.approx(0.15)),
        PodProcessUtilization("b", "p2", "main", 0.5, 0.25),
        PodProcessUtilization("c", "idle", "main", 0.0, 0.0),
    )
    # the exclusive holder of a GPU is summed the same way (its processes, not the device value)
    alone = pod_process_utilization([holder("a", "p1")], processes[:2], attributions, sm, None)
    assert alone == (PodProcessUtilization("a", "p1", "main", pytest.approx(0.35), None),)


@pytest.mark.parametrize(("processes", "attributions", "sm"), [
    ([Proc(1, GIB)], attributed({1: ("a", "p1", "main")}), None),  # not supported / MIG mode / not sampled
    (None, attributed({1: ("a", "p1", "main")}), {1: 0.5}),  # NVML cannot list the processes
    ([Proc(1, GIB), Proc(2, GIB)], {**attributed({1: ("a", "p1", "main")}), 2: Unattributed.UNKNOWN},
     {1: 0.2, 2: 0.3}),  # a process that may be either holder's
], ids=["no per-process utilization", "no process list", "a process not known whose"])
def test_process_utilization_left_out_when_it_cannot_be_told(
        processes: list[Proc] | None, attributions: dict[int, ProcessAttribution | Unattributed | None],
        sm: dict[int, float] | None) -> None:
    holders = [holder("a", "p1"), holder("b", "p2")]
    assert pod_process_utilization(holders, processes, attributions, sm, sm) == ()


def test_process_utilization_caps_at_one() -> None:
    both_p1 = attributed({1: ("a", "p1", "main"), 2: ("a", "p1", "main")})
    (found,) = pod_process_utilization([holder("a", "p1")], [Proc(1, 0), Proc(2, 0)], both_p1,
                                       {1: 0.8, 2: 0.7}, {1: 0.6, 2: 0.6})
    assert (found.sm_ratio, found.memory_bandwidth_ratio) == (1.0, 1.0)


# --- /proc/driver/nvidia: the device minor of each GPU (GKE device-plugin ids are `nvidia<minor>`) ---
def write_driver_info(root: Path, bus: str, minor: int | str, uuid: str | None = None) -> None:
    directory = root / "driver" / "nvidia" / "gpus" / bus
    directory.mkdir(parents=True)
    lines = ["Model: \t\t NVIDIA L4", "IRQ:   \t\t 150", f"GPU UUID: \t {uuid or '??'}", "Bus Type: \t PCIe",
             f"Bus Location: \t {bus}", f"Device Minor: \t {minor}", "GPU Excluded:\t No"]
    (directory / "information").write_text("\n".join(lines) + "\n")


def test_driver_minors_match_nvml_by_bus_location_or_uuid(tmp_path: Path) -> None:
    # minors in reverse PCI order: minor 0 is NVML's GPU 1, so the minor is not the index
    write_driver_info(tmp_path, "0000:18:00.0", 1)
    write_driver_info(tmp_path, "0000:28:00.0", 0)
    write_driver_info(tmp_path, "0000:38:00.0", 2, uuid="GPU-c")  # bus unknown to NVML, uuid known
    write_driver_info(tmp_path, "0000:48:00.0", "??")  # unreadable minor: skipped
    devices = [("GPU-a", "00000000:18:00.0"), ("GPU-b", "00000000:28:00.0"), ("GPU-c", "")]
    assert read_driver_minors(devices, tmp_path) == {1: "GPU-a", 0: "GPU-b", 2: "GPU-c"}
    assert read_driver_minors(devices, tmp_path / "nothing") == {}
