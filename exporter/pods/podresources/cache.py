"""A GPU -> holders mapping refreshed from the kubelet in the background, never on the scrape path.

Scrapes read an immutable snapshot (a dict swapped under a lock), so a slow or hung kubelet delays only the
next refresh, never a scrape. When the kubelet cannot be read `up` is False at once, but the last good
mapping is kept for a grace period (default 3 refresh intervals), so one failed List does not blank every
pod label and churn every series; after the grace the mapping is empty. Each state change is logged once
(WARNING going down, INFO when the kept mapping is dropped, INFO coming back), never per refresh.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType

from exporter.background import BackgroundLoop
from exporter.pods.podresources.client import PodResourcesUnavailableError
from exporter.pods.podresources.mapping import (
    DeviceAllocation,
    DeviceHolder,
    MigParentLookup,
    build_holder_map,
    is_gpu_resource,
    single_holder,
)

log = logging.getLogger(__name__)

DEFAULT_REFRESH_INTERVAL_SECONDS = 10.0
# Refresh intervals the last good mapping outlives a kubelet failure (pod labels stay meanwhile).
DEFAULT_STALE_GRACE_INTERVALS = 3.0

AllocationLister = Callable[[], Sequence[DeviceAllocation]]


@dataclass(frozen=True)
class HolderSnapshot:
    """One refresh's result. `up` False: the kubelet was not readable; `holders` is then the last good
    mapping while `stale` (inside the grace period), else empty."""

    holders: Mapping[str, tuple[DeviceHolder, ...]]
    up: bool
    refreshed_at: float | None  # clock() of the last refresh attempt; None before the first
    error: str | None = None
    stale: bool = False  # holders are the last good mapping, kept through a kubelet failure


_EMPTY: Mapping[str, tuple[DeviceHolder, ...]] = MappingProxyType({})


class PodResourcesCache:
    """Holds the latest GPU -> holders mapping; `start()` refreshes it every `refresh_interval_seconds`.

    `lister` is normally `PodResourcesClient(...).list_allocations`; it must raise
    `PodResourcesUnavailableError` when the kubelet cannot be read (any other exception counts as down too,
    logged with its type). `mig_parent` maps a MIG uuid to its parent GPU uuid (see mapping.py); it is called
    from the refresh thread.
    """

    def __init__(
        self,
        lister: AllocationLister,
        *,
        refresh_interval_seconds: float = DEFAULT_REFRESH_INTERVAL_SECONDS,
        mig_parent: MigParentLookup | None = None,
        resource_filter: Callable[[str], bool] = is_gpu_resource,
        clock: Callable[[], float] = time.monotonic,
        source: str = "kubelet pod-resources",
        stale_grace_intervals: float = DEFAULT_STALE_GRACE_INTERVALS,
    ) -> None:
        if not refresh_interval_seconds > 0:
            raise ValueError(f"refresh_interval_seconds: expected > 0 (got {refresh_interval_seconds!r})")
        if not stale_grace_intervals >= 0:
            raise ValueError(f"stale_grace_intervals: expected >= 0 (got {stale_grace_intervals!r})")
        self._grace_seconds = stale_grace_intervals * refresh_interval_seconds
        self._good: HolderSnapshot | None = None  # the last refresh that read the kubelet
        self._attempts = 0
        self._lister = lister
        self._interval = refresh_interval_seconds
        self._mig_parent = mig_parent
        self._resource_filter = resource_filter
        self._clock = clock
        self._source = source
        self._lock = threading.Lock()
        self._refresh_lock = threading.Lock()
        self._snapshot = HolderSnapshot(holders=_EMPTY, up=False, refreshed_at=None)
        self._logged: str | None = None  # state last logged ("up", "stale", "down"); None = nothing yet
        self._loop = BackgroundLoop(self._run, "pod-resources-refresh")
        self._stop = self._loop.stopping

    # --- reading (scrape path: no I/O, no waiting on the kubelet) ---
    def snapshot(self) -> HolderSnapshot:
        with self._lock:
            return self._snapshot

    @property
    def attempts(self) -> int:
        """Refresh attempts so far (successful or not): tests wait on it instead of sleeping."""
        with self._lock:
            return self._attempts

    @property
    def up(self) -> bool:
        """For gpu_exporter_pod_resources_up: True when the last refresh read the kubelet."""
        return self.snapshot().up

    def holders(self, key: str) -> tuple[DeviceHolder, ...]:
        """Holders of a GPU (by uuid) or of an unmapped MIG / index-strategy id; () when none or down."""
        return self.snapshot().holders.get(key, ())

    def single_holder(self, key: str) -> DeviceHolder | None:
        """The only container holding the GPU, or None when unallocated or shared."""
        return single_holder(self.snapshot().holders, key)

    # --- refreshing ---
    def refresh(self) -> HolderSnapshot:
        """Read the kubelet once now and publish the result. Called by the thread; tests call it directly."""
        with self._refresh_lock:
            now = self._clock()
            try:
                allocations = self._lister()
                mapping = build_holder_map(allocations, self._mig_parent, self._resource_filter)
            except PodResourcesUnavailableError as e:
                snapshot = self._failed(now, str(e))
            except Exception as e:  # the refresher must survive anything one reply or lookup can do
                snapshot = self._failed(now, f"{type(e).__name__}: {e}")
            else:
                snapshot = HolderSnapshot(holders=MappingProxyType(mapping), up=True, refreshed_at=now)
                self._good = snapshot
            with self._lock:
                self._snapshot = snapshot
                self._attempts += 1
            self._log_transition(snapshot)
            return snapshot

    def _failed(self, now: float, error: str) -> HolderSnapshot:
        """Down: the last good mapping while it is younger than the grace period, then nothing."""
        good = self._good
        age = None if good is None or good.refreshed_at is None else now - good.refreshed_at
        if good is not None and age is not None and self._grace_seconds > 0 and age <= self._grace_seconds:
            return HolderSnapshot(holders=good.holders, up=False, refreshed_at=now, error=error, stale=True)
        return HolderSnapshot(holders=_EMPTY, up=False, refreshed_at=now, error=error)

    def _log_transition(self, snapshot: HolderSnapshot) -> None:
        state = "up" if snapshot.up else "stale" if snapshot.stale else "down"
        previous, self._logged = self._logged, state
        if state == previous:
            return
        if state == "up":
            log.info("%s readable: %d GPU devices allocated", self._source, len(snapshot.holders))
        elif state == "stale":
            log.warning("%s unavailable, keeping the last pod labels for up to %gs: %s", self._source,
                        self._grace_seconds, snapshot.error)
        elif previous == "stale":
            log.info("%s still unavailable after %gs; pod labels are empty until it answers",
                     self._source, self._grace_seconds)
        else:
            log.warning(
                "%s unavailable, pod labels stay empty until it answers: %s", self._source, snapshot.error
            )

    def start(self) -> None:
        """Refresh now in the background, then every interval, until `stop()`. Idempotent."""
        self._loop.start()

    def stop(self, timeout: float = 10.0) -> bool:
        """Ask the thread to end and wait up to `timeout` s; True when it ended (a List in flight is bounded
        by the client's own timeout)."""
        return self._loop.stop(timeout)

    def _run(self) -> None:
        while not self._stop.is_set():
            self.refresh()
            self._stop.wait(self._interval)
