"""The kubelet PodResourcesLister v1 client: one `List` call over the kubelet's unix socket.

A fresh channel per call: the call happens every few seconds at most, a unix-socket connect costs nothing, and
a long-lived channel would sit in gRPC's reconnect backoff (up to two minutes) after a kubelet restart.
gRPC's default 4 MiB receive limit is too small for a large node's reply: `max_receive_message_bytes`.
grpc and the stubs are imported on the first call that finds the socket (about 14 MiB resident): a node or a
laptop without a kubelet never pays for them.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from exporter.errors import ExporterError
from exporter.pods.podresources.mapping import DeviceAllocation

if TYPE_CHECKING:
    from exporter.pods.podresources import api_pb2

DEFAULT_SOCKET = "/var/lib/kubelet/pod-resources/kubelet.sock"
DEFAULT_TIMEOUT_SECONDS = 5.0
DEFAULT_MAX_RECEIVE_MESSAGE_BYTES = 64 * 1024 * 1024


class PodResourcesUnavailableError(ExporterError):
    """The kubelet pod-resources API could not be read (socket missing, kubelet down, timeout, bad reply)."""


@dataclass(frozen=True)
class PodResourcesClientSettings:
    """Where and how to call the kubelet."""

    socket_path: str = DEFAULT_SOCKET
    # One List call; the kubelet answers in milliseconds, a hung kubelet must not hold the refresher forever.
    timeout_seconds: float = DEFAULT_TIMEOUT_SECONDS
    # Bytes; a node with hundreds of pods and DRA claims can exceed gRPC's 4 MiB default.
    max_receive_message_bytes: int = DEFAULT_MAX_RECEIVE_MESSAGE_BYTES

    def __post_init__(self) -> None:
        if not self.socket_path:
            raise ValueError("socket_path: expected a unix socket path (got an empty string)")
        if not self.timeout_seconds > 0:
            raise ValueError(f"timeout_seconds: expected > 0 (got {self.timeout_seconds!r})")
        if self.max_receive_message_bytes < 4 * 1024 * 1024:
            raise ValueError(
                f"max_receive_message_bytes: expected >= 4194304 (got {self.max_receive_message_bytes!r})"
            )


class PodResourcesClient:
    """Calls `List` and flattens the reply into `DeviceAllocation`s (every resource, no filtering here)."""

    def __init__(self, settings: PodResourcesClientSettings | None = None) -> None:
        self.settings = settings or PodResourcesClientSettings()

    @property
    def target(self) -> str:
        return "unix://" + os.path.abspath(self.settings.socket_path)

    def list_allocations(self) -> tuple[DeviceAllocation, ...]:
        """Every device id assigned to every container on the node. Raises PodResourcesUnavailableError."""
        return allocations_from_response(self.list_pod_resources())

    def list_pod_resources(self) -> api_pb2.ListPodResourcesResponse:
        """The raw List reply. Raises PodResourcesUnavailableError."""
        path = self.settings.socket_path
        if not os.path.exists(path):
            raise PodResourcesUnavailableError(f"socket {path} does not exist")
        import grpc  # deferred: see the module doc

        from exporter.pods.podresources import api_pb2, api_pb2_grpc

        options = [
            ("grpc.max_receive_message_length", self.settings.max_receive_message_bytes),
            ("grpc.enable_http_proxy", 0),
        ]
        try:
            with grpc.insecure_channel(self.target, options=options) as channel:
                stub = api_pb2_grpc.PodResourcesListerStub(channel)
                response: api_pb2.ListPodResourcesResponse = stub.List(
                    api_pb2.ListPodResourcesRequest(), timeout=self.settings.timeout_seconds
                )
                return response
        except grpc.RpcError as e:
            call: Any = e  # at run time a call's RpcError is also a grpc.Call (the stubs say it cannot be)
            code = call.code() if hasattr(call, "code") else None
            details = call.details() if hasattr(call, "details") else str(e)
            name = code.name if code is not None else "UNKNOWN"
            raise PodResourcesUnavailableError(f"List on {path} failed: {name}: {details}") from e


def allocations_from_response(response: api_pb2.ListPodResourcesResponse) -> tuple[DeviceAllocation, ...]:
    """Flatten pods -> containers -> devices -> ids, device-plugin devices and DRA claims' devices alike.

    A DRA device is filed with its driver as the resource and its device name as the id (see mapping.py);
    its claim is the claim's name, with the claim's namespace in front only when it is not the pod's."""
    found: list[DeviceAllocation] = []
    for pod in response.pod_resources:
        for container in pod.containers:
            holder = (pod.namespace, pod.name, container.name)
            found.extend(DeviceAllocation(*holder, resource=devices.resource_name, device_id=device_id)
                         for devices in container.devices for device_id in devices.device_ids)
            for dynamic in container.dynamic_resources:
                claim = dynamic.claim_name
                if dynamic.claim_namespace and dynamic.claim_namespace != pod.namespace:
                    claim = f"{dynamic.claim_namespace}/{claim}"
                found.extend(DeviceAllocation(*holder, resource=r.driver_name, device_id=r.device_name,
                                              claim=claim, pool=r.pool_name)
                             for r in dynamic.claim_resources)
    return tuple(found)
