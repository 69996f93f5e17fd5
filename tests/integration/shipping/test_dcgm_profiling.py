"""The DCGM queries that read the exporter's profiling series (DCGM_FI_PROF_*, DCGM_FI_DEV_MEMORY_TEMP): the
community DCGM dashboard's "Tensor Core Utilization" panel and every DCGM_FI_PROF_* series, on a real
Prometheus scraping the simulated exporter with rules/gpu-dcgm-compat.rules.yaml loaded.

Kept apart from test_dcgm_queries.py because these series come from the exporter's profiling collection
(GPM on Hopper and newer, memory temperature, NVLink throughput): these tests fail, naming the missing series,
for as long as exporter/metric_table.py does not declare every one of PROFILING_EXPORTER_NAMES.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.integration.shipping.dcgm_stack import (
    DcgmStack,
    Query,
    dcgm_sources,
    dcgm_stack,
    queries,
    query_id,
)
from tests.support import wait_for
from tests.unit.shipping.promql_names import PROFILING_EXPORTER_NAMES, exporter_names

pytestmark = pytest.mark.integration

# The simulated H100s (GPUs 0 and 1) have GPM, hence these; NVLink and memory temperature too.
H100_GPUS = {"0", "1"}
PROFILING_SERIES = sorted(name for name, reads in dcgm_sources().items() if reads & PROFILING_EXPORTER_NAMES)


def test_the_exporter_declares_every_profiling_series() -> None:
    missing = PROFILING_EXPORTER_NAMES - exporter_names()
    assert not missing, f"exporter/metric_table.py does not declare {sorted(missing)}"


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DcgmStack]:
    with dcgm_stack(tmp_path_factory.mktemp("dcgm-profiling")) as running:
        # GPM activity needs two background samples one pass (5 s) apart, then a scrape and a rule evaluation
        wait_for(lambda: running.query("DCGM_FI_PROF_PIPE_TENSOR_ACTIVE"), 60, "the first GPM pass recorded")
        yield running


def test_there_are_profiling_queries() -> None:
    assert [q.title for q in queries(profiling=True)] == ["Tensor Core Utilization"]


@pytest.mark.parametrize("q", queries(profiling=True), ids=query_id)
def test_query_returns_data(stack: DcgmStack, q: Query) -> None:
    result = stack.run(q)
    assert result, f"{q.source} {q.title!r}: {q.expr} returned nothing"


@pytest.mark.parametrize("name", PROFILING_SERIES)
def test_profiling_series_exist_for_every_h100_with_dcgm_labels(stack: DcgmStack, name: str) -> None:
    by_gpu = {r["metric"]["gpu"]: r["metric"] for r in stack.query(name)}
    assert set(by_gpu) >= H100_GPUS, f"{name}: {sorted(by_gpu)}"
    for gpu in H100_GPUS:
        labels = by_gpu[gpu]
        assert labels["UUID"] == labels["uuid"] and labels["Hostname"] == labels["kubernetes_node"], labels


@pytest.mark.parametrize("name", [n for n in PROFILING_SERIES if n.startswith("DCGM_FI_PROF_")
                                  and "BYTES" not in n])
def test_profiling_ratios_are_ratios(stack: DcgmStack, name: str) -> None:
    values = [float(r["value"][1]) for r in stack.query(name)]
    assert values and all(0 <= v <= 1 for v in values), (name, values)
