"""Fixtures: a real exporter HTTP server on 127.0.0.1 (free port) over the simulated NVML; HTTP helpers."""

from __future__ import annotations

import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from exporter.app import ExporterApp
from exporter.nvml.adapter import real_nvml
from exporter.simulator.config import default_config
from exporter.simulator.config_file import parse_sim_config
from exporter.simulator.nvml import SimulatedNvml
from exporter.source import SourceSettings
from tests.kubelet import kubelet, proc_root, socket_dir  # noqa: F401  (fixtures of every exporter test)

SETTINGS = SourceSettings(min_interval=0.0, init_retry_interval=0.05, pcie_interval=0.05,
                          profiling_interval=0.05)


def get(url: str, headers: dict[str, str] | None = None) -> tuple[int, bytes, dict[str, str]]:
    request = urllib.request.Request(url, headers=headers or {})
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, response.read(), dict(response.headers)
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read(), dict(exc.headers)


StartExporter = Callable[..., tuple[str, ExporterApp, Any]]


@pytest.fixture
def start_exporter() -> Iterator[StartExporter]:
    """start_exporter(yaml_text=None, gpus=2, real=False) -> (base url, app, nvml backend)."""
    apps: list[ExporterApp] = []

    def start(yaml_text: str | None = None, gpus: int = 2, real: bool = False,
              settings: SourceSettings = SETTINGS) -> tuple[str, ExporterApp, Any]:
        if real:
            nvml: Any = real_nvml()
        else:
            config = parse_sim_config(yaml_text, "test.yaml") if yaml_text else default_config(gpus)
            nvml = SimulatedNvml(config, pcie_latency_seconds=0.001)
        app = ExporterApp(nvml, "test-node", settings)
        apps.append(app)
        server = app.start("127.0.0.1", 0)
        return f"http://127.0.0.1:{server.port}", app, nvml

    yield start
    for app in apps:
        app.stop()
