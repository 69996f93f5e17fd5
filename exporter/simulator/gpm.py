"""The GPM (GPU performance monitoring) part of the simulated NVML surface: profiling metrics computed from
two samples, the way NVML computes DCGM's profiling fields on Hopper and newer.

pynvml's own types are used throughout: `nvmlGpmSampleAlloc` returns a real `c_nvmlGpmSample_t` (a pointer to
a buffer this module keeps, looked up by address), `nvmlGpmMetricsGet` fills the caller's
`c_nvmlGpmMetricsGet_t`, each metric with its own `nvmlReturn`. A model without GPM answers
`nvmlGpmQueryDeviceSupport` with isSupportedDevice 0 and raises NVMLError_NotSupported on sampling, as real
pre-Hopper boards do. Units are NVML's: utilizations in percent (0..100), NVLink and PCIe in MiB/s.
Two samples taken less than `GPM_MIN_INTERVAL_SECONDS` apart (NVML's documented minimum) are refused by
`nvmlGpmMetricsGet` with InvalidArgument, so a reader sampling one GPU instance twice in a pass sees it fail;
`gpm_samples_allocated` counts the samples not freed, so a test sees a leak.

Kept apart from exporter/simulator/nvml.py so each stays small; `SimulatedNvml` inherits these methods.
"""

from __future__ import annotations

import ctypes
from dataclasses import dataclass
from typing import Any

from exporter.nvml.adapter import real_nvml
from exporter.simulator.memory_link import NVLINK_RX_SHARE, NVLINK_TX_SHARE
from exporter.simulator.physics import SimGpu

_pynvml = real_nvml()

# Share of the GPU's utilization each GPM percentage metric reports (an inference mix: tensor-core heavy,
# some FP32 and integer work, no FP64 or DMMA).
_SHARES: dict[int, float] = {
    _pynvml.NVML_GPM_METRIC_GRAPHICS_UTIL: 1.0,
    _pynvml.NVML_GPM_METRIC_SM_UTIL: 0.92,
    _pynvml.NVML_GPM_METRIC_SM_OCCUPANCY: 0.55,
    _pynvml.NVML_GPM_METRIC_INTEGER_UTIL: 0.12,
    _pynvml.NVML_GPM_METRIC_ANY_TENSOR_UTIL: 0.48,
    _pynvml.NVML_GPM_METRIC_DFMA_TENSOR_UTIL: 0.0,
    _pynvml.NVML_GPM_METRIC_HMMA_TENSOR_UTIL: 0.42,
    _pynvml.NVML_GPM_METRIC_DMMA_TENSOR_UTIL: 0.0,
    _pynvml.NVML_GPM_METRIC_IMMA_TENSOR_UTIL: 0.06,
    _pynvml.NVML_GPM_METRIC_DRAM_BW_UTIL: 0.55,
    _pynvml.NVML_GPM_METRIC_FP64_UTIL: 0.0,
    _pynvml.NVML_GPM_METRIC_FP32_UTIL: 0.2,
    _pynvml.NVML_GPM_METRIC_FP16_UTIL: 0.1,
}
_NVDEC = tuple(getattr(_pynvml, f"NVML_GPM_METRIC_NVDEC_{i}_UTIL") for i in range(8))
_NVJPG = tuple(getattr(_pynvml, f"NVML_GPM_METRIC_NVJPG_{i}_UTIL") for i in range(8))
_NVLINK_TX, _NVLINK_RX = (_pynvml.NVML_GPM_METRIC_NVLINK_TOTAL_TX_PER_SEC,
                          _pynvml.NVML_GPM_METRIC_NVLINK_TOTAL_RX_PER_SEC)
_UNSUPPORTED = _pynvml.NVML_ERROR_NOT_SUPPORTED
PCIE_MIB = 1024.0  # model PCIe figures are KB/s
GPM_MIN_INTERVAL_SECONDS = 0.1


@dataclass
class _Sample:
    """What one GPM sample holds: which GPU (and MIG GPU instance) and its utilization at that time."""

    buffer: Any
    gpu: int | None = None
    gpu_instance_id: int | None = None
    t: float = 0.0
    utilization: float = 0.0


class GpmSurface:
    """pynvml's GPM calls (needs `_gpu`, `_gpus`, `_lock`, `_enter` of SimulatedNvml)."""

    _lock: Any
    _gpus: list[SimGpu]

    def _gpu(self, call: str, handle: Any) -> tuple[SimGpu, float]:  # provided by SimulatedNvml
        raise NotImplementedError

    def _enter(self, call: str, index: int | None = None) -> float:  # provided by SimulatedNvml
        raise NotImplementedError

    def mig_instance_utilization(self, gpu: SimGpu, gpu_instance_id: int, t: float) -> float:
        raise NotImplementedError  # provided by MigSurface

    def _gpm_samples(self) -> dict[int, _Sample]:
        samples: dict[int, _Sample] | None = self.__dict__.get("_gpm_sample_table")
        if samples is None:
            samples = self.__dict__["_gpm_sample_table"] = {}
        return samples

    def _sample(self, pointer: Any) -> _Sample:
        address = ctypes.cast(pointer, ctypes.c_void_p).value if pointer else None
        found = self._gpm_samples().get(address or 0)
        if found is None:
            raise _pynvml.NVMLError_InvalidArgument()
        return found

    @property
    def gpm_samples_allocated(self) -> int:
        with self._lock:
            return len(self._gpm_samples())

    def nvmlGpmQueryDeviceSupport(self, device: Any) -> Any:
        with self._lock:
            gpu, _ = self._gpu("nvmlGpmQueryDeviceSupport", device)
            support = _pynvml.c_nvmlGpmSupport_t()
            support.version = _pynvml.NVML_GPM_SUPPORT_VERSION
            support.isSupportedDevice = 1 if gpu.spec.model.gpm else 0
            return support

    def nvmlGpmSampleAlloc(self) -> Any:
        with self._lock:
            self._enter("nvmlGpmSampleAlloc")
            buffer = ctypes.create_string_buffer(8)
            pointer = ctypes.cast(buffer, _pynvml.c_nvmlGpmSample_t)
            self._gpm_samples()[ctypes.addressof(buffer)] = _Sample(buffer)
            return pointer

    def nvmlGpmSampleFree(self, gpmSample: Any) -> None:
        with self._lock:
            self._enter("nvmlGpmSampleFree")
            sample = self._sample(gpmSample)
            del self._gpm_samples()[ctypes.addressof(sample.buffer)]

    def nvmlGpmSampleGet(self, device: Any, gpmSample: Any) -> Any:
        with self._lock:
            gpu, t = self._gpu("nvmlGpmSampleGet", device)
            if not gpu.spec.model.gpm:
                raise _pynvml.NVMLError_NotSupported()
            sample = self._sample(gpmSample)
            sample.gpu, sample.gpu_instance_id, sample.t = gpu.index, None, t
            sample.utilization = gpu.utilization(t)
            return gpmSample

    def nvmlGpmMigSampleGet(self, device: Any, gpuInstanceId: int, gpmSample: Any) -> Any:
        with self._lock:
            gpu, t = self._gpu("nvmlGpmMigSampleGet", device)
            if not gpu.spec.model.gpm:
                raise _pynvml.NVMLError_NotSupported()
            utilization = self.mig_instance_utilization(gpu, gpuInstanceId, t)  # NotFound: no such instance
            sample = self._sample(gpmSample)
            sample.gpu, sample.gpu_instance_id, sample.t = gpu.index, gpuInstanceId, t
            sample.utilization = utilization
            return gpmSample

    def nvmlGpmMetricsGet(self, metricsGet: Any) -> Any:
        """Fill `metricsGet.metrics[:numMetrics]` from the mean utilization between its two samples. A fault
        naming a GPU applies to the GPU the first sample was taken on (the call takes no device)."""
        with self._lock:
            known = self._gpm_samples().get(ctypes.cast(metricsGet.sample1, ctypes.c_void_p).value or 0)
            self._enter("nvmlGpmMetricsGet", None if known is None else known.gpu)
            if metricsGet.version != _pynvml.NVML_GPM_METRICS_GET_VERSION:
                raise _pynvml.NVMLError_ArgumentVersionMismatch()
            first, second = self._sample(metricsGet.sample1), self._sample(metricsGet.sample2)
            where = (first.gpu, first.gpu_instance_id)
            if first.gpu is None or where != (second.gpu, second.gpu_instance_id):
                raise _pynvml.NVMLError_InvalidArgument()  # never filled, or two different GPUs / instances
            if abs(second.t - first.t) < GPM_MIN_INTERVAL_SECONDS:
                raise _pynvml.NVMLError_InvalidArgument()
            if not 0 <= metricsGet.numMetrics <= _pynvml.NVML_GPM_METRIC_MAX:
                raise _pynvml.NVMLError_InvalidArgument()
            gpu = self._gpus[first.gpu]
            utilization = (first.utilization + second.utilization) / 2
            for i in range(metricsGet.numMetrics):
                metric = metricsGet.metrics[i]
                value = _metric_value(gpu, int(metric.metricId), utilization, first.gpu_instance_id)
                metric.nvmlReturn = _UNSUPPORTED if value is None else 0
                metric.value = 0.0 if value is None else value
            return metricsGet


def _metric_value(gpu: SimGpu, metric: int, utilization: float, instance: int | None) -> float | None:
    """One GPM metric in NVML's unit; None when this board (or a MIG instance) does not have it."""
    model = gpu.spec.model
    if metric in _SHARES:
        return 100.0 * utilization * _SHARES[metric]
    if metric in _NVDEC:
        return 0.0 if _NVDEC.index(metric) < model.nvdec_engines else None
    if metric in _NVJPG:
        return 0.0 if _NVJPG.index(metric) < model.nvjpg_engines else None
    if metric in (_NVLINK_TX, _NVLINK_RX):
        if not model.nvlinks or instance is not None:  # NVLink traffic is the whole GPU's
            return None
        share = NVLINK_TX_SHARE if metric == _NVLINK_TX else NVLINK_RX_SHARE
        return model.nvlink_mib_per_second * share * utilization
    if metric in (_pynvml.NVML_GPM_METRIC_PCIE_TX_PER_SEC, _pynvml.NVML_GPM_METRIC_PCIE_RX_PER_SEC):
        share = 0.35 if metric == _pynvml.NVML_GPM_METRIC_PCIE_TX_PER_SEC else 0.15
        return model.pcie_max_kb_per_second / PCIE_MIB * share * utilization
    return None
