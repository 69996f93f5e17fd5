"""A real Prometheus on 127.0.0.1 scraping a target whose values each test sets (`Prom`), and a server that
accepts connections and never answers (`silent_server`): what the controller and Prometheus client tests
query. tests/integration/conftest.py makes them fixtures."""

from __future__ import annotations

import math
import socket
import threading
from collections.abc import Iterator
from dataclasses import dataclass

import requests
import yaml
from prometheus_client import CollectorRegistry, Gauge, start_http_server

from demo.processes import ManagedProcess, free_port, start_prometheus
from tests.support import wait_for

SCRAPE_INTERVAL = "500ms"
"""Also the scrape timeout: a target answering later (its HTTP thread starved in a busy worker) fails the
scrape and Prometheus marks its series stale at once, so a test would read nothing for an interval."""


@dataclass
class Target:
    """An HTTP target Prometheus scrapes: `gauge.labels(series=...).set(v)` sets what queries see."""

    registry: CollectorRegistry
    gauge: Gauge
    port: int

    def set(self, series: str, value: float) -> None:
        self.gauge.labels(series=series).set(value)

    def remove(self, series: str) -> None:
        self.gauge.remove(series)


@dataclass
class Prom:
    process: ManagedProcess
    target: Target

    @property
    def url(self) -> str:
        return self.process.url

    def value(self, query: str) -> float | None:
        answer = requests.get(f"{self.url}/api/v1/query", params={"query": query}, timeout=2).json()
        result = answer["data"]["result"]
        return float(result[0]["value"][1]) if len(result) == 1 else None

    def wait_value(self, query: str, expected: float, timeout: float = 10.0) -> None:
        def seen() -> bool:
            got = self.value(query)
            if got is None:
                return False
            return (math.isnan(got) and math.isnan(expected)) or got == expected

        wait_for(seen, timeout, f"{query} == {expected}")

    def wait_absent(self, query: str, timeout: float = 10.0) -> None:
        def absent() -> bool:
            answer = requests.get(f"{self.url}/api/v1/query", params={"query": query}, timeout=2).json()
            return answer["data"]["result"] == []

        wait_for(absent, timeout, f"{query} to have no series")

    def query_requests(self) -> float:
        """Prometheus' own count of /api/v1/query requests it served."""
        text = requests.get(f"{self.url}/metrics", timeout=2).text
        total = 0.0
        for line in text.splitlines():
            if line.startswith("prometheus_http_requests_total{") and 'handler="/api/v1/query"' in line:
                total += float(line.rsplit(" ", 1)[1])
        return total


def running_prom() -> Iterator[Prom]:
    """Prometheus scraping a fresh target every SCRAPE_INTERVAL, until the generator is closed."""
    registry = CollectorRegistry()
    gauge = Gauge("test_load", "value set by the test", ["series"], registry=registry)
    port = free_port()
    server, thread = start_http_server(port, addr="127.0.0.1", registry=registry)
    config: dict[str, object] = {
        "global": {"scrape_interval": SCRAPE_INTERVAL, "evaluation_interval": "1s"},
        "scrape_configs": [{"job_name": "target", "static_configs": [{"targets": [f"127.0.0.1:{port}"]}]}],
    }
    process = start_prometheus(config)
    try:
        yield Prom(process, Target(registry, gauge, port))
    finally:
        process.stop()
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


def reload_scrape_configs(process: ManagedProcess, scrape_configs: list[dict[str, object]]) -> None:
    """Give a running Prometheus new scrape jobs (its config file, then POST /-/reload), keeping its rule
    files: for targets whose port is known only once Prometheus is up."""
    path = process.workdir / "prometheus.yml"
    config = yaml.safe_load(path.read_text())
    config["scrape_configs"] = scrape_configs
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    requests.post(f"{process.url}/-/reload", timeout=10).raise_for_status()


def silent_server() -> Iterator[int]:
    """Accepts connections and never answers: a Prometheus hanging on a heavy query."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(64)
    stop = threading.Event()
    accepted: list[socket.socket] = []

    def accept() -> None:
        sock.settimeout(0.1)
        while not stop.is_set():
            try:
                accepted.append(sock.accept()[0])
            except OSError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    yield int(sock.getsockname()[1])
    stop.set()
    thread.join(timeout=2)
    for conn in accepted:
        conn.close()
    sock.close()
