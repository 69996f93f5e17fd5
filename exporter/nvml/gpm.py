"""GPM (GPU performance monitoring) profiling: the DCGM profiling fields, from two NVML GPM samples.

NVML computes each metric over the interval between two samples, so `GpmReader.read` keeps the previous
sample of every GPU (and MIG GPU instance) and answers None on the first call. Run it off the scrape path:
the background sampler calls it once per pass, so the metrics cover one pass. Every call goes through the
NVML module object (pynvml or SimulatedNvml) and its own ctypes structures. Units are NVML's, converted
once here: percentages (0..100) to ratios, NVLink MiB/s to bytes/s.
"""

from __future__ import annotations

import logging
import threading
from typing import Any

from exporter.nvml.calls import NvmlCalls
from exporter.nvml.snapshots import GpmMetrics

log = logging.getLogger(__name__)

MIB = 1024 * 1024
# GpmMetrics field -> NVML metric (a percentage)
RATIO_METRICS: tuple[tuple[str, str], ...] = (
    ("sm_active", "SM_UTIL"),
    ("sm_occupancy", "SM_OCCUPANCY"),
    ("tensor_active", "ANY_TENSOR_UTIL"),
    ("dram_active", "DRAM_BW_UTIL"),
    ("graphics_engine_active", "GRAPHICS_UTIL"),
)
# `pipe` label value -> NVML metric (a percentage): every per-pipe GPM metric NVML has
PIPE_METRICS: tuple[tuple[str, str], ...] = (
    ("hmma", "HMMA_TENSOR_UTIL"),
    ("imma", "IMMA_TENSOR_UTIL"),
    ("dmma", "DMMA_TENSOR_UTIL"),
    ("dfma", "DFMA_TENSOR_UTIL"),
    ("fp16", "FP16_UTIL"),
    ("fp32", "FP32_UTIL"),
    ("fp64", "FP64_UTIL"),
    ("int", "INTEGER_UTIL"),
)
NVDEC_METRICS = tuple(f"NVDEC_{i}_UTIL" for i in range(8))
NVJPG_METRICS = tuple(f"NVJPG_{i}_UTIL" for i in range(8))
NVLINK_METRICS = ("NVLINK_TOTAL_TX_PER_SEC", "NVLINK_TOTAL_RX_PER_SEC")  # MiB/s

# key of a sample series: (GPU index, GPU instance id or None for the whole GPU)
SampleKey = tuple[int, int | None]


class GpmReader:
    """GPM metrics per GPU and per MIG GPU instance; thread-safe, one previous sample kept per key."""

    def __init__(self, nvml: Any, calls: NvmlCalls) -> None:
        self._nvml = nvml
        self._calls = calls
        self._lock = threading.Lock()
        self._previous: dict[SampleKey, Any] = {}
        self._support: dict[int, bool] = {}
        names = [name for _, name in RATIO_METRICS + PIPE_METRICS] + [
            *NVDEC_METRICS, *NVJPG_METRICS, *NVLINK_METRICS]
        self._ids = {name: getattr(nvml, f"NVML_GPM_METRIC_{name}", None) for name in names}
        self._wanted = [metric for metric in self._ids.values() if metric is not None]

    def reset(self) -> None:
        """Forget the samples and the support answers of an NVML session that ended (never freed: the
        library that allocated them is gone)."""
        with self._lock:
            self._previous.clear()
            self._support.clear()

    def supported(self, index: int, handle: Any) -> bool:
        """nvmlGpmQueryDeviceSupport, asked once per session; a driver without GPM calls says False."""
        with self._lock:
            known = self._support.get(index)
        if known is not None:
            return known
        answer = self._calls.optional(index, "nvmlGpmQueryDeviceSupport", handle)
        supported = bool(answer is not None and int(answer.isSupportedDevice))
        self._remember(index, supported)
        return supported

    def _remember(self, index: int, supported: bool) -> None:
        with self._lock:
            self._support[index] = supported

    def read(self, index: int, handle: Any, gpu_instance_id: int | None = None) -> GpmMetrics | None:
        """Take a sample; metrics since the previous one of the same key (None on the first, or when the
        driver refuses: then GPM is off for this GPU until NVML is re-initialised)."""
        nvml = self._nvml
        sample = nvml.nvmlGpmSampleAlloc()
        try:
            if gpu_instance_id is None:
                nvml.nvmlGpmSampleGet(handle, sample)
            else:
                nvml.nvmlGpmMigSampleGet(handle, gpu_instance_id, sample)
        except self._calls.left_out as exc:
            self._free(sample)
            self._calls.note_unsupported(index, "nvmlGpmSampleGet", exc)
            self._remember(index, False)
            return None
        except BaseException:
            self._free(sample)
            raise
        with self._lock:
            previous = self._previous.get((index, gpu_instance_id))
            self._previous[(index, gpu_instance_id)] = sample
        if previous is None:
            return None
        try:
            return self._metrics(previous, sample)
        finally:
            self._free(previous)

    def forget(self, keep: set[SampleKey]) -> None:
        """Free the samples of keys no longer read (a MIG instance gone, a GPU gone)."""
        with self._lock:
            gone = [key for key in self._previous if key not in keep]
            samples = [self._previous.pop(key) for key in gone]
        for sample in samples:
            self._free(sample)

    def _free(self, sample: Any) -> None:
        try:
            self._nvml.nvmlGpmSampleFree(sample)
        except self._nvml.NVMLError as exc:
            log.debug("nvmlGpmSampleFree: %s", exc)

    def _metrics(self, first: Any, second: Any) -> GpmMetrics:
        nvml = self._nvml
        request = nvml.c_nvmlGpmMetricsGet_t()
        request.version = nvml.NVML_GPM_METRICS_GET_VERSION
        request.numMetrics = len(self._wanted)
        request.sample1, request.sample2 = first, second
        for i, metric in enumerate(self._wanted):
            request.metrics[i].metricId = metric
        nvml.nvmlGpmMetricsGet(request)
        success = getattr(nvml, "NVML_SUCCESS", 0)
        values = {int(request.metrics[i].metricId): float(request.metrics[i].value)
                  for i in range(len(self._wanted)) if request.metrics[i].nvmlReturn == success}
        return self._build(values)

    def _value(self, values: dict[int, float], name: str) -> float | None:
        metric = self._ids.get(name)
        return values.get(metric) if metric is not None else None

    def _build(self, values: dict[int, float]) -> GpmMetrics:
        def ratio(name: str) -> float | None:
            value = self._value(values, name)
            return None if value is None else min(max(value / 100.0, 0.0), 1.0)

        def mean_ratio(names: tuple[str, ...]) -> float | None:
            found = [r for r in (ratio(name) for name in names) if r is not None]
            return sum(found) / len(found) if found else None

        def bytes_per_second(name: str) -> float | None:
            value = self._value(values, name)
            return None if value is None else value * MIB

        pipes = tuple((label, r) for label, name in PIPE_METRICS if (r := ratio(name)) is not None)
        fields = {field: ratio(name) for field, name in RATIO_METRICS}
        return GpmMetrics(**fields, pipes=pipes,
                          nvlink_tx_bytes_per_second=bytes_per_second(NVLINK_METRICS[0]),
                          nvlink_rx_bytes_per_second=bytes_per_second(NVLINK_METRICS[1]),
                          nvdec_utilization=mean_ratio(NVDEC_METRICS),
                          nvjpg_utilization=mean_ratio(NVJPG_METRICS))
