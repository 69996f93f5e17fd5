"""A real exporter HTTP server on 127.0.0.1: exposition parsed by prometheus_client, checked by promtool."""

from __future__ import annotations

import gzip
import re
import socket
import threading

import pytest
from prometheus_client import CollectorRegistry

from demo.processes import promtool
from exporter import metric_table as m
from exporter.serving.http_endpoint import ExporterServer
from exporter.source import SourceSettings
from tests.integration.exporter.conftest import StartExporter, get
from tests.scrape import samples as parse_samples
from tests.support import wait_for

pytestmark = pytest.mark.integration

FANNED = """
gpus:
  - {model: RTX-A6000, count: 2, processes: [{pid: 700, memory_gib: 8}]}
  - {model: H100, mig: 2, processes: [{pid: 701, memory_gib: 4}]}
  - {model: V100}
"""


def scrape(base: str) -> str:
    status, body, headers = get(base + "/metrics")
    assert status == 200 and headers["Content-Type"].startswith("text/plain; version=0.0.4")
    return body.decode()


def test_every_metric_of_the_contract_is_served_and_promtool_is_silent(start_exporter: StartExporter) -> None:
    base, _, _ = start_exporter(FANNED)
    # the pod families need GPU holders, the XID counter an XID (the exporter/pods and /health tests), the
    # vGPU license a vGPU (tests/unit/exporter/test_dcgm_counters.py) and the NVML error counter an error
    # (the test below): absent here, never 0
    needs_pods_or_xid = {m.ALLOCATION_INFO, m.POD_UTILIZATION, m.POD_SM_UTILIZATION, m.POD_MEMORY_BANDWIDTH,
                         m.POD_MEMORY_USED, m.XID_ERRORS, m.VGPU_LICENSED, m.NVML_ERRORS}
    expected = {spec.exposed_name for spec in m.ALL_METRICS if spec not in needs_pods_or_xid}
    # the rates (GPM, NVLink, PCIe, decoder) need two samples: on a busy machine some come a cycle later
    wait_for(lambda: expected <= set(parse_samples(scrape(base))), timeout=15,
             what="every family of the contract")
    text = scrape(base)
    samples = parse_samples(text)
    assert expected <= set(samples), expected - set(samples)
    assert not {spec.exposed_name for spec in needs_pods_or_xid} & set(samples)
    assert {labels["gpu"] for labels, _ in samples["gpu_up"]} == {"0", "1", "2", "3"}
    assert all(labels["node"] == "test-node" for labels, _ in samples["gpu_utilization_ratio"])
    result = promtool("check", "metrics", stdin=text)
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout == "" and result.stderr == ""


def test_promtool_is_silent_on_h100_fleet_with_faults(start_exporter: StartExporter) -> None:
    base, _, _ = start_exporter("""
gpus: [{model: H100, count: 3}]
faults:
  - {type: gpu_lost, gpu: 1}
  - {type: not_supported, gpu: 2, calls: [nvmlDeviceGetPowerUsage]}
  - {type: error, gpu: 0, calls: [nvmlDeviceGetTemperature], error: Timeout}
""")
    text = scrape(base)
    samples = parse_samples(text)
    assert {labels["gpu"]: value for labels, value in samples["gpu_up"]} == {"0": 1.0, "1": 0.0, "2": 1.0}
    assert [labels["gpu"] for labels, _ in samples["gpu_power_usage_watts"]] == ["0"]
    assert [labels["gpu"] for labels, _ in samples["gpu_temperature_celsius"]] == ["2"]
    assert [labels for labels, _ in samples["gpu_exporter_nvml_errors_total"]] == [
        {"gpu": "0", "call": "nvmlDeviceGetTemperature", "error": "Timeout"}]
    assert "gpu_fan_speed_ratio" not in samples
    result = promtool("check", "metrics", stdin=text)
    assert (result.returncode, result.stdout, result.stderr) == (0, "", "")


def test_openmetrics_and_gzip(start_exporter: StartExporter) -> None:
    base, _, _ = start_exporter(gpus=1)
    status, body, headers = get(base + "/metrics", {"Accept": "application/openmetrics-text; version=1.0.0",
                                                      "Accept-Encoding": "gzip"})
    assert status == 200 and headers["Content-Encoding"] == "gzip"
    assert headers["Content-Type"].startswith("application/openmetrics-text")
    text = gzip.decompress(body).decode()
    assert text.rstrip().endswith("# EOF") and "gpu_energy_consumption_joules_total{" in text


def test_health_and_readiness(start_exporter: StartExporter) -> None:
    base, _, _ = start_exporter(gpus=1)
    assert get(base + "/healthz")[:2] == (200, b"ok\n")
    assert get(base + "/readyz")[:2] == (200, b"ready: nvml up\n")
    assert get(base + "/nope")[0] == 404


def test_the_home_page_links_every_endpoint_and_each_link_answers(start_exporter: StartExporter) -> None:
    base, _, _ = start_exporter(gpus=1)
    status, body, headers = get(base + "/")
    links = re.findall(r"href='([^']+)'", body.decode())
    assert status == 200 and headers["Content-Type"].startswith("text/html")
    assert {"/metrics", "/healthz", "/readyz", "/api/v1/gpus", "/api/gpu/status"} <= set(links)
    assert all(get(base + link)[0] == 200 for link in links), links


def test_without_nvml_library_serves_nvml_up_zero_and_stays_alive(start_exporter: StartExporter) -> None:
    base, app, _ = start_exporter(real=True)  # this machine has no GPU driver: the real pynvml path
    if app.source.ready:  # pragma: no cover - only on a GPU machine
        return
    samples = parse_samples(scrape(base))
    assert samples["gpu_exporter_nvml_up"] == [({}, 0.0)]
    assert "gpu_up" not in samples
    assert get(base + "/healthz")[0] == 200
    status, body, _ = get(base + "/readyz")  # Ready, so Service-endpoint scrapes collect nvml_up 0
    assert status == 200 and body.startswith(b"ready: nvml down: ") and b"NVMLError_LibraryNotFound" in body


def test_nvml_appearing_later_is_picked_up(start_exporter: StartExporter) -> None:
    base, _, _ = start_exporter("""
gpus: [{model: H100, count: 2}]
faults: [{type: nvml_unavailable, error: DriverNotLoaded, until: 1.0}]
""")
    assert parse_samples(scrape(base))["gpu_exporter_nvml_up"] == [({}, 0.0)]
    wait_for(lambda: parse_samples(scrape(base))["gpu_exporter_nvml_up"] == [({}, 1.0)], timeout=15)
    assert len(parse_samples(scrape(base))["gpu_up"]) == 2


def test_gpu_lost_while_serving(start_exporter: StartExporter) -> None:
    base, _, sim = start_exporter(gpus=3)
    assert [v for _, v in parse_samples(scrape(base))["gpu_up"]] == [1.0, 1.0, 1.0]
    sim.set_lost(2, True)
    samples = parse_samples(scrape(base))
    assert {labels["gpu"]: value for labels, value in samples["gpu_up"]} == {"0": 1.0, "1": 1.0, "2": 0.0}
    assert {labels["gpu"] for labels, _ in samples["gpu_utilization_ratio"]} == {"0", "1"}
    sim.set_lost(2, False)
    assert [v for _, v in parse_samples(scrape(base))["gpu_up"]] == [1.0, 1.0, 1.0]


def test_concurrent_scrapes_are_all_complete(start_exporter: StartExporter) -> None:
    settings = SourceSettings(min_interval=60.0, init_retry_interval=0.05, pcie_interval=0.05)
    base, app, _ = start_exporter(gpus=8, settings=settings)
    bodies: list[str] = []
    errors: list[BaseException] = []

    def worker() -> None:
        try:
            for _ in range(10):
                bodies.append(scrape(base))
        except BaseException as exc:  # reported below, not swallowed
            errors.append(exc)

    threads = [threading.Thread(target=worker) for _ in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert not errors and len(bodies) == 60
    for body in bodies:
        assert len(parse_samples(body)["gpu_up"]) == 8
    assert app.source.sweeps == 1  # 60 scrapes inside the minimum interval share one NVML sweep


class _Readiness:
    def __init__(self, attempted: bool) -> None:
        self.init_attempted = attempted
        self.ready = False
        self.nvml_error = "NVML init failed: no driver"


def _server(address: str = "127.0.0.1", attempted: bool = True, timeout: float = 30.0) -> ExporterServer:
    server = ExporterServer(address, 0, CollectorRegistry(), _Readiness(attempted),
                            handler_timeout_seconds=timeout)
    server.start()
    return server


def test_readyz_waits_only_for_the_first_nvml_attempt() -> None:
    readiness = _Readiness(attempted=False)
    server = ExporterServer("127.0.0.1", 0, CollectorRegistry(), readiness)
    server.start()
    try:
        base = f"http://127.0.0.1:{server.port}"
        assert get(base + "/readyz")[0] == 503
        readiness.init_attempted = True
        assert get(base + "/readyz")[:2] == (200, b"ready: nvml down: NVML init failed: no driver\n")
        assert get(base + "/healthz")[0] == 200
    finally:
        server.shutdown()


@pytest.mark.parametrize("address", ["::1", "::"])
def test_ipv6_listen_addresses(address: str) -> None:
    server = _server(address)
    try:
        assert get(f"http://[::1]:{server.port}/healthz")[:2] == (200, b"ok\n")
    finally:
        server.shutdown()


def test_an_idle_keep_alive_connection_is_closed_after_the_handler_timeout() -> None:
    server = _server(timeout=0.3)
    try:
        with socket.create_connection(("127.0.0.1", server.port), timeout=10) as client:
            client.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
            first = client.recv(4096)
            assert first.startswith(b"HTTP/1.1 200")
            rest = b""  # then idle: the server must hang up by itself (recv returns b"" on close)
            while chunk := client.recv(4096):
                rest += chunk
            assert rest == b"" or rest.endswith(b"ok\n")
    finally:
        server.shutdown()


def test_scrape_failures_are_counted_exactly_under_concurrency() -> None:
    class Broken:
        def collect(self) -> list[object]:
            raise RuntimeError("collector bug")

    registry = CollectorRegistry()
    registry.register(Broken())  # type: ignore[arg-type]
    server = ExporterServer("127.0.0.1", 0, registry, _Readiness(True))
    server.start()
    try:
        url = f"http://127.0.0.1:{server.port}/metrics"
        threads = [threading.Thread(target=lambda: [get(url) for _ in range(10)]) for _ in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(60)
        assert server.scrape_failures == 80
    finally:
        server.shutdown()
