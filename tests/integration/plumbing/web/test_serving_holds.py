"""Serving that holds, with bounded loops on 127.0.0.1, against the real exporter server (simulated NVML) and
the controller's server: while 200 clients send their request head one byte a second and 200 idle connections
are held, a well-behaved scrape answers in under 1 s; 200 concurrent scrapes are all answered; the thread
count does not grow with clients; the request-head deadline closes a trickling connection."""

from __future__ import annotations

import asyncio
import resource
import threading
import time
from collections.abc import Iterator

import pytest

from autoscaler.controller.http_endpoint import MetricsServer
from exporter.app import ExporterApp
from exporter.simulator.config import default_config
from exporter.simulator.nvml import SimulatedNvml
from exporter.source import SourceSettings
from plumbing.web.server import Answer, HttpServer, Route, ServerSettings

pytestmark = pytest.mark.integration

SLOW = IDLE = CONCURRENT = 200
HEAD = b"GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\n"  # never finished: no blank line


@pytest.fixture(autouse=True)
def enough_file_descriptors() -> Iterator[None]:
    """Client and server ends of ~600 connections live in this one process."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(max(soft, 4096), hard), hard))
    yield
    resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


async def scrape(port: int) -> tuple[bytes, float]:
    """One well-behaved GET /metrics (Connection: close): the answer and how long it took."""
    began = time.monotonic()
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(b"GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
    answer = await asyncio.wait_for(reader.read(-1), 30)
    writer.close()
    await writer.wait_closed()
    return answer, time.monotonic() - began


class ThreadPeak:
    """The most threads seen at once: the server's own (named after its ServerSettings.name) and the whole
    process's, with the names at the process's peak so that a failure says which threads they were."""

    def __init__(self, server_name: str) -> None:
        self.server_name = server_name
        self.server = 0
        self.process: list[str] = []
        self.look()

    def look(self) -> None:
        names = [thread.name for thread in threading.enumerate()]
        self.server = max(self.server, sum(1 for name in names if name.startswith(self.server_name)))
        if len(names) > len(self.process):
            self.process = names


async def abuse(port: int, seconds: int, peak: ThreadPeak) -> tuple[list[float], list[bytes], int]:
    """Hold IDLE idle and SLOW trickling connections for `seconds`, scraping once a second meanwhile; then
    200 concurrent scrapes. Returns (latencies, concurrent answers, slow ones still open); `peak` looks at
    the threads after every scrape."""
    idle = [await asyncio.open_connection("127.0.0.1", port) for _ in range(IDLE)]
    slow = [await asyncio.open_connection("127.0.0.1", port) for _ in range(SLOW)]
    latencies: list[float] = []
    for tick in range(seconds):
        for _, writer in slow:
            writer.write(HEAD[tick:tick + 1])
        answer, took = await scrape(port)
        assert answer.startswith(b"HTTP/1.1 200"), answer[:200]
        latencies.append(took)
        peak.look()
        await asyncio.sleep(max(0.0, 1.0 - took))
    answers = await asyncio.gather(*(scrape(port) for _ in range(CONCURRENT)))
    peak.look()
    still_open = sum(1 for reader, _ in slow if not reader.at_eof())
    for _, writer in idle + slow:
        writer.close()
    return latencies, [body for body, _ in answers], still_open


def check(port: int, expected: bytes, server_name: str) -> None:
    """The server's threads stay its loop thread and its worker pool. The whole process is checked loosely
    too (another test's thread may still be ending): a thread per client would be hundreds."""
    baseline = threading.active_count()
    peak = ThreadPeak(server_name)
    latencies, answers, still_open = asyncio.run(abuse(port, seconds=4, peak=peak))
    assert max(latencies) < 1.0, latencies
    assert still_open == SLOW  # the abuse really was in place while the scrapes ran (10 s head deadline)
    assert len(answers) == CONCURRENT
    assert all(a.startswith(b"HTTP/1.1 200") and expected in a for a in answers)
    assert peak.server <= 1 + ServerSettings().workers, peak.process
    assert len(peak.process) <= baseline + ServerSettings().workers + 8, peak.process


def test_the_exporter_holds() -> None:
    settings = SourceSettings(min_interval=0.5, init_retry_interval=0.05, pcie_interval=0.5)
    app = ExporterApp(SimulatedNvml(default_config(4), pcie_latency_seconds=0.0), "node", settings)
    server = app.start("127.0.0.1", 0)
    try:
        check(server.port, b"gpu_up{", "exporter-http")
    finally:
        app.stop()


def test_the_controller_endpoint_holds() -> None:
    server = MetricsServer(lambda: b"gpu_autoscaler_leader 1\n", lambda: (True, "ok"), 0, "127.0.0.1").start()
    try:
        check(server.port, b"gpu_autoscaler_leader 1", "metrics-http")
    finally:
        server.stop()


def serve(settings: ServerSettings) -> HttpServer:
    server = HttpServer("127.0.0.1", 0, {"/healthz": Route(lambda _: Answer(200, b"ok\n"))}, settings)
    server.start()
    return server


async def trickle(port: int, first: bytes, seconds: float) -> tuple[bytes, float]:
    """Send `first`, then HEAD one byte every 0.1 s until the server closes or `seconds` pass."""
    began = time.monotonic()
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(first)
    received = b""
    for byte in HEAD * 10:
        if time.monotonic() - began > seconds:
            break
        try:
            writer.write(bytes([byte]))
            await writer.drain()
            received += await asyncio.wait_for(reader.read(4096), 0.1)
        except TimeoutError:
            continue
        except ConnectionError:
            break
        if reader.at_eof():
            break
    writer.close()
    return received, time.monotonic() - began


@pytest.mark.parametrize("first", [b"", b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"],
                         ids=["new-connection", "keep-alive-next-request"])
def test_the_head_deadline_closes_a_trickling_connection(first: bytes) -> None:
    server = serve(ServerSettings(header_timeout=0.5, idle_timeout=30.0))
    try:
        received, took = asyncio.run(trickle(server.port, first, seconds=10))
        assert took < 5.0  # closed by the 0.5 s head deadline, not the 30 s idle timeout (or the loop's end)
        assert received.count(b"HTTP/1.1 200") == (1 if first else 0)
    finally:
        server.shutdown()


def test_a_slow_but_complete_head_within_the_deadline_is_answered() -> None:
    server = serve(ServerSettings(header_timeout=3.0))
    try:
        async def slowly() -> bytes:
            reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
            for byte in b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n":
                writer.write(bytes([byte]))
                await asyncio.sleep(0.01)
            answer = await asyncio.wait_for(reader.read(-1), 10)
            writer.close()
            return answer

        assert asyncio.run(slowly()).startswith(b"HTTP/1.1 200")
    finally:
        server.shutdown()


