"""One simulated GPU read in the three places a user sees it: /metrics, the JSON status API and `status
--json`. Each field's name says its unit (`_ratio` 0..1 on /metrics and in --json, `_percent` 0..100 in the
API), and once converted the three agree, so a dashboard, a script and a person read the same load."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from exporter.config import ExporterConfig, PodResourcesConfig
from exporter.simulator.config_file import parse_sim_config
from exporter.simulator.nvml import SimulatedNvml
from exporter.status_cli import run_status
from tests.integration.exporter.conftest import StartExporter, get

FLEET = """
pcie_latency_seconds: 0
gpus:
  - model: H100
    load: {pattern: constant, value: 0.58, noise: 0}
    processes: [{pid: 4242, memory_gib: 30}]
"""


def scraped(base: str) -> dict[str, float]:
    """GPU 0's samples on /metrics, by metric name."""
    status, body, _ = get(f"{base}/metrics")
    assert status == 200
    return {sample.name: sample.value
            for family in text_string_to_metric_families(body.decode())
            for sample in family.samples if sample.labels.get("gpu") == "0"}


def test_utilization_and_memory_read_the_same_in_metrics_api_and_status_json(
        start_exporter: StartExporter, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    base, _, _ = start_exporter(FLEET)
    metrics = scraped(base)
    status, body, _ = get(f"{base}/api/v1/gpus/0")
    assert status == 200
    api = json.loads(body)
    config = ExporterConfig(pod_resources=PodResourcesConfig(socket=str(tmp_path / "absent.sock")))
    assert run_status(SimulatedNvml(parse_sim_config(FLEET, "fleet.yaml"), pcie_latency_seconds=0.0), "n1",
                      config, output="json", prog="gpu-exporter") == 0
    cli = json.loads(capsys.readouterr().out)["gpus"][0]

    ratio = metrics["gpu_utilization_ratio"]
    assert ratio == pytest.approx(0.58)  # the simulated load, not 58
    assert cli["utilization_ratio"] == ratio and "utilization" not in cli
    assert api["utilization_percent"] == round(100 * ratio, 1) and "utilization_ratio" not in api
    assert cli["memory_utilization_ratio"] == metrics["gpu_memory_utilization_ratio"] <= 1

    used, total = metrics["gpu_memory_used_bytes"], metrics["gpu_memory_total_bytes"]
    assert (cli["memory_used_bytes"], cli["memory_total_bytes"]) == (used, total)
    assert (api["memory"]["used_bytes"], api["memory"]["total_bytes"]) == (used, total)
    assert api["memory"]["percent"] == round(100 * used / total, 1) > 1  # percent, not a ratio
    assert api["availability_score"] == round(metrics["gpu_availability_score"], 4)
