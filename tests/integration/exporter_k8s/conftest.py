"""A real gRPC PodResourcesLister server on a temp unix socket, answering what the test sets."""

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

from exporter.podresources import api_pb2, api_pb2_grpc

# (namespace, pod, [(container, [(resource, [device ids])])])
PodSpec = tuple[str, str, Sequence[tuple[str, Sequence[tuple[str, Sequence[str]]]]]]


def make_response(pods: Sequence[PodSpec]) -> api_pb2.ListPodResourcesResponse:
    response = api_pb2.ListPodResourcesResponse()
    for namespace, name, containers in pods:
        pod = response.pod_resources.add(name=name, namespace=namespace)
        for container_name, devices in containers:
            container = pod.containers.add(name=container_name)
            for resource, ids in devices:
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
