"""Wiring: adapter + source + collector + private registry + HTTP server, as one object to start and stop.

The CLI builds one; the demo and the tests build their own around a `SimulatedNvml` with a driven clock.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

from prometheus_client import CollectorRegistry

from exporter.collector import Attribution, CollectorExtension, GpuCollector
from exporter.nvml import NvmlAdapter
from exporter.server import ExporterServer
from exporter.source import NvmlSource, SourceSettings


class ExporterApp:
    """One exporter: `start(address, port)` serves /metrics; `stop()` ends threads, socket and NVML."""

    def __init__(self, nvml: Any, node_name: str, settings: SourceSettings | None = None,
                 attribution: Attribution | None = None, extensions: Sequence[CollectorExtension] = (),
                 clock: Callable[[], float] = time.time) -> None:
        self.adapter = NvmlAdapter(nvml, clock=clock)
        self.source = NvmlSource(self.adapter, settings, clock=clock)
        self.collector = GpuCollector(self.source, node_name, attribution, extensions)
        self.registry = CollectorRegistry()  # never the global one: no collect at import or registration
        self.registry.register(self.collector)
        self.server: ExporterServer | None = None

    def bind(self, address: str, port: int) -> ExporterServer:
        """Bind the HTTP port first (raises ServeError when in use), before any thread starts."""
        self.server = ExporterServer(address, port, self.registry, self.source)
        return self.server

    def start(self, address: str = "127.0.0.1", port: int = 0) -> ExporterServer:
        """Bind, start NVML (retrying in the background) and serve in a thread."""
        server = self.server or self.bind(address, port)
        self.source.start()
        server.start()
        return server

    def stop(self) -> None:
        if self.server is not None:
            self.server.shutdown()
            self.server = None
        self.source.stop()
