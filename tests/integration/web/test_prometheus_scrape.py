"""A real Prometheus scrapes the exporter (simulated NVML) and the controller's /metrics over TLS with basic
auth, configured as the tls-auth overlay's plain scrape config does: `up` is 1 with the right password and 0
with a wrong one."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
import requests

from autoscaler.server import MetricsServer
from demo.processes import running, start_prometheus
from exporter.app import ExporterApp
from exporter.simconfig import default_config
from exporter.simulated import SimulatedNvml
from plumbing.web import load_web_config
from tests.integration.exporter.conftest import SETTINGS
from tests.integration.web.conftest import PASSWORD, Pki

pytestmark = pytest.mark.integration


def job(name: str, port: int, ca: Path, password: str) -> dict[str, object]:
    return {"job_name": name, "scheme": "https", "scrape_interval": "250ms", "scrape_timeout": "200ms",
            "tls_config": {"ca_file": str(ca)},
            "basic_auth": {"username": "prometheus", "password": password},
            "static_configs": [{"targets": [f"127.0.0.1:{port}"]}]}


def up_by_job(base: str) -> dict[str, float]:
    answer = requests.get(base + "/api/v1/query", params={"query": "up"}, timeout=5).json()
    return {s["metric"]["job"]: float(s["value"][1]) for s in answer["data"]["result"]}


def test_prometheus_scrapes_both_processes_over_tls_with_basic_auth(pki: Pki) -> None:
    web = load_web_config(pki.web_config())
    app = ExporterApp(SimulatedNvml(default_config(1), pcie_latency_seconds=0.0), "tls-node", SETTINGS)
    app.bind("127.0.0.1", 0, web)
    exporter = app.start()
    controller = MetricsServer(lambda: b"gpu_autoscaler_leader 1\n", lambda: (True, "ok"), 0, "127.0.0.1",
                               web_config=web).start()
    try:
        ca = pki.ca.cert
        config = {"global": {"scrape_interval": "250ms", "evaluation_interval": "250ms"}, "scrape_configs": [
            job("exporter", exporter.port, ca, PASSWORD),
            job("controller", controller.port, ca, PASSWORD),
            job("exporter-wrong-password", exporter.port, ca, "not-it"),
        ]}
        with running(start_prometheus(config, workdir=pki.root / "prometheus")) as prometheus:
            wanted = {"exporter": 1.0, "controller": 1.0, "exporter-wrong-password": 0.0}
            deadline = time.monotonic() + 20
            while (seen := up_by_job(prometheus.url)) != wanted and time.monotonic() < deadline:
                time.sleep(0.2)
            assert seen == wanted
            targets = requests.get(prometheus.url + "/api/v1/targets", timeout=5).json()["data"]
            errors = {t["labels"]["job"]: t["lastError"] for t in targets["activeTargets"]}
            assert errors["exporter"] == "" and errors["controller"] == ""
            assert "401" in errors["exporter-wrong-password"]
            query = requests.get(prometheus.url + "/api/v1/query", params={"query": "gpu_up"},
                                 timeout=5).json()
            assert [s["metric"]["node"] for s in query["data"]["result"]] == ["tls-node"]
    finally:
        controller.stop()
        app.stop()
