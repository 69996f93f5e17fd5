"""The JSON status API wired to the running exporter: GPU statuses from the latest sweep, history per sweep.

`StatusService.handle(path, query, method)` answers /api/v1/... on the metrics HTTP server through the pure
`status_api.handle`. `record` is a sweep hook (never called for a cached scrape), and `start()` runs a small
thread asking the source for a snapshot every `sample_interval_seconds`, so the history has samples whether
or not Prometheus scrapes (the sweep is shared with scrapes, not added to them). Scrapes and API calls
sweep too; GpuHistory keeps at most one sample per interval of them, so the window it promises holds.
`gpu_statuses` is also what `gpu-exporter status` prints.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from exporter.background import BackgroundLoop
from exporter.errors import NvmlUnavailableError
from exporter.health.history import GpuHistory, Sample, TrendThresholds
from exporter.health.state import HealthThresholds, memory_used_percent
from exporter.nvml.snapshots import NodeSnapshot
from exporter.pods.podresources.mapping import DeviceHolder
from exporter.serving.status_api import GpuStatus, build_gpu_status, handle

log = logging.getLogger(__name__)

HoldersOf = Callable[[str], Sequence[DeviceHolder]]
XidCounts = Callable[[str], Mapping[int, int]]


def gpu_statuses(snapshot: NodeSnapshot, holders_of: HoldersOf | None = None,
                 xid_counts: XidCounts | None = None,
                 thresholds: HealthThresholds | None = None) -> list[GpuStatus]:
    """One GpuStatus per GPU of the sweep: state, score, holders and XID counts derived from it."""
    statuses = []
    for d in snapshot.devices:
        statuses.append(build_gpu_status(d, holders=holders_of(d.uuid) if holders_of else (),
                                         xid_errors=xid_counts(d.uuid) if xid_counts else None,
                                         thresholds=thresholds))
    return statuses


class StatusService:
    """Status API + history over the exporter's source; thread-safe."""

    def __init__(self, source: Any, history: GpuHistory, *, holders_of: HoldersOf | None = None,
                 xid_counts: XidCounts | None = None, thresholds: HealthThresholds | None = None,
                 trend_thresholds: TrendThresholds | None = None,
                 clock: Callable[[], float] = time.time) -> None:
        self._source = source
        self.history = history
        self._holders_of = holders_of
        self._xid_counts = xid_counts
        self._thresholds = thresholds
        self._trend_thresholds = trend_thresholds
        self._clock = clock
        self._loop = BackgroundLoop(self._run, "gpu-history")
        self._stop = self._loop.stopping

    def record(self, snapshot: NodeSnapshot) -> NodeSnapshot:
        """Sweep hook: a history sample per GPU that answered (GpuHistory thins them to one per interval)."""
        for d in snapshot.devices:
            if d.up and d.uuid:
                self.history.record(d.uuid, Sample(
                    timestamp=snapshot.collected_at, temperature_celsius=d.temperature_celsius,
                    utilization_percent=None if d.utilization is None else 100.0 * d.utilization,
                    memory_used_percent=memory_used_percent(d.memory_used_bytes, d.memory_total_bytes)))
        return snapshot

    def statuses(self) -> list[GpuStatus]:
        """Raises NvmlUnavailableError while NVML is down (the API answers 503 with the reason), so an empty
        GPU list always means a node without GPUs, never a node whose driver is missing."""
        snapshot = self._source.snapshot()
        if not snapshot.nvml_up:
            raise NvmlUnavailableError(snapshot.nvml_error or "NVML is not answering")
        return gpu_statuses(snapshot, self._holders_of, self._xid_counts, self._thresholds)

    def handle(self, path: str, query: str, method: str = "GET") -> tuple[int, dict[str, Any]]:
        return handle(path, query, self.statuses, self.history, method=method,
                      trend_thresholds=self._trend_thresholds,
                      max_trend_minutes=self.history.settings.retention_seconds / 60.0, now=self._clock())

    # --- the history sampler ---
    def start(self) -> None:
        self._loop.start()

    def stop(self, timeout: float = 5.0) -> bool:
        return self._loop.stop(timeout)

    def _run(self) -> None:
        while not self._stop.wait(self.history.settings.sample_interval_seconds):
            try:
                self._source.snapshot()
            except Exception as exc:  # the sampler must outlive one failed sweep; NVML trouble is logged
                log.debug("history sample failed: %s", exc)  # once by the source, not here again
