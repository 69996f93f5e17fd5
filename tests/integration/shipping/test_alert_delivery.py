"""End to end: the `gpu-exporter` command serving simulated GPUs with injected faults (`--simulate-config`),
a real Prometheus loaded with the shipped rules (scraping through the shipped scrape job), a real
Alertmanager, and a webhook receiver in this test. The alerts must arrive with their labels and rendered
annotations, and healthy GPUs must stay silent.

Faults, both the simulator's own: GPU 0 overheats to 91 °C from the start (`overheat`: past the thermal
slowdown thresholds it also throttles, sw_thermal and hw_thermal) and GPU 2 is lost (`gpu_lost`). The
shipped rules are loaded unchanged except `for`, shortened so the test takes seconds.
"""

from __future__ import annotations

import json
import signal
import subprocess
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import yaml

from demo.processes import free_port, running, start_alertmanager, start_prometheus, wait_http_ok
from tests.processes import EXPORTER
from tests.support import wait_for
from tests.unit.shipping.promql_names import RULE_FILES
from tests.unit.shipping.scrape_jobs import as_static_job, pod_meta_labels, shipped_jobs

pytestmark = pytest.mark.integration

NODE = "gpu-node-1"
HOT_GPU, HOT_CELSIUS, LOST_GPU = 0, 91, 2
SIM_CONFIG = f"""
gpus:
  - {{model: H100, count: 1, load: {{pattern: constant, value: 0.9, noise: 0}}}}
  - {{model: H100, count: 2, load: {{pattern: constant, value: 0.2, noise: 0}}}}
faults:
  - {{type: overheat, gpu: {HOT_GPU}, at: 0, celsius: {HOT_CELSIUS}}}
  - {{type: gpu_lost, gpu: {LOST_GPU}, at: 0}}
"""
FAST_FOR = "1s"


class Webhook:
    """Alertmanager's webhook receiver: keeps every alert of every notification."""

    def __init__(self) -> None:
        self.alerts: list[dict[str, Any]] = []
        self.lock = threading.Lock()
        hook = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                with hook.lock:
                    hook.alerts.extend(body["alerts"])
                self.send_response(200)
                self.end_headers()

            def log_message(self, format: str, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hook"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def received(self, alertname: str) -> list[dict[str, Any]]:
        with self.lock:
            return [a for a in self.alerts
                    if a["labels"]["alertname"] == alertname and a["status"] == "firing"]

    def thermal_throttling(self) -> list[dict[str, Any]]:
        """GPUThermalThrottling alerts once both reasons (sw_thermal, hw_thermal) have arrived, else []."""
        alerts = self.received("GPUThermalThrottling")
        return alerts if len({a["labels"]["reason"] for a in alerts}) >= 2 else []


@pytest.fixture
def webhook() -> Iterator[Webhook]:
    hook = Webhook()
    hook.thread.start()
    yield hook
    hook.server.shutdown()
    hook.server.server_close()
    hook.thread.join(timeout=5)


@pytest.fixture
def exporter_port(tmp_path: Path) -> Iterator[int]:
    """`gpu-exporter --simulate-config FILE` as a user runs it; stopped with SIGTERM like the kubelet does."""
    sim_file = tmp_path / "hot-node.yaml"
    sim_file.write_text(SIM_CONFIG)
    port = free_port()
    log = (tmp_path / "gpu-exporter.log").open("w")
    proc = subprocess.Popen(
        [EXPORTER, "--address", "127.0.0.1", "--port", str(port), "--simulate-config", str(sim_file),
         "--node-name", NODE, "--min-interval", "0.5"],
        stdout=log, stderr=subprocess.STDOUT)
    try:
        wait_http_ok(f"http://127.0.0.1:{port}/readyz", timeout=30, proc=proc)  # type: ignore[arg-type]
        yield port
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)
        log.close()
    assert proc.returncode == 0, (tmp_path / "gpu-exporter.log").read_text()[-2000:]


def fast_rules() -> dict[str, str]:
    """The shipped rule files, each alert's `for` shortened to FAST_FOR and nothing else changed."""
    files = {}
    for path in RULE_FILES:
        doc = yaml.safe_load(path.read_text())
        for group in doc["groups"]:
            for rule in group["rules"]:
                if "alert" in rule and "for" in rule:
                    rule["for"] = FAST_FOR
        files[path.name] = yaml.safe_dump(doc, sort_keys=False)
    return files


def test_hot_and_lost_gpus_page_through_alertmanager(webhook: Webhook, exporter_port: int) -> None:
    am_config = {
        "route": {"receiver": "test", "group_by": ["alertname", "node", "gpu"], "group_wait": "200ms",
                  "group_interval": "1s", "repeat_interval": "1h"},
        "receivers": [{"name": "test", "webhook_configs": [{"url": webhook.url, "send_resolved": False}]}],
    }
    with running(start_alertmanager(am_config)) as alertmanager:
        meta = pod_meta_labels("gpu-exporter", "gpu-exporter-x2x4z", "gpu-autoscaler", NODE)
        job = as_static_job(shipped_jobs()["gpu-exporter"], [(f"127.0.0.1:{exporter_port}", meta)], "500ms")
        prom_config = {
            "global": {"scrape_interval": "500ms", "evaluation_interval": "500ms"},
            "alerting": {"alertmanagers": [
                {"static_configs": [{"targets": [alertmanager.url.removeprefix("http://")]}]}]},
            "scrape_configs": [job],
        }
        with running(start_prometheus(prom_config, rule_files=fast_rules())):
            (hot,) = wait_for(lambda: webhook.received("GPUTemperatureHigh"), 60,
                              "GPUTemperatureHigh at the webhook")
            lost = wait_for(lambda: webhook.received("GPULost"), 60, "GPULost at the webhook")
            throttled = wait_for(webhook.thermal_throttling, 60, "GPUThermalThrottling for both reasons")

    labels, annotations = hot["labels"], hot["annotations"]
    assert labels["severity"] == "critical" and labels["gpu"] == str(HOT_GPU) and labels["node"] == NODE
    assert labels["model"] == "NVIDIA H100 80GB HBM3" and labels["uuid"].startswith("GPU-")
    assert labels["job"] == "gpu-exporter" and labels["exporter_pod"] == "gpu-exporter-x2x4z"
    assert "namespace" not in labels and "pod" not in labels  # held by no pod: nobody else is blamed
    assert annotations["summary"] == f"GPU {HOT_GPU} on {NODE} is at {HOT_CELSIUS} °C"
    assert f"(now {HOT_CELSIUS} °C)" in annotations["description"]
    assert f"on node {NODE} not held by a single pod" in annotations["description"]
    assert annotations["runbook_url"].endswith("docs/runbook.md#gputemperaturehigh")

    assert {a["labels"]["gpu"] for a in lost} == {str(LOST_GPU)}
    assert lost[0]["labels"]["severity"] == "critical"
    assert "has reported gpu_up 0" in lost[0]["annotations"]["description"]
    # Only the hot GPU pages for temperature; the cool and the lost GPU do not.
    assert {a["labels"]["gpu"] for a in webhook.received("GPUTemperatureHigh")} == {str(HOT_GPU)}
    # Past the slowdown thresholds the hot GPU throttles as a real one would, and only it does.
    assert {(a["labels"]["gpu"], a["labels"]["reason"]) for a in throttled} == {
        (str(HOT_GPU), "sw_thermal"), (str(HOT_GPU), "hw_thermal")}
