"""A real gRPC PodResourcesLister server on a temp unix socket, answering what the test sets, and a simulated
GPU node with pods; tests/integration/exporter/conftest.py makes `socket_dir`, `kubelet` and `proc_root`
fixtures of the exporter's integration tests."""

from __future__ import annotations

import os
import shutil
import tempfile
import threading
from collections.abc import Iterator, Sequence
from concurrent import futures
from dataclasses import dataclass, field

import grpc
import pytest

from exporter.pods.podresources import api_pb2, api_pb2_grpc

DRA_DRIVER = "gpu.nvidia.com"


@dataclass(frozen=True)
class Claim:
    """A DRA ResourceClaim's devices as the kubelet lists them in a container's `dynamic_resources`."""

    name: str
    devices: Sequence[str]  # DRA device names: `gpu-0`, `gpu-0-mig-1g10gb-19-0`
    namespace: str = ""  # "" = the pod's
    driver: str = DRA_DRIVER
    pool: str = "node-a"


# (namespace, pod, [(container, [(resource, [device ids]) or Claim])])
PodSpec = tuple[str, str, Sequence[tuple[str, Sequence["tuple[str, Sequence[str]] | Claim"]]]]


def make_response(pods: Sequence[PodSpec]) -> api_pb2.ListPodResourcesResponse:
    response = api_pb2.ListPodResourcesResponse()
    for namespace, name, containers in pods:
        pod = response.pod_resources.add(name=name, namespace=namespace)
        for container_name, devices in containers:
            container = pod.containers.add(name=container_name)
            for entry in devices:
                if isinstance(entry, Claim):
                    dynamic = container.dynamic_resources.add(
                        claim_name=entry.name, claim_namespace=entry.namespace or namespace)
                    for device in entry.devices:
                        claimed = dynamic.claim_resources.add(driver_name=entry.driver, pool_name=entry.pool,
                                                              device_name=device)
                        claimed.cdi_devices.add(name=f"k8s.{entry.driver}/claim=0b3a7c52-{entry.name}-{device}")
                else:
                    resource, ids = entry
                    container.devices.add(resource_name=resource, device_ids=list(ids))
    return response


class FakeLister(api_pb2_grpc.PodResourcesListerServicer):
    def __init__(self) -> None:
        self.response = api_pb2.ListPodResourcesResponse()
        self.calls = 0
        self._lock = threading.Lock()

    def List(self, request, context):
        with self._lock:
            self.calls += 1
            return self.response


@dataclass
class KubeletServer:
    """Starts/stops a gRPC server bound to `socket_path`; `stop()` also removes the socket file."""

    socket_path: str
    lister: FakeLister = field(default_factory=FakeLister)
    _server: grpc.Server | None = None

    def start(self) -> None:
        server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
        api_pb2_grpc.add_PodResourcesListerServicer_to_server(self.lister, server)
        if server.add_insecure_port("unix:" + self.socket_path) == 0:
            raise RuntimeError(f"cannot bind {self.socket_path}")
        server.start()
        self._server = server

    def stop(self) -> None:
        if self._server is not None:
            self._server.stop(grace=None).wait(10)
            self._server = None
        if os.path.exists(self.socket_path):
            os.unlink(self.socket_path)

    def set_pods(self, pods: Sequence[PodSpec]) -> None:
        self.lister.response = make_response(pods)


@pytest.fixture
def socket_dir() -> Iterator[str]:
    # Short path: unix socket paths are limited to 107 bytes, pytest's tmp_path can be longer.
    path = tempfile.mkdtemp(prefix="podres-", dir="/tmp")
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def kubelet(socket_dir: str) -> Iterator[KubeletServer]:
    server = KubeletServer(os.path.join(socket_dir, "kubelet.sock"))
    server.start()
    try:
        yield server
    finally:
        server.stop()


# --- a simulated GPU node with pods: 4 GPUs (exclusive, time-sliced by 2 pods, MIG, free) ---
SEED = 5
GPU = "nvidia.com/gpu"
MIG_RESOURCE = "nvidia.com/mig-1g.10gb"

NODE_YAML = f"""
seed: {SEED}
gpus:
  - {{model: H100, load: {{pattern: constant, value: 0.5, noise: 0}},
     processes: [{{pid: 101, memory_gib: 10}}]}}
  - {{model: H100, load: {{pattern: constant, value: 0.6, noise: 0}},
     processes: [{{pid: 201, memory_gib: 8, sm_share: 1}}, {{pid: 202, memory_gib: 4, sm_share: 2}}]}}
  - {{model: A100, mig: 2, load: {{pattern: constant, value: 0.3, noise: 0}},
     processes: [{{pid: 301, memory_gib: 5}}]}}
  - {{model: L4, load: {{pattern: constant, value: 0.0, noise: 0}}}}
"""

# pid -> (pod uid, pod name): the pod name is the process's HOSTNAME, as the container runtime sets it
PROCESSES = {
    101: ("0b3a7c52-1111-4a8e-9d3c-1a2b3c4d5e01", "trainer-0"),
    201: ("0b3a7c52-2222-4a8e-9d3c-1a2b3c4d5e02", "llm-a"),
    202: ("0b3a7c52-3333-4a8e-9d3c-1a2b3c4d5e03", "llm-b"),
    301: ("0b3a7c52-4444-4a8e-9d3c-1a2b3c4d5e04", "mig-job"),
}


def node_uuids() -> list[str]:
    from exporter.simulator.physics import gpu_uuid

    return [gpu_uuid(SEED, index) for index in range(4)]


def mig_device(slot: int = 0) -> str:
    from exporter.simulator.mig import mig_uuid

    return mig_uuid(SEED, 2, slot)


def node_pods() -> list[PodSpec]:
    uuids = node_uuids()
    return [
        ("ml", "trainer-0", [("main", [(GPU, [uuids[0]])])]),
        ("serve", "llm-a", [("server", [(GPU, [f"{uuids[1]}::0"])])]),
        ("serve", "llm-b", [("server", [(GPU, [f"{uuids[1]}::1", f"{uuids[1]}::2"])])]),
        ("batch", "mig-job", [("worker", [(MIG_RESOURCE, [mig_device(0)])])]),
        ("infra", "agent", [("main", [("example.com/nic", ["nic0"])])]),  # not a GPU
    ]


def write_proc_tree(root: str) -> None:
    """A fake /proc: <pid>/cgroup (cgroup v2, systemd driver, containerd) and <pid>/environ with HOSTNAME."""
    for pid, (uid, pod) in PROCESSES.items():
        directory = os.path.join(root, str(pid))
        os.makedirs(directory, exist_ok=True)
        slice_uid = uid.replace("-", "_")
        container = f"{pid:064x}"
        with open(os.path.join(directory, "cgroup"), "w") as f:
            f.write(f"0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{slice_uid}.slice/"
                    f"cri-containerd-{container}.scope\n")
        with open(os.path.join(directory, "environ"), "wb") as f:
            f.write(b"PATH=/usr/bin\0HOSTNAME=" + pod.encode() + b"\0")


@pytest.fixture
def proc_root(tmp_path_factory: pytest.TempPathFactory) -> str:
    root = str(tmp_path_factory.mktemp("proc"))
    write_proc_tree(root)
    return root
