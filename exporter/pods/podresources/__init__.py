"""Pod attribution from the kubelet's PodResourcesLister v1 gRPC API (stubs generated from api.proto).

`PodResourcesCache(PodResourcesClient(settings).list_allocations)` is what the exporter runs; see mapping.py
for how device ids (time-slicing `::<n>`, MIG) become GPU keys.
"""

from exporter.pods.podresources.cache import (
    DEFAULT_REFRESH_INTERVAL_SECONDS,
    AllocationLister,
    HolderSnapshot,
    PodResourcesCache,
)
from exporter.pods.podresources.client import (
    DEFAULT_MAX_RECEIVE_MESSAGE_BYTES,
    DEFAULT_SOCKET,
    DEFAULT_TIMEOUT_SECONDS,
    PodResourcesClient,
    PodResourcesClientSettings,
    PodResourcesUnavailableError,
    allocations_from_response,
)
from exporter.pods.podresources.mapping import (
    DEFAULT_RESOURCE_NAMES,
    GPU_RESOURCE,
    MIG_RESOURCE_PREFIX,
    DeviceAllocation,
    DeviceHolder,
    MigParentLookup,
    build_holder_map,
    is_gpu_resource,
    normalize_device_id,
    resource_filter,
    single_holder,
)

__all__ = [
    "DEFAULT_MAX_RECEIVE_MESSAGE_BYTES",
    "DEFAULT_REFRESH_INTERVAL_SECONDS",
    "DEFAULT_RESOURCE_NAMES",
    "DEFAULT_SOCKET",
    "DEFAULT_TIMEOUT_SECONDS",
    "GPU_RESOURCE",
    "MIG_RESOURCE_PREFIX",
    "AllocationLister",
    "DeviceAllocation",
    "DeviceHolder",
    "HolderSnapshot",
    "MigParentLookup",
    "PodResourcesCache",
    "PodResourcesClient",
    "PodResourcesClientSettings",
    "PodResourcesUnavailableError",
    "allocations_from_response",
    "build_holder_map",
    "is_gpu_resource",
    "normalize_device_id",
    "resource_filter",
    "single_holder",
]
