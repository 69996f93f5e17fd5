"""The memory and link health part of the simulated NVML surface: row remapping, retired pages, memory
temperature (a field value), NVLink state and error counters, clock violation time.

Same signatures and return types as pynvml (its own ctypes structures where pynvml returns one); a model
without the feature raises NVMLError_NotSupported as the real board does (exporter/simulator/models.py).
The load driver methods (`set_row_remap`, `set_nvlink_down`, `add_nvlink_errors`, `add_retired_pages`) and
the `row_remap_pending`, `row_remap_failed` and `nvlink_down` faults change what they answer.

Kept apart from exporter/simulator/nvml.py so each stays small; `SimulatedNvml` inherits these methods.
"""

from __future__ import annotations

import time
from typing import Any

from exporter.nvml.adapter import real_nvml
from exporter.simulator.physics import SimGpu

_pynvml = real_nvml()
HBM_ABOVE_CORE_CELSIUS = 4.0  # HBM stacks run a few degrees above the GPU core
NVLINK_COUNTERS = (_pynvml.NVML_NVLINK_ERROR_DL_REPLAY, _pynvml.NVML_NVLINK_ERROR_DL_RECOVERY,
                   _pynvml.NVML_NVLINK_ERROR_DL_CRC_FLIT, _pynvml.NVML_NVLINK_ERROR_DL_CRC_DATA,
                   _pynvml.NVML_NVLINK_ERROR_DL_ECC_DATA)


NVLINK_RAW = (_pynvml.NVML_FI_DEV_NVLINK_THROUGHPUT_RAW_TX, _pynvml.NVML_FI_DEV_NVLINK_THROUGHPUT_RAW_RX)
NVLINK_DATA = (_pynvml.NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX, _pynvml.NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_RX)
NVLINK_TX = (_pynvml.NVML_FI_DEV_NVLINK_THROUGHPUT_RAW_TX, _pynvml.NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX)
NVLINK_TX_SHARE, NVLINK_RX_SHARE = 0.3, 0.25  # of the model's NVLink bandwidth at full load, as GPM reports
NVLINK_PAYLOAD_SHARE = 0.9  # of the raw traffic: the rest is protocol headers


def nvlink_kib(gpu: SimGpu, tx: bool, payload_only: bool = False) -> int:
    """One link's NVLink traffic counter in KiB since the driver loaded (header and payload, or the payload
    alone): the GPU's traffic at its load so far, shared evenly by its links."""
    model = gpu.spec.model
    share = (NVLINK_TX_SHARE if tx else NVLINK_RX_SHARE) * (NVLINK_PAYLOAD_SHARE if payload_only else 1.0)
    return int(model.nvlink_mib_per_second * 1024 * share * gpu.busy_seconds / model.nvlinks)


class ReliabilitySurface:
    """pynvml's memory and link health calls (needs `_gpu`, `_gpus`, `_lock`, `now`, `config`)."""

    _lock: Any
    _gpus: list[SimGpu]
    config: Any

    def _gpu(self, call: str, handle: Any) -> tuple[SimGpu, float]:  # provided by SimulatedNvml
        raise NotImplementedError

    def now(self) -> float:  # provided by SimulatedNvml
        raise NotImplementedError

    # -- load driver ----------------------------------------------------------------------------------
    def set_row_remap(self, index: int, *, correctable: int | None = None, uncorrectable: int | None = None,
                      pending: bool | None = None, failed: bool | None = None) -> None:
        """Set GPU `index`'s remapped row counts and its pending / failed remap flags (None: unchanged)."""
        with self._lock:
            state = self._gpus[index].reliability
            if correctable is not None:
                state.remapped_correctable = correctable
            if uncorrectable is not None:
                state.remapped_uncorrectable = uncorrectable
            if pending is not None:
                state.remap_pending = pending
            if failed is not None:
                state.remap_failed = failed

    def set_nvlink_down(self, index: int, link: int, down: bool) -> None:
        with self._lock:
            links = self._gpus[index].reliability.links_down
            (links.add if down else links.discard)(link)

    def add_nvlink_errors(self, index: int, link: int, counter: int, count: int) -> None:
        """Add `count` to NVLink error counter `counter` (NVML_NVLINK_ERROR_DL_*) of one link."""
        with self._lock:
            errors = self._gpus[index].reliability.link_errors
            errors[(link, counter)] = errors.get((link, counter), 0) + count

    def add_retired_pages(self, index: int, cause: int, count: int) -> None:
        """Retire `count` more pages for `cause` (NVML_PAGE_RETIREMENT_CAUSE_*)."""
        with self._lock:
            pages = self._gpus[index].reliability.retired_pages[cause]
            pages.extend(0x1000 * (len(pages) + n + 1) + cause for n in range(count))

    def add_pcie_replays(self, index: int, count: int) -> None:
        with self._lock:
            self._gpus[index].pcie_replays += count

    def set_vgpu_license(self, index: int, licensed: bool | None) -> None:
        """Make GPU `index` a vGPU whose license is (not) held; None: not a vGPU (no licensable feature)."""
        with self._lock:
            self._gpus[index].vgpu_licensed = licensed

    def _fault_active(self, kind: str, index: int) -> list[Any]:
        t = self.now()
        return [f for f in self.config.faults if f.type == kind and f.active(t) and f.applies_to(index)]

    # -- pynvml surface -------------------------------------------------------------------------------
    def nvmlDeviceGetRemappedRows(self, device: Any) -> tuple[int, int, int, int]:
        """(correctable rows, uncorrectable rows, remap pending 0/1, remap failed 0/1), as pynvml returns."""
        with self._lock:
            gpu, _ = self._gpu("nvmlDeviceGetRemappedRows", device)
            if not gpu.spec.model.row_remapping:
                raise _pynvml.NVMLError_NotSupported()
            state = gpu.reliability
            pending_fault = bool(self._fault_active("row_remap_pending", gpu.index))  # one more bad row
            failed = state.remap_failed or bool(self._fault_active("row_remap_failed", gpu.index))
            return (state.remapped_correctable, state.remapped_uncorrectable + int(pending_fault),
                    int(state.remap_pending or pending_fault), int(failed))

    def nvmlDeviceGetPcieReplayCounter(self, device: Any) -> int:
        with self._lock:
            return int(self._gpu("nvmlDeviceGetPcieReplayCounter", device)[0].pcie_replays)

    def nvmlDeviceGetGridLicensableFeatures(self, device: Any) -> Any:
        """pynvml's c_nvmlGridLicensableFeatures_v4_t: isGridLicenseSupported 0 on bare metal; on a vGPU one
        vGPU feature, licensed or not."""
        with self._lock:
            gpu, _ = self._gpu("nvmlDeviceGetGridLicensableFeatures", device)
            features = _pynvml.c_nvmlGridLicensableFeatures_v4_t()
            features.isGridLicenseSupported = 0 if gpu.vgpu_licensed is None else 1
            if gpu.vgpu_licensed is not None:
                features.licensableFeaturesCount = 1
                feature = features.gridLicensableFeatures[0]
                feature.featureCode = _pynvml.NVML_GRID_LICENSE_FEATURE_CODE_VGPU
                feature.featureState = 1 if gpu.vgpu_licensed else 0
                feature.featureEnabled = 1
            return features

    def nvmlDeviceGetRetiredPages(self, device: Any, sourceFilter: int) -> list[int]:
        with self._lock:
            gpu, _ = self._gpu("nvmlDeviceGetRetiredPages", device)
            if not gpu.spec.model.page_retirement:
                raise _pynvml.NVMLError_NotSupported()
            if sourceFilter not in gpu.reliability.retired_pages:
                raise _pynvml.NVMLError_InvalidArgument()
            return list(gpu.reliability.retired_pages[sourceFilter])

    def nvmlDeviceGetFieldValues(self, handle: Any, fieldIds: list[Any]) -> Any:
        """pynvml's c_nvmlFieldValue_t array; each field carries its own nvmlReturn (NOT_SUPPORTED here for
        every field but the memory temperature of an HBM board and an NVLink board's throughput counters)."""
        with self._lock:
            gpu, _ = self._gpu("nvmlDeviceGetFieldValues", handle)
            values = (_pynvml.c_nvmlFieldValue_t * len(fieldIds))()
            stamp = int(time.time() * 1e6)
            for i, field_id in enumerate(fieldIds):
                field_id, scope = field_id if isinstance(field_id, tuple) else (field_id, 0)
                value = values[i]
                value.fieldId, value.scopeId, value.timestamp = field_id, scope, stamp
                if field_id == _pynvml.NVML_FI_DEV_MEMORY_TEMP and gpu.spec.model.hbm:
                    value.valueType = _pynvml.NVML_VALUE_TYPE_UNSIGNED_INT
                    value.value.uiVal = round(gpu.temperature + HBM_ABOVE_CORE_CELSIUS)
                    value.nvmlReturn = _pynvml.NVML_SUCCESS
                elif field_id in NVLINK_RAW + NVLINK_DATA and 0 <= scope < gpu.spec.model.nvlinks:
                    value.valueType = _pynvml.NVML_VALUE_TYPE_UNSIGNED_LONG_LONG
                    value.value.ullVal = nvlink_kib(gpu, field_id in NVLINK_TX, field_id in NVLINK_DATA)
                    value.nvmlReturn = _pynvml.NVML_SUCCESS
                else:
                    value.nvmlReturn = _pynvml.NVML_ERROR_NOT_SUPPORTED
            return values

    def _link(self, call: str, device: Any, link: int) -> SimGpu:
        gpu, _ = self._gpu(call, device)
        if not gpu.spec.model.nvlinks:
            raise _pynvml.NVMLError_NotSupported()
        if not 0 <= link < gpu.spec.model.nvlinks:
            raise _pynvml.NVMLError_InvalidArgument()
        return gpu

    def nvmlDeviceGetNvLinkState(self, device: Any, link: int) -> int:
        with self._lock:
            gpu = self._link("nvmlDeviceGetNvLinkState", device, link)
            down = link in gpu.reliability.links_down or any(
                link in f.links for f in self._fault_active("nvlink_down", gpu.index))
            state: int = _pynvml.NVML_FEATURE_DISABLED if down else _pynvml.NVML_FEATURE_ENABLED
            return state

    def nvmlDeviceGetNvLinkErrorCounter(self, device: Any, link: int, counter: int) -> int:
        with self._lock:
            gpu = self._link("nvmlDeviceGetNvLinkErrorCounter", device, link)
            if counter not in NVLINK_COUNTERS:
                raise _pynvml.NVMLError_InvalidArgument()
            return gpu.reliability.link_errors.get((link, counter), 0)

    def nvmlDeviceGetViolationStatus(self, device: Any, perfPolicyType: int) -> Any:
        """pynvml's c_nvmlViolationTime_t: referenceTime in µs (CPU time), violationTime in ns."""
        with self._lock:
            gpu, _ = self._gpu("nvmlDeviceGetViolationStatus", device)
            result = _pynvml.c_nvmlViolationTime_t()
            result.referenceTime = int(time.time() * 1e6)
            if perfPolicyType == _pynvml.NVML_PERF_POLICY_POWER:
                result.violationTime = int(gpu.power_violation_ns)
            elif perfPolicyType == _pynvml.NVML_PERF_POLICY_THERMAL:
                result.violationTime = int(gpu.thermal_violation_ns)
            elif not 0 <= perfPolicyType < _pynvml.NVML_PERF_POLICY_COUNT:
                raise _pynvml.NVMLError_InvalidArgument()
            return result
