"""Wiring: adapter + source + collector (+ pods, health, XID extensions) + status API + HTTP server, as one
object to start and stop.

The CLI builds one; the demo and the tests build their own around a `SimulatedNvml` with a driven clock and,
for pod attribution, a pod-resources socket served by a test gRPC server (`pod_resources_socket=`) and a
fake proc tree (`proc_root=`).
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from prometheus_client import CollectorRegistry

from exporter.collector import GpuCollector
from exporter.config import ExporterConfig
from exporter.health.history import GpuHistory
from exporter.health.memory_link_families import ReliabilityMetrics
from exporter.health.state_families import HealthMetrics
from exporter.health.xid import XidMetrics, XidSettings, XidWatcher
from exporter.nvml.adapter import NvmlAdapter
from exporter.pods.attribution import KubeletAttribution
from exporter.pods.podresources.cache import PodResourcesCache
from exporter.pods.podresources.client import PodResourcesClient
from exporter.pods.procfs import DEFAULT_PROC_ROOT, ProcessAttributor
from exporter.profiling.families import ProfilingMetrics
from exporter.scrape.context import Attribution, CollectorExtension
from exporter.serving.exposition import StateKey
from exporter.serving.http_endpoint import ExporterServer
from exporter.serving.status_service import StatusService
from exporter.source import NvmlSource, SourceSettings
from plumbing.web import WebConfig


class ExporterApp:
    """One exporter: `start(address, port)` serves /metrics and /api/v1; `stop()` ends threads, socket, NVML.

    `config` (the --config file) sets health thresholds, history, trend and pod-resources settings;
    `pod_resources_socket` (the --pod-resources-socket flag) overrides the config's socket. `attribution`
    replaces the kubelet attribution entirely (no pod families then); `extensions` are added after ours.
    """

    def __init__(self, nvml: Any, node_name: str, settings: SourceSettings | None = None,
                 attribution: Attribution | None = None, extensions: Sequence[CollectorExtension] = (),
                 clock: Callable[[], float] = time.time, *, config: ExporterConfig | None = None,
                 pod_resources_socket: str | None = None, proc_root: str | Path = DEFAULT_PROC_ROOT,
                 xid_settings: XidSettings | None = None) -> None:
        self.config = config = config or ExporterConfig()
        self.adapter = NvmlAdapter(nvml, clock=clock)
        self.source = NvmlSource(self.adapter, settings, clock=clock)
        pod_resources = config.pod_resources
        if pod_resources_socket:
            pod_resources = dataclasses.replace(pod_resources, socket=pod_resources_socket)
        self.pod_resources = PodResourcesCache(
            PodResourcesClient(pod_resources.client_settings()).list_allocations,
            refresh_interval_seconds=pod_resources.refresh_interval_seconds,
            mig_parent=self.adapter.mig_parent, resource_filter=pod_resources.resource_filter(),
            stale_grace_intervals=pod_resources.stale_grace_intervals,
            source=f"kubelet pod-resources ({pod_resources.socket})")
        self.kubelet = KubeletAttribution(self.pod_resources, ProcessAttributor(proc_root),
                                          uuid_of_index=self.adapter.uuid_of)
        self.xid = XidWatcher(self.adapter, xid_settings or XidSettings(
            recovery_grace_seconds=config.xid.recovery_grace_seconds), clock=clock)
        self.history = GpuHistory(config.history)
        self.status = StatusService(self.source, self.history,
                                    holders_of=lambda uuid: self.kubelet.device_holders().get(uuid, ()),
                                    xid_counts=self.xid.counts, thresholds=config.health,
                                    trend_thresholds=config.trend, clock=clock)
        self.source.add_sweep_hook(self.xid.apply_down_marks)
        self.source.add_sweep_hook(self.kubelet.observe)
        self.source.add_sweep_hook(self.status.record)
        ours: list[CollectorExtension] = [] if attribution is not None else [self.kubelet]
        ours += [HealthMetrics(config.health), XidMetrics(self.xid), ProfilingMetrics(), ReliabilityMetrics()]
        self.collector = GpuCollector(self.source, node_name, attribution or self.kubelet,
                                      [*ours, *extensions])
        self.registry = CollectorRegistry()  # never the global one: no collect at import or registration
        self.registry.register(self.collector)
        self.server: ExporterServer | None = None
        self._uses_kubelet = attribution is None
        # The key of the rendered /metrics body. Our own families change only with what it names; an
        # injected attribution or extension may change at any time, so with one every scrape renders.
        self.exposition_key: StateKey | None = (
            self.exposition_state if attribution is None and not extensions else None)

    @contextmanager
    def exposition_state(self) -> Iterator[tuple[int, int, int]]:
        """What the /metrics body is made of (see exporter/serving/exposition.py): the NVML sweep (taken
        now when the last one is older than the min interval, and the one the scrape renders), the kubelet
        refresh, the XID events."""
        with self.source.one_sweep() as sweep:
            yield (sweep, self.pod_resources.attempts, self.xid.events)

    def bind(self, address: str, port: int, web_config: WebConfig | None = None) -> ExporterServer:
        """Bind the HTTP port first (raises ServeError when in use), before any thread starts."""
        self.server = ExporterServer(address, port, self.registry, self.source, api=self.status.handle,
                                     web_config=web_config, state=self.exposition_key)
        return self.server

    def start(self, address: str = "127.0.0.1", port: int = 0) -> ExporterServer:
        """Bind, start NVML (retrying in the background), the kubelet cache, XID and history threads."""
        server = self.server or self.bind(address, port)
        self.source.start()  # NVML first: the kubelet cache files MIG devices under parents NVML lists
        if self._uses_kubelet:
            self.pod_resources.start()
        self.xid.start()
        self.status.start()
        server.start()
        return server

    def stop(self) -> None:
        if self.server is not None:
            self.server.shutdown()
            self.server = None
        self.status.stop()
        self.xid.stop()
        self.pod_resources.stop()
        self.source.stop()
