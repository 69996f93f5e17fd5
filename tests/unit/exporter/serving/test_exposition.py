"""The /metrics body is rendered once per state (sweep, kubelet refresh, XID events) and format,
gzip-compressed once, and is at every moment what a fresh render would give."""

from __future__ import annotations

import gzip
from collections.abc import Iterator
from pathlib import Path

import pytest
from prometheus_client import generate_latest

from exporter.app import ExporterApp
from exporter.health.state_families import HealthMetrics
from exporter.health.xid import XidRecord
from exporter.scrape.context import NoAttribution
from exporter.serving.exposition import Exposition
from exporter.simulator.config import default_config
from exporter.simulator.nvml import SimulatedNvml
from exporter.source import SourceSettings

OPENMETRICS = "application/openmetrics-text; version=1.0.0"


@pytest.fixture
def app(tmp_path: Path) -> Iterator[ExporterApp]:
    """Two simulated GPUs; a sweep at most once an hour, so only what the test does changes the state."""
    app = ExporterApp(SimulatedNvml(default_config(2), pcie_latency_seconds=0.0), "n",
                      SourceSettings(min_interval=3600.0, pcie_interval=3600.0, profiling_interval=3600.0),
                      pod_resources_socket=str(tmp_path / "no-kubelet.sock"))
    app.source.start()
    try:
        yield app
    finally:
        app.source.stop()


def fresh(app: ExporterApp) -> bytes:
    return generate_latest(app.registry)


def test_scrapes_between_sweeps_render_once_and_gzip_once(app: ExporterApp) -> None:
    exposition = Exposition(app.registry, app.exposition_state)
    first, content_type = exposition.body("", want_gzip=False)
    assert content_type.startswith("text/plain") and b"gpu_utilization_ratio{" in first
    assert exposition.body("", want_gzip=False)[0] is first
    zipped = exposition.body("text/plain", want_gzip=True)[0]
    assert exposition.body("", want_gzip=True)[0] is zipped and gzip.decompress(zipped) == first
    assert exposition.renders == 1
    assert first == fresh(app)
    # another format is rendered once too, and does not evict the first
    assert b"# EOF" in exposition.body(OPENMETRICS, want_gzip=False)[0]
    assert exposition.body(OPENMETRICS, want_gzip=False)[0] is exposition.body(OPENMETRICS, False)[0]
    assert exposition.body("", want_gzip=False)[0] is first and exposition.renders == 2


@pytest.mark.parametrize("change", ["sweep", "kubelet refresh", "xid event"])
def test_every_change_of_state_renders_anew(app: ExporterApp, change: str) -> None:
    exposition = Exposition(app.registry, app.exposition_state)
    before = exposition.body("", want_gzip=False)[0]
    zipped = exposition.body("", want_gzip=True)[0]
    if change == "sweep":
        app.source.settings = SourceSettings(min_interval=0.0)  # the next scrape sweeps
    elif change == "kubelet refresh":
        app.pod_resources.refresh()  # the socket is missing: one more failed attempt
    else:
        app.xid.record(XidRecord(app.adapter.uuid_of(0), 13, 0.0))
    after = exposition.body("", want_gzip=False)[0]
    app.source.settings = SourceSettings(min_interval=3600.0)  # a fresh render reads the same sweep
    assert exposition.renders == 2 and after != before and after == fresh(app)
    assert gzip.decompress(exposition.body("", want_gzip=True)[0]) == after != gzip.decompress(zipped)
    if change == "xid event":
        assert b'gpu_xid_errors_total{' in after and b'xid="13"' in after


def test_one_scrape_sweeps_once_even_at_min_interval_zero(app: ExporterApp) -> None:
    app.source.settings = SourceSettings(min_interval=0.0)
    exposition = Exposition(app.registry, app.exposition_state)
    sweeps = app.source.sweeps
    exposition.body("", want_gzip=False)
    exposition.body("", want_gzip=False)
    assert (app.source.sweeps - sweeps, exposition.renders) == (2, 2)


def test_without_a_state_every_scrape_renders(app: ExporterApp) -> None:
    exposition = Exposition(app.registry)
    assert exposition.body("", False)[0] == exposition.body("", False)[0]
    assert exposition.renders == 2


def test_an_injected_attribution_or_extension_turns_the_cache_off(app: ExporterApp) -> None:
    nvml = SimulatedNvml(default_config(1))
    assert app.exposition_key is not None
    assert ExporterApp(nvml, "n", attribution=NoAttribution()).exposition_key is None
    assert ExporterApp(nvml, "n", extensions=[HealthMetrics()]).exposition_key is None
