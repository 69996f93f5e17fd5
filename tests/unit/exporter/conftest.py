"""Fixtures for the exporter unit tests: a driven clock and simulated NVML nodes built from YAML text."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from exporter.nvml.adapter import NvmlAdapter
from exporter.simulator.config import SimConfig, default_config
from exporter.simulator.config_file import parse_sim_config
from exporter.simulator.nvml import SimulatedNvml
from exporter.source import NvmlSource
from tests.clock import ManualClock as FakeClock

T0 = 1_000.0


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(T0)


SimFactory = Callable[..., tuple[SimulatedNvml, NvmlAdapter]]


@pytest.fixture
def make_sim(clock: FakeClock) -> SimFactory:
    """make_sim(yaml_text=None, gpus=2, init=True) -> (simulated NVML, adapter over it), zero PCIe latency."""

    def build(
        yaml_text: str | None = None, gpus: int = 2, init: bool = True
    ) -> tuple[SimulatedNvml, NvmlAdapter]:
        config: SimConfig = parse_sim_config(yaml_text, "test.yaml") if yaml_text else default_config(gpus)
        sim = SimulatedNvml(config, clock=clock, pcie_latency_seconds=0.0)
        adapter = NvmlAdapter(sim, clock=clock)
        if init:
            adapter.init()
        return sim, adapter

    return build


@pytest.fixture
def sources() -> Iterator[list[NvmlSource]]:
    """Sources a test starts; each is stopped after the test."""
    started: list[NvmlSource] = []
    yield started
    for source in started:
        source.stop()
