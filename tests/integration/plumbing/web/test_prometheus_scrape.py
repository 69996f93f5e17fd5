"""A real Prometheus scrapes the exporter (simulated NVML) and the controller's /metrics over TLS with basic
auth, with the tls-auth overlay's own scrape jobs (manifests/overlays/tls-auth/scrape-config.yaml: scheme,
server_name, CA and password files; only discovery becomes static targets): `up` is 1 with the right password
and 0 with a wrong one."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
import requests

from autoscaler.controller.server import MetricsServer
from demo.processes import running, start_prometheus
from exporter.app import ExporterApp
from exporter.simulator.config import default_config
from exporter.simulator.nvml import SimulatedNvml
from plumbing.web import load_web_config
from tests.integration.exporter.conftest import SETTINGS
from tests.integration.plumbing.web.conftest import PASSWORD, Pki
from tests.unit.shipping.scrape_jobs import TLS_SNIPPET, as_static_job, pod_meta_labels, shipped_jobs

pytestmark = pytest.mark.integration


SERVICE_NAMES = ("gpu-exporter.gpu-autoscaler.svc", "gpu-autoscaler.gpu-autoscaler.svc")


def job(name: str, port: int, ca: Path, password_file: Path) -> dict[str, Any]:
    """The shipped TLS job `name`, scraping 127.0.0.1:port, with the test's CA and password files."""
    app = "gpu-exporter" if name.startswith("gpu-exporter") else "gpu-autoscaler"
    shipped = shipped_jobs(TLS_SNIPPET)[app]
    static = as_static_job(shipped, [(f"127.0.0.1:{port}", pod_meta_labels(app, f"{app}-0", "gpu-autoscaler",
                                                                            "tls-node"))], "250ms")
    static["job_name"] = name
    static["scrape_timeout"] = "200ms"
    static["tls_config"] = {**shipped["tls_config"], "ca_file": str(ca)}
    static["basic_auth"] = {**shipped["basic_auth"], "password_file": str(password_file)}
    return static


def up_by_job(base: str) -> dict[str, float]:
    answer = requests.get(base + "/api/v1/query", params={"query": "up"}, timeout=5).json()
    return {s["metric"]["job"]: float(s["value"][1]) for s in answer["data"]["result"]}


def test_prometheus_scrapes_both_processes_over_tls_with_basic_auth(pki: Pki) -> None:
    served = pki.ca.issue("services", stem="services", names=SERVICE_NAMES)
    config_file = pki.web_config()
    config_file.write_text(config_file.read_text().replace(pki.server.cert.name, served.cert.name)
                           .replace(pki.server.key.name, served.key.name))
    web = load_web_config(config_file)
    right, wrong = pki.root / "password", pki.root / "wrong-password"
    right.write_text(PASSWORD)
    wrong.write_text("not-it")
    app = ExporterApp(SimulatedNvml(default_config(1), pcie_latency_seconds=0.0), "tls-node", SETTINGS)
    app.bind("127.0.0.1", 0, web)
    exporter = app.start()
    controller = MetricsServer(lambda: b"gpu_autoscaler_leader 1\n", lambda: (True, "ok"), 0, "127.0.0.1",
                               web_config=web).start()
    try:
        ca = pki.ca.cert
        # 1 s scrapes (and so 1 s scrape timeouts): a refused password costs a bcrypt check, which on a loaded
        # 2-core machine has outlasted a 250 ms timeout ("context deadline exceeded" instead of the 401)
        config = {"global": {"scrape_interval": "1s", "evaluation_interval": "1s"}, "scrape_configs": [
            job("gpu-exporter", exporter.port, ca, right),
            job("gpu-autoscaler", controller.port, ca, right),
            job("gpu-exporter-wrong-password", exporter.port, ca, wrong),
        ]}
        with running(start_prometheus(config, workdir=pki.root / "prometheus")) as prometheus:
            wanted = {"gpu-exporter": 1.0, "gpu-autoscaler": 1.0, "gpu-exporter-wrong-password": 0.0}

            def settled() -> tuple[dict[str, float], dict[str, str]]:
                targets = requests.get(prometheus.url + "/api/v1/targets", timeout=5).json()["data"]
                return up_by_job(prometheus.url), {t["labels"]["job"]: t["lastError"]
                                                   for t in targets["activeTargets"]}

            def refused(error: str) -> bool:  # 401, or 429 once its failures reach the per-address limit
                return "401" in error or "429" in error

            deadline = time.monotonic() + 30
            seen, errors = settled()
            while (seen != wanted or not refused(errors.get("gpu-exporter-wrong-password", ""))) \
                    and time.monotonic() < deadline:
                time.sleep(0.5)
                seen, errors = settled()
            assert seen == wanted
            assert errors["gpu-exporter"] == "" and errors["gpu-autoscaler"] == ""
            assert refused(errors["gpu-exporter-wrong-password"])
            query = requests.get(prometheus.url + "/api/v1/query", params={"query": "gpu_up"},
                                 timeout=5).json()
            assert [s["metric"]["node"] for s in query["data"]["result"]] == ["tls-node"]
    finally:
        controller.stop()
        app.stop()
