"""The MIG part of the simulated NVML surface: a GPU group with `mig: N` in the YAML is in MIG mode with N
MIG devices whose UUIDs (`MIG-...`) are what the device plugin would advertise as `nvidia.com/mig-*` ids.

Like real NVML, a GPU in MIG mode does not support device or per-process utilization
(`MIG_UNSUPPORTED_CALLS` raise NVMLError_NotSupported); memory, power, temperature, clocks, ECC and the
process list still answer for the whole GPU.

Kept apart from exporter/simulator/nvml.py so each stays small; `SimulatedNvml` inherits these methods.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any

NVML_DEVICE_MIG_DISABLE = 0
NVML_DEVICE_MIG_ENABLE = 1

# NVML's docs: "On MIG-enabled GPUs, querying device utilization rates / process utilization is not currently
# supported" (both raise NVML_ERROR_NOT_SUPPORTED).
MIG_UNSUPPORTED_CALLS = frozenset({"nvmlDeviceGetUtilizationRates", "nvmlDeviceGetProcessUtilization"})


@dataclass(eq=False)
class SimMigHandle:
    """What nvmlDeviceGetMigDeviceHandleByIndex returns: MIG device `slot` of GPU `parent`."""

    parent: int
    slot: int


def mig_uuid(seed: int, index: int, slot: int) -> str:
    digest = hashlib.sha256(f"simulated-mig:{seed}:{index}:{slot}".encode()).hexdigest()
    return f"MIG-{digest[:8]}-{digest[8:12]}-{digest[12:16]}-{digest[16:20]}-{digest[20:32]}"


class MigSurface:
    """pynvml's MIG calls over the simulated GPUs (needs `_gpu`, `_lock`, `config` of SimulatedNvml)."""

    _lock: Any
    config: Any

    def _gpu(self, call: str, handle: Any) -> tuple[Any, float]:  # provided by SimulatedNvml
        raise NotImplementedError

    def nvmlDeviceGetMigMode(self, device: Any) -> list[int]:
        with self._lock:
            gpu, _ = self._gpu("nvmlDeviceGetMigMode", device)
            mode = NVML_DEVICE_MIG_ENABLE if gpu.spec.mig_devices else NVML_DEVICE_MIG_DISABLE
            return [mode, mode]

    def nvmlDeviceGetMaxMigDeviceCount(self, device: Any) -> int:
        with self._lock:
            gpu, _ = self._gpu("nvmlDeviceGetMaxMigDeviceCount", device)
            return 7 if gpu.spec.mig_devices else 0

    def nvmlDeviceGetMigDeviceHandleByIndex(self, device: Any, index: int) -> SimMigHandle:
        with self._lock:
            gpu, _ = self._gpu("nvmlDeviceGetMigDeviceHandleByIndex", device)
            if not gpu.spec.mig_devices:
                raise self.NVMLError_NotSupported()  # type: ignore[attr-defined]
            if not 0 <= index < gpu.spec.mig_devices:
                raise self.NVMLError_NotFound()  # type: ignore[attr-defined]
            return SimMigHandle(gpu.index, index)

    def mig_uuid_of(self, handle: SimMigHandle) -> str:
        return mig_uuid(self.config.seed, handle.parent, handle.slot)
