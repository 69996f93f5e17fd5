"""GPM (GPU performance monitoring) profiling: the DCGM profiling fields, from two NVML GPM samples.

NVML computes each metric over the interval between two samples, so `GpmReader.read_pass` keeps the previous
sample of every GPU (and MIG GPU instance) and answers None for it on the first pass. Run it off the scrape
path: the background sampler calls it once per pass, so the metrics cover one pass, and each GPU instance is
sampled once per pass however many compute instances (MIG devices) it holds: two samples of one instance a
fraction of a millisecond apart are below NVML's 100 ms minimum. A pair NVML refuses once (a late pass left
the next one too close) keeps the older sample and the last metrics. What fails costs little: NotSupported
switches off that one sample series (the whole GPU, or one GPU instance) for the NVML session; any other
error of nvmlGpmSampleAlloc, nvmlGpmSampleGet or nvmlGpmMetricsGet costs that series' value for that pass
only (counted per call and error, logged at WARNING the first time: NvmlCalls.field_error), and an error
saying the GPU is gone ends the pass of that GPU. Every call goes through the NVML module object (pynvml
or SimulatedNvml) and its own ctypes structures. Units are NVML's, converted once here: percentages (0..100)
to ratios, NVLink MiB/s to bytes/s.
"""

from __future__ import annotations

import logging
import threading
from typing import Any

from exporter.nvml.calls import NvmlCalls
from exporter.nvml.mig import MigLayoutChanged
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
GpmPass = tuple[bool, GpmMetrics | None, tuple[tuple[int, GpmMetrics], ...]]


class GpmCallFailed(Exception):
    """One GPM call failed: which (the `call` label of gpu_exporter_nvml_errors_total) and NVML's error."""

    def __init__(self, call: str, error: Exception) -> None:
        super().__init__(f"{call}: {error} ({type(error).__name__})")
        self.call = call
        self.error = error


class GpmReader:
    """GPM metrics per GPU and per MIG GPU instance; thread-safe, one previous sample kept per key."""

    def __init__(self, nvml: Any, calls: NvmlCalls) -> None:
        self._nvml = nvml
        self._calls = calls
        self._lock = threading.Lock()
        self._previous: dict[SampleKey, Any] = {}
        self._last: dict[SampleKey, GpmMetrics] = {}  # the last metrics of each key
        self._held: set[SampleKey] = set()  # keys whose last pair NVML refused, their older sample kept
        self._support: dict[int, bool] = {}
        self._off: set[SampleKey] = set()  # series whose sampling answered NotSupported this session
        names = [name for _, name in RATIO_METRICS + PIPE_METRICS] + [
            *NVDEC_METRICS, *NVJPG_METRICS, *NVLINK_METRICS]
        self._ids = {name: getattr(nvml, f"NVML_GPM_METRIC_{name}", None) for name in names}
        self._wanted = [metric for metric in self._ids.values() if metric is not None]

    def reset(self) -> None:
        """Free the samples and forget the support answers: called before NVML shuts down (so the library
        that allocated them frees them) and again at init (where a free that fails is only logged)."""
        with self._lock:
            samples = list(self._previous.values())
            self._previous.clear()
            self._last.clear()
            self._held.clear()
            self._support.clear()
            self._off.clear()
        for sample in samples:
            self._free(sample)

    def supported(self, index: int, handle: Any) -> bool:
        """nvmlGpmQueryDeviceSupport, asked once per session; a driver without GPM calls says False."""
        with self._lock:
            known = self._support.get(index)
        if known is not None:
            return known
        with self._calls.recording() as failed:
            answer = self._calls.field(index, "nvmlGpmQueryDeviceSupport", handle)
        supported = bool(answer is not None and int(answer.isSupportedDevice))
        if not failed:  # an error answers nothing: ask again next pass
            self._remember(index, supported)
        return supported

    def _remember(self, index: int, supported: bool) -> None:
        with self._lock:
            self._support[index] = supported

    def read_pass(self, index: int, handle: Any, gpu_instance_ids: tuple[int, ...] = ()) -> GpmPass:
        """One pass over GPU `index`: (GPM supported, the whole GPU's metrics, each GPU instance's), each
        GPU instance sampled once. Raises MigLayoutChanged when a GPU instance is gone (stale ids)."""
        if not self.supported(index, handle):
            return False, None, ()
        keys: list[SampleKey] = [(index, None), *((index, gi) for gi in dict.fromkeys(gpu_instance_ids))]
        found: dict[int | None, GpmMetrics] = {}
        for key in keys:
            if key in self._off:
                continue
            try:
                metrics = self.read(index, handle, key[1])
            except MigLayoutChanged:
                raise
            except GpmCallFailed as failed:  # this series' value for this pass only
                if isinstance(failed.error, self._calls.gone):
                    raise failed.error from failed
                self._calls.count_error(index, failed.call, failed.error)
                continue
            if metrics is not None:
                found[key[1]] = metrics
        supported = any(key not in self._off for key in keys)
        return supported, found.pop(None, None), tuple((gi, m) for gi, m in found.items() if gi is not None)

    def read(self, index: int, handle: Any, gpu_instance_id: int | None = None) -> GpmMetrics | None:
        """Take a sample; metrics since the previous one of the same key (None on the first, or when the
        driver refuses: then this series is off until NVML is re-initialised)."""
        nvml = self._nvml
        try:
            sample = nvml.nvmlGpmSampleAlloc()
        except nvml.NVMLError as exc:
            raise GpmCallFailed("nvmlGpmSampleAlloc", exc) from exc
        stale = (nvml.NVMLError_InvalidArgument, nvml.NVMLError_NotFound)
        call = "nvmlGpmSampleGet" if gpu_instance_id is None else "nvmlGpmMigSampleGet"
        try:
            if gpu_instance_id is None:
                nvml.nvmlGpmSampleGet(handle, sample)
            else:
                nvml.nvmlGpmMigSampleGet(handle, gpu_instance_id, sample)
        except self._calls.left_out as exc:
            self._free(sample)
            self._calls.note_unsupported(index, call, exc)
            with self._lock:
                self._off.add((index, gpu_instance_id))
            return None
        except stale as exc:
            self._free(sample)
            if gpu_instance_id is None:
                raise GpmCallFailed(call, exc) from exc
            raise MigLayoutChanged(f"GPU instance {gpu_instance_id}: {type(exc).__name__}") from exc
        except nvml.NVMLError as exc:
            self._free(sample)
            raise GpmCallFailed(call, exc) from exc
        except BaseException:
            self._free(sample)
            raise
        key = (index, gpu_instance_id)
        with self._lock:
            previous = self._previous.get(key)
            self._previous[key] = sample
        if previous is None:
            return None
        try:
            metrics = self._metrics(previous, sample)
        except nvml.NVMLError_InvalidArgument as exc:
            try:
                return self._refused(key, previous, sample)
            except nvml.NVMLError_InvalidArgument:
                raise GpmCallFailed("nvmlGpmMetricsGet", exc) from exc
        except nvml.NVMLError as exc:
            self._free(previous)
            raise GpmCallFailed("nvmlGpmMetricsGet", exc) from exc
        except BaseException:
            self._free(previous)
            raise
        self._free(previous)
        with self._lock:
            self._last[key] = metrics
            self._held.discard(key)
        return metrics

    def _refused(self, key: SampleKey, previous: Any, sample: Any) -> GpmMetrics | None:
        """NVML refused the pair: most often two samples closer than its 100 ms minimum, when a pass that ran
        late (a busy CPU) reached this GPU late and the next one early. The older sample is kept, so the next
        pass pairs it with one further away, and the last metrics stand for this pass. Refused twice in a
        row, it is an error like any other: this pass goes without (the caller logs it)."""
        with self._lock:
            again = key in self._held
            if again:
                self._held.discard(key)
                self._last.pop(key, None)
            else:
                self._held.add(key)
                self._previous[key] = previous
            last = self._last.get(key)
        if again:
            self._free(previous)
            raise self._nvml.NVMLError_InvalidArgument()
        self._free(sample)
        return last

    def forget_instances(self, index: int, keep: set[int]) -> None:
        """Free the samples of GPU `index`'s GPU instances not in `keep` (a MIG layout changed), and forget
        which of its instances answered NotSupported (new instances may reuse the ids)."""
        with self._lock:
            gone = [key for key in self._previous if key[0] == index and key[1] is not None
                    and key[1] not in keep]
            samples = [self._previous.pop(key) for key in gone]
            for key in gone:
                self._last.pop(key, None)
                self._held.discard(key)
            self._off = {key for key in self._off if key[0] != index or key[1] is None}
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
