"""The status API over a real http.server on 127.0.0.1, wired the way the exporter's server will wire it."""

from __future__ import annotations

import json
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from http.server import ThreadingHTTPServer
from urllib.parse import urlsplit

import pytest

from exporter.health.history import GpuHistory, Sample
from exporter.nvml.snapshots import DeviceSnapshot
from exporter.pods.podresources import DeviceHolder
from exporter.serving.status_api import GpuStatus, build_gpu_status, encode, handle, is_api_path
from tests.support import QuietHandler

pytestmark = pytest.mark.integration

GIB = 1024**3


def snapshot() -> list[GpuStatus]:
    return [
        build_gpu_status(
            DeviceSnapshot(index=i, uuid=f"GPU-{i}", name="NVIDIA H100 80GB HBM3", pci_bus_id="", up=True,
                           temperature_celsius=60.0 + 10 * i, utilization=0.25 * i,
                           memory_used_bytes=20 * i * GIB, memory_free_bytes=(80 - 20 * i) * GIB,
                           memory_total_bytes=80 * GIB, power_watts=100.0 + 100 * i),
            holders=(DeviceHolder("ml", f"trainer-{i}", "main", "nvidia.com/gpu", f"GPU-{i}"),),
        )
        for i in range(3)
    ]


@pytest.fixture
def base_url() -> Iterator[str]:
    history = GpuHistory()
    for second in range(0, 301, 30):
        history.record("GPU-2", Sample(1000.0 + second, 70 - second / 60, 50.0, 40.0))

    class Handler(QuietHandler):
        def do_GET(self) -> None:
            url = urlsplit(self.path)
            if not is_api_path(url.path):
                self.send_error(404)
                return
            status, body = handle(url.path, url.query, snapshot, history)
            self.answer(status, encode(body))

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(10)


def get(url: str) -> tuple[int, str, dict]:
    try:
        with urllib.request.urlopen(url, timeout=10) as response:
            return response.status, response.headers["Content-Type"], json.loads(response.read())
    except urllib.error.HTTPError as e:
        with e:
            return e.code, e.headers["Content-Type"], json.loads(e.read())


def test_list_one_and_trend_over_http(base_url: str) -> None:
    status, content_type, body = get(base_url + "/api/v1/gpus")
    assert (status, content_type) == (200, "application/json")
    assert [(g["index"], g["state"], g["holders"][0]["pod"]) for g in body["gpus"]] == [
        (0, "optimal", "trainer-0"),
        (1, "normal", "trainer-1"),
        (2, "throttled", "trainer-2"),
    ]
    status, _, one = get(base_url + "/api/v1/gpus/1")
    assert status == 200 and one == body["gpus"][1]

    status, _, trend = get(base_url + "/api/v1/gpus/2/trend?minutes=5")
    assert status == 200
    assert trend["samples"] == 11 and trend["trend"] == "falling"
    assert trend["temperature_celsius"]["slope_per_minute"] == pytest.approx(-1.0)


def test_errors_over_http(base_url: str) -> None:
    status, content_type, body = get(base_url + "/api/v1/gpus/9")
    assert (status, content_type, body["parameter"]) == (404, "application/json", "index")
    status, _, body = get(base_url + "/api/v1/gpus/0/trend?minutes=-1")
    assert status == 400 and body["parameter"] == "minutes"
