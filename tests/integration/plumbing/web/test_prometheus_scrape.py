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

from autoscaler.controller.http_endpoint import MetricsServer
from demo.processes import running, start_prometheus
from exporter.app import ExporterApp
from exporter.simulator.config import default_config
from exporter.simulator.nvml import SimulatedNvml
from plumbing.web import load_web_config
from tests.integration.exporter.conftest import SETTINGS
from tests.integration.plumbing.web.conftest import PASSWORD, Pki
from tests.unit.shipping.scrape_jobs import TLS_SNIPPET, as_static_job, pod_meta_labels, shipped_jobs

pytestmark = pytest.mark.integration

SCRAPE_INTERVAL = "2s"


SERVICE_NAMES = ("gpu-exporter.gpu-autoscaler.svc", "gpu-autoscaler.gpu-autoscaler.svc")


def job(name: str, port: int, ca: Path, password_file: Path) -> dict[str, Any]:
    """The shipped TLS job `name`, scraping 127.0.0.1:port, with the test's CA and password files."""
    app = "gpu-exporter" if name.startswith("gpu-exporter") else "gpu-autoscaler"
    shipped = shipped_jobs(TLS_SNIPPET)[app]
    # 2 s scrapes, so 2 s scrape timeouts: a TLS handshake and a bcrypt check (cost 10) on a 2-core machine
    # busy with other work have outlasted 200 ms ("context deadline exceeded" instead of up 1 or the 401)
    static = as_static_job(shipped, [(f"127.0.0.1:{port}", pod_meta_labels(app, f"{app}-0", "gpu-autoscaler",
                                                                            "tls-node"))], SCRAPE_INTERVAL)
    static["job_name"] = name
    static["tls_config"] = {**shipped["tls_config"], "ca_file": str(ca)}
    static["basic_auth"] = {**shipped["basic_auth"], "password_file": str(password_file)}
    return static


def targets_by_job(base: str) -> dict[str, tuple[str, str]]:
    """job -> (health, lastError) of its one target, from one answer of the targets API: both fields of the
    same scrape, where `up` and the targets read apart can come from two scrapes."""
    answer = requests.get(base + "/api/v1/targets", timeout=5).json()
    return {t["labels"]["job"]: (t["health"], t["lastError"]) for t in answer["data"]["activeTargets"]}


def refused(error: str) -> bool:
    """The scrape was answered 401, or 429 once its failures reached the per-address limit."""
    return "401" in error or "429" in error


def settled(targets: dict[str, tuple[str, str]]) -> bool:
    """Both right-password jobs scraped cleanly and the wrong password refused, in the same answer."""
    return (targets.get("gpu-exporter") == ("up", "") and targets.get("gpu-autoscaler") == ("up", "")
            and targets.get("gpu-exporter-wrong-password", ("", ""))[0] == "down"
            and refused(targets["gpu-exporter-wrong-password"][1]))


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
        config = {"global": {"scrape_interval": SCRAPE_INTERVAL, "evaluation_interval": "1s"},
                  "scrape_configs": [
                      job("gpu-exporter", exporter.port, ca, right),
                      job("gpu-autoscaler", controller.port, ca, right),
                      job("gpu-exporter-wrong-password", exporter.port, ca, wrong),
                  ]}
        with running(start_prometheus(config, workdir=pki.root / "prometheus")) as prometheus:
            # waits for the event (every target scraped at least once as wanted); the bound only ends a hang
            deadline = time.monotonic() + 90
            targets = targets_by_job(prometheus.url)
            while not settled(targets) and time.monotonic() < deadline:
                time.sleep(0.5)
                targets = targets_by_job(prometheus.url)
            assert settled(targets), targets
            query = requests.get(prometheus.url + "/api/v1/query", params={"query": "gpu_up"},
                                 timeout=5).json()
            assert [s["metric"]["node"] for s in query["data"]["result"]] == ["tls-node"]
    finally:
        controller.stop()
        app.stop()
