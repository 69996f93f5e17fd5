"""Where snapshots come from: NVML init with background retry, rate-limited sweeps, PCIe sampled aside.

`NvmlSource.snapshot()` is what a scrape calls. It never blocks on NVML init (a missing library gives a
snapshot with nvml_up False at once), runs at most one NVML sweep per `min_interval` however many scrapers
ask (concurrent callers share the sweep in flight), and merges the PCIe throughput that a background thread
samples, because nvmlDeviceGetPcieThroughput blocks about 20 ms per call; the same thread samples NVML's
per-process utilization (the shares of a time-sliced GPU). Another background thread takes GPM samples (the
profiling metrics are computed between two of its passes) and reads NVLink state and error counters,
retired pages and violation time, which cost dozens of NVML calls per GPU. Sweep hooks see (and may amend)
every fresh sweep exactly once: the history recorder and the XID down marks hang there, never on a cached
scrape.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TypeVar

from exporter.errors import NvmlUnavailableError
from exporter.nvml.adapter import NodeSnapshot, NvmlAdapter
from exporter.nvml.snapshots import BackgroundReading, DeviceSnapshot, ProcessUtilizationSample

log = logging.getLogger(__name__)

SweepHook = Callable[[NodeSnapshot], NodeSnapshot]
T = TypeVar("T")
GPM_MIN_INTERVAL_SECONDS = 0.1  # NVML computes GPM metrics from two samples at least this far apart


@dataclass(frozen=True)
class SourceSettings:
    """Timing of the NVML source."""

    # Minimum seconds between two NVML sweeps; scrapes inside the interval get the cached sweep. 1 s keeps
    # several Prometheus replicas from multiplying NVML load while staying below any sane scrape interval.
    min_interval: float = 1.0
    # Seconds between NVML init attempts while the library or driver is missing. Long enough not to spin.
    init_retry_interval: float = 10.0
    # Seconds between background passes of PCIe throughput and per-process utilization (a PCIe pass costs
    # ~40 ms per GPU on real hardware).
    pcie_interval: float = 5.0
    # Seconds between GPM samples (the profiling metrics average over this interval, like DCGM's profiling
    # fields over theirs) and NVLink / violation / retired-page reads.
    profiling_interval: float = 5.0

    def __post_init__(self) -> None:
        for name in ("min_interval", "init_retry_interval", "pcie_interval", "profiling_interval"):
            value = getattr(self, name)
            if not value >= 0:
                raise ValueError(f"SourceSettings.{name}: expected seconds >= 0 (got {value!r})")


class NvmlSource:
    """Owns the adapter's lifecycle and the background threads; `snapshot()` is safe from many threads."""

    def __init__(self, adapter: NvmlAdapter, settings: SourceSettings | None = None,
                 clock: Callable[[], float] = time.time,
                 monotonic: Callable[[], float] = time.monotonic) -> None:
        self.adapter = adapter
        self.settings = settings or SourceSettings()
        self._clock = clock
        self._monotonic = monotonic
        self._sweep_lock = threading.Lock()
        self._state_lock = threading.Lock()
        self._stop = threading.Event()
        self._wake_init = threading.Event()
        self._threads: list[threading.Thread] = []
        self._cached: NodeSnapshot | None = None
        self._cached_at = float("-inf")
        self._last_success: float | None = None
        self._nvml_error: str | None = "NVML not initialized yet"
        self._pcie: dict[int, tuple[float | None, float | None]] = {}
        self._process_util: dict[int, tuple[tuple[int, float], ...] | None] = {}
        self._process_memory_util: dict[int, tuple[tuple[int, float], ...] | None] = {}
        self._process_util_since: dict[int, int] = {}
        self._background: dict[int, BackgroundReading | None] = {}
        self._hooks: list[SweepHook] = []
        self._down_gpus: set[int] = set()
        self._background_errors: set[tuple[int, str, str]] = set()  # (GPU, pass, error) logged at WARNING
        self._init_attempted = threading.Event()
        self.sweeps = 0
        self.generation = 0  # snapshots published so far, NVML up or not: a new one means new values
        self._pinned = threading.local()  # the sweep one_sweep() holds this thread to

    def add_sweep_hook(self, hook: SweepHook) -> None:
        """Call `hook` on every fresh NVML sweep (not on cached scrapes); its result replaces the sweep."""
        self._hooks.append(hook)

    # -- lifecycle ------------------------------------------------------------------------------------
    def start(self) -> None:
        """Try NVML init once now, then keep retrying (if needed) and sampling PCIe in the background."""
        self._try_init(first=True)
        for target, name in ((self._init_loop, "nvml-init"), (self._sampler_loop, "nvml-sampler")):
            thread = threading.Thread(target=target, name=name, daemon=True)
            thread.start()
            self._threads.append(thread)

    def stop(self, timeout: float = 5.0) -> None:
        self._stop.set()
        self._wake_init.set()
        for thread in self._threads:
            thread.join(timeout)
        self._threads.clear()
        self.adapter.shutdown()

    @property
    def ready(self) -> bool:
        """True once NVML answered and is still answering."""
        return self.adapter.initialized and self._nvml_error is None

    @property
    def init_attempted(self) -> bool:
        return self._init_attempted.is_set()

    @property
    def nvml_error(self) -> str | None:
        return self._nvml_error

    def _try_init(self, first: bool = False) -> bool:
        try:
            self.adapter.init()
        except NvmlUnavailableError as exc:
            with self._state_lock:
                changed = first or self._nvml_error != str(exc)
                self._nvml_error = str(exc)
            self._init_attempted.set()
            if changed:
                hint = " (no GPU or driver here? --simulate N serves N simulated GPUs)" if first else ""
                log.error("%s; serving gpu_exporter_nvml_up 0 and retrying every %gs%s", exc,
                          self.settings.init_retry_interval, hint)
            return False
        with self._state_lock:
            self._nvml_error = None
            self._cached_at = float("-inf")
        self._init_attempted.set()
        log.info("NVML initialized: %d GPU(s), driver %s, CUDA %s", self.adapter.device_count,
                 self.adapter.driver_version, self.adapter.cuda_version or "unknown")
        return True

    def _init_loop(self) -> None:
        while not self._stop.is_set():
            self._wake_init.wait(self.settings.init_retry_interval)
            self._wake_init.clear()
            if self._stop.is_set():
                return
            if not self.adapter.initialized:
                self._try_init()

    def _sampler_loop(self) -> None:
        """PCIe and per-process utilization every `pcie_interval`, GPM and link counters every
        `profiling_interval`, on one thread: each thread that allocates costs the process a malloc arena
        (about a MiB of resident memory on a DaemonSet that runs on every node), and both passes are short."""
        settings = self.settings
        next_pcie = next_profiling = time.monotonic()
        while not self._stop.is_set():
            if not self.adapter.initialized:
                self._stop.wait(min(settings.pcie_interval, settings.profiling_interval))
                continue
            if time.monotonic() >= next_pcie:
                next_pcie = time.monotonic() + settings.pcie_interval
                self._pcie_pass()
            if time.monotonic() >= next_profiling and not self._stop.is_set():
                next_profiling = time.monotonic() + max(settings.profiling_interval, GPM_MIN_INTERVAL_SECONDS)
                self._profiling_pass()
            self._stop.wait(max(min(next_pcie, next_profiling) - time.monotonic(), 0.0))

    def _pcie_pass(self) -> None:
        for index in range(self.adapter.device_count):
            if self._stop.is_set():
                return
            unread: tuple[float | None, float | None] = (None, None)
            value = self._read_or(index, self.adapter.read_pcie, "PCIe sample", unread)
            with self._state_lock:
                self._pcie[index] = value
            self._sample_process_utilization(index)

    def _profiling_pass(self) -> None:
        for index in range(self.adapter.device_count):
            if self._stop.is_set():
                return
            reading = self._read_or(index, self.adapter.read_background, "profiling sample", None)
            with self._state_lock:
                self._background[index] = reading

    def _read_or(self, index: int, read: Callable[[int], T], what: str, failed: T) -> T:
        """One background read of one GPU, or `failed` when it raises: one GPU failing (a lost GPU, a fault
        of ours) must not end the sampler."""
        try:
            return read(index)
        except Exception as exc:
            self._background_failed(index, what, exc)
            return failed

    def _background_failed(self, index: int, what: str, exc: Exception) -> None:
        """What reaches here is no single call's error (the adapter leaves those out, counted and logged):
        a GPU gone, which the sweep reports as gpu_up 0 with its own WARNING, or a fault of ours, logged at
        WARNING the first time per GPU, pass and error."""
        key = (index, what, type(exc).__name__)
        gone = isinstance(exc, self.adapter.gone_errors)
        level = logging.DEBUG if gone or key in self._background_errors else logging.WARNING
        self._background_errors.add(key)
        log.log(level, "GPU %d: %s failed: %s (%s); its values are left out of this pass", index, what, exc,
                type(exc).__name__)

    def _sample_process_utilization(self, index: int) -> None:
        """Mean SM and memory-bandwidth share per pid over the samples since the last pass; () when no process
        ran (NVML's NotFound: no sample, not an error)."""
        since = self._process_util_since.get(index, 0)
        samples = self._read_or(index, lambda i: self.adapter.process_utilization(i, since),
                                "process utilization sample", None)
        value = None if samples is None else mean_by_pid(samples)
        memory = None if samples is None else mean_by_pid(samples, memory_utilization_of)
        if samples:
            self._process_util_since[index] = max(s.timestamp_us for s in samples)
        with self._state_lock:
            self._process_util[index] = value
            self._process_memory_util[index] = memory

    # -- the scrape path ------------------------------------------------------------------------------
    def snapshot(self) -> NodeSnapshot:
        """The latest sweep, taking a new one when the cached one is older than `min_interval`."""
        pinned: NodeSnapshot | None = getattr(self._pinned, "snapshot", None)
        if pinned is not None:
            return pinned
        with self._sweep_lock:
            return self._latest()

    @contextmanager
    def one_sweep(self) -> Iterator[int]:
        """Within the block every snapshot() of this thread answers one sweep (taken as snapshot() would):
        one scrape renders one sweep, even with `min_interval` 0. Yields that sweep's generation."""
        with self._sweep_lock:
            self._pinned.snapshot = self._latest()
            generation = self.generation
        try:
            yield generation
        finally:
            self._pinned.snapshot = None

    def _latest(self) -> NodeSnapshot:
        """Under the sweep lock: the cached sweep, or a new one when it is older than `min_interval`."""
        now = self._monotonic()
        cached = self._cached
        if cached is not None and now - self._cached_at < self.settings.min_interval:
            return cached
        snapshot = self._sweep()
        self._cached = snapshot
        self._cached_at = now
        self.generation += 1
        return snapshot

    def _sweep(self) -> NodeSnapshot:
        start = time.perf_counter()
        if not self.adapter.initialized:
            return self._down_snapshot(start)
        try:
            snapshot = self.adapter.read()
        except NvmlUnavailableError as exc:
            log.error("%s; re-initialising NVML in the background", exc)
            with self._state_lock:
                self._nvml_error = str(exc)
            self.adapter.shutdown()
            self._wake_init.set()
            return self._down_snapshot(start)
        with self._state_lock:
            pcie = dict(self._pcie)
            process_util = dict(self._process_util)
            process_memory_util = dict(self._process_memory_util)
            background = dict(self._background)
            self._last_success = snapshot.last_success
            self._nvml_error = None
        self._log_gpu_transitions(snapshot)
        no_pcie: tuple[float | None, float | None] = (None, None)
        devices = tuple(
            with_background(dataclasses.replace(
                d, pcie_tx_bytes_per_second=pcie.get(d.index, no_pcie)[0],
                pcie_rx_bytes_per_second=pcie.get(d.index, no_pcie)[1],
                process_sm_utilization=process_util.get(d.index),
                process_memory_utilization=process_memory_util.get(d.index)), background.get(d.index))
            if d.up else d
            for d in snapshot.devices)
        self.sweeps += 1
        snapshot = dataclasses.replace(snapshot, devices=devices,
                                       duration_seconds=time.perf_counter() - start)
        for hook in self._hooks:
            try:
                snapshot = hook(snapshot)
            except Exception:  # one broken hook must not take the scrape down with it
                log.exception("sweep hook %r failed; continuing without it for this sweep", hook)
        return snapshot

    def _down_snapshot(self, start: float) -> NodeSnapshot:
        return NodeSnapshot(nvml_up=False, driver_version="", cuda_version="", devices=(),
                            collected_at=self._clock(), duration_seconds=time.perf_counter() - start,
                            last_success=self._last_success, nvml_error=self._nvml_error,
                            nvml_errors=self.adapter.error_counts())

    def _log_gpu_transitions(self, snapshot: NodeSnapshot) -> None:
        for device in snapshot.devices:
            if not device.up and device.index not in self._down_gpus:
                self._down_gpus.add(device.index)
                log.warning("GPU %d (%s) is not answering: %s; gpu_up 0, the other GPUs keep reporting",
                            device.index, device.uuid or "uuid unknown", device.error)
            elif device.up and device.index in self._down_gpus:
                self._down_gpus.discard(device.index)
                log.info("GPU %d (%s) answers again", device.index, device.uuid)


def with_background(device: DeviceSnapshot, reading: BackgroundReading | None) -> DeviceSnapshot:
    """The device with what the profiling thread read last: GPM (each MIG instance's by its GPU instance id),
    link and counter health. Unchanged before the first pass."""
    if reading is None:
        return device
    by_instance = dict(reading.mig_gpm)
    instances = tuple(dataclasses.replace(mig, gpm=by_instance.get(mig.gpu_instance_id))
                      if mig.gpu_instance_id in by_instance else mig for mig in device.mig_instances)
    return dataclasses.replace(device, gpm_supported=reading.gpm_supported, gpm=reading.gpm,
                               reliability=reading.reliability, mig_instances=instances)


def sm_utilization_of(sample: ProcessUtilizationSample) -> float:
    return sample.sm_utilization


def memory_utilization_of(sample: ProcessUtilizationSample) -> float:
    return sample.memory_utilization


def mean_by_pid(samples: tuple[ProcessUtilizationSample, ...],
                value: Callable[[ProcessUtilizationSample], float] = sm_utilization_of,
                ) -> tuple[tuple[int, float], ...]:
    """(pid, mean of `value`, SM utilization 0..1 by default) over NVML's per-process samples, by pid."""
    sums: dict[int, list[float]] = {}
    for sample in samples:
        sums.setdefault(sample.pid, []).append(value(sample))
    return tuple((pid, sum(values) / len(values)) for pid, values in sorted(sums.items()))
