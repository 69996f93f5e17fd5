"""dcgm-exporter users' queries run unchanged on gpu-exporter: a real Prometheus scrapes the simulated
exporter with rules/gpu-dcgm-compat.rules.yaml loaded, and the queries of our users' guide and of the
community DCGM dashboard (Grafana 12239), copied into dcgm_queries.yaml, return data with dcgm-exporter's
labels and units.

Queries that read the profiling series (DCGM_FI_PROF_*, DCGM_FI_DEV_MEMORY_TEMP) are in
test_dcgm_profiling.py.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from exporter.simulator.models import MODELS
from tests.integration.shipping.dcgm_stack import (
    HOLDER,
    NODE,
    DcgmStack,
    Query,
    dcgm_stack,
    queries,
    query_id,
)
from tests.support import wait_for

pytestmark = pytest.mark.integration

# The DCGM series every GPU has without profiling (dcgm-exporter's default counters we publish).
DEVICE_SERIES = ("DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_DEV_MEM_COPY_UTIL", "DCGM_FI_DEV_FB_USED",
                 "DCGM_FI_DEV_FB_FREE", "DCGM_FI_DEV_GPU_TEMP", "DCGM_FI_DEV_POWER_USAGE",
                 "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", "DCGM_FI_DEV_SM_CLOCK", "DCGM_FI_DEV_MEM_CLOCK",
                 "DCGM_FI_DEV_XID_ERRORS", "DCGM_FI_PROF_PCIE_TX_BYTES", "DCGM_FI_PROF_PCIE_RX_BYTES")


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DcgmStack]:
    with dcgm_stack(tmp_path_factory.mktemp("dcgm")) as running:
        yield running


def test_there_are_queries_of_both_sources() -> None:
    sources = {q.source for q in queries(profiling=False)}
    assert sources == {"guide", "dashboard 12239"}


@pytest.mark.parametrize("q", queries(profiling=False), ids=query_id)
def test_query_returns_data(stack: DcgmStack, q: Query) -> None:
    result = stack.run(q)
    assert result, f"{q.source} {q.title!r}: {q.expr} returned nothing"


def test_guide_queries_select_the_node_by_kubernetes_node(stack: DcgmStack) -> None:
    """The guide's node filter selects every GPU of that node and nothing of another node."""
    (utilization,) = [q for q in queries(profiling=False) if q.title == "GPU utilization"]
    assert {r["metric"]["gpu"] for r in stack.run(utilization)} == {"0", "1", "2"}
    assert stack.query(utilization.expr.replace(NODE, "gpu-node-2")) == []


def test_dashboard_variables_list_every_gpu_and_the_exporter_instance(stack: DcgmStack) -> None:
    assert stack.label_values("label_values(DCGM_FI_DEV_GPU_TEMP, gpu)") == ["0", "1", "2"]
    (instance,) = stack.label_values("label_values(DCGM_FI_DEV_GPU_TEMP, instance)")
    assert stack.exporter_url.endswith(instance)


@pytest.mark.parametrize("name", DEVICE_SERIES)
def test_series_carry_dcgm_exporter_labels(stack: DcgmStack, name: str) -> None:
    """Every GPU's series with dcgm-exporter's labels copied from ours; the held GPU with its pod, the free
    ones without pod labels."""
    by_gpu = {r["metric"]["gpu"]: r["metric"] for r in stack.query(name)}
    assert set(by_gpu) == {"0", "1", "2"}, name
    for gpu, labels in by_gpu.items():
        assert labels["UUID"] == labels["uuid"] and labels["UUID"].startswith("GPU-")
        assert labels["modelName"] == labels["model"]
        assert labels["Hostname"] == labels["hostname"] == labels["kubernetes_node"] == NODE
        assert labels["device"] == f"nvidia{gpu}"
        assert "GPU_I_ID" not in labels and "GPU_I_PROFILE" not in labels
        holder = (labels.get("namespace"), labels.get("pod"), labels.get("container"))
        assert holder == (HOLDER if gpu == "0" else (None, None, None)), (name, gpu)


@pytest.mark.parametrize(("dcgm", "ours", "factor", "whole"), [
    ("DCGM_FI_DEV_GPU_UTIL", "gpu_utilization_ratio", 100, False),
    ("DCGM_FI_DEV_MEM_COPY_UTIL", "gpu_memory_utilization_ratio", 100, False),
    # DCGM's framebuffer: whole MiB, used without the driver's reserved memory
    ("DCGM_FI_DEV_FB_USED", "gpu_memory_used_bytes - gpu_memory_reserved_bytes", 1 / 1048576, True),
    ("DCGM_FI_DEV_FB_FREE", "gpu_memory_free_bytes", 1 / 1048576, True),
    ("DCGM_FI_DEV_FB_RESERVED", "gpu_memory_reserved_bytes", 1 / 1048576, True),
    ("DCGM_FI_DEV_GPU_TEMP", "gpu_temperature_celsius", 1, False),
    ("DCGM_FI_DEV_POWER_USAGE", "gpu_power_usage_watts", 1, False),
    ("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", "gpu_energy_consumption_joules_total", 1000, False),
    ("DCGM_FI_DEV_SM_CLOCK", "gpu_sm_clock_hertz", 1e-6, False),
])
def test_units_are_dcgm_exporters(stack: DcgmStack, dcgm: str, ours: str, factor: float, whole: bool) -> None:
    """Each DCGM sample is one of our recent samples times the unit factor (rounded down where DCGM's field
    is whole MiB): the recording rule evaluates between scrapes, so it may hold the sample before our last
    one (an energy counter a few seconds old grows by a fifth from one scrape to the next); it lies within
    our samples' range over the last 2 minutes (of a difference: the minuend's bound minus the subtrahend's
    opposite one; a subquery would miss a sample newer than its last step)."""
    def ratios(over_time: str, rounded: bool) -> list[float]:
        minuend, _, subtrahend = ours.partition(" - ")
        ours_bound = f"{over_time}({minuend}[2m])"
        if subtrahend:
            opposite = "min_over_time" if over_time == "max_over_time" else "max_over_time"
            ours_bound += f" - {opposite}({subtrahend}[2m])"
        ours_bound = f"max by (gpu) ({ours_bound})"
        scaled = f"floor({ours_bound} * {factor})" if rounded else f"({ours_bound} * {factor})"
        expr = f"max by (gpu) ({dcgm}) / on (gpu) {scaled} and on (gpu) {ours_bound} != 0"
        found = [float(r["value"][1]) for r in stack.query(expr)]
        assert found, expr
        return found

    assert all(r <= 1 + 1e-9 for r in ratios("max_over_time", False)), dcgm
    assert all(r >= 1 - 1e-9 for r in ratios("min_over_time", whole)), dcgm


def test_framebuffer_parts_never_exceed_the_total(stack: DcgmStack) -> None:
    """USED + FREE + RESERVED (DCGM's fields 251-253) never exceed the GPU's memory, as in DCGM."""
    parts = "sum by (gpu) (DCGM_FI_DEV_FB_USED + DCGM_FI_DEV_FB_FREE + DCGM_FI_DEV_FB_RESERVED)"
    total = "max by (gpu) (gpu_memory_total_bytes) / 1048576"
    assert {r["metric"]["gpu"] for r in stack.query(parts)} == {"0", "1", "2"}
    assert stack.query(f"{parts} > on (gpu) {total}") == []


def test_nvlink_bandwidth_is_a_throughput_in_mib_per_second(stack: DcgmStack) -> None:
    """Field 449 as DCGM publishes it: the NVLink payload throughput of all links, TX + RX, in MiB/s (a gauge,
    never a byte count growing since the driver loaded): within what the board's links carry at full load."""
    # the payload counters move once per background pass (5 s): a rate needs two passes in Prometheus
    wait_for(lambda: len(stack.query("DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL > 0")) == 3, 60,
             "the NVLink counters of the three boards moved between two scrapes")
    by_gpu = {r["metric"]["gpu"]: (r["metric"]["model"], float(r["value"][1]))
              for r in stack.query("DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL")}
    assert set(by_gpu) == {"0", "1", "2"}  # H100, H100, A100: NVLink boards, GPM or not
    full_load = {m.name: 2 * m.nvlink_mib_per_second for m in MODELS.values()}  # both directions
    for gpu, (model, mib_per_second) in by_gpu.items():
        assert 0 < mib_per_second < full_load[model], (gpu, model, mib_per_second)


def test_xid_errors_value_is_the_code(stack: DcgmStack) -> None:
    by_gpu = {r["metric"]["gpu"]: (r["metric"].get("err_code"), float(r["value"][1]))
              for r in stack.query("DCGM_FI_DEV_XID_ERRORS")}
    assert by_gpu == {"0": (None, 0.0), "1": ("13", 13.0), "2": (None, 0.0)}
