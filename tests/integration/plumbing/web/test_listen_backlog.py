"""The listen backlog of both processes' server is the system's maximum, read back from the kernel: `ss -ltn`
shows a listening socket's backlog as its Send-Q (iproute2, installed by scripts/setup.sh)."""

from __future__ import annotations

import shutil
import socket
import subprocess
from collections.abc import Callable, Iterator

import pytest
from prometheus_client import CollectorRegistry

from autoscaler.controller.http_endpoint import MetricsServer
from exporter.serving.http_endpoint import ExporterServer
from plumbing.web.server import Answer, HttpServer, Route

pytestmark = pytest.mark.integration


class _Ready:
    ready = True
    init_attempted = True
    nvml_error = None


def _plain() -> tuple[int, Callable[[], None]]:
    server = HttpServer("127.0.0.1", 0, {"/": Route(lambda _: Answer(200, b"ok\n"))})
    server.start()
    return server.port, server.shutdown


def _exporter() -> tuple[int, Callable[[], None]]:
    server = ExporterServer("127.0.0.1", 0, CollectorRegistry(), _Ready())
    server.start()
    return server.port, server.shutdown


def _controller() -> tuple[int, Callable[[], None]]:
    server = MetricsServer(lambda: b"", lambda: (True, "ok"), 0, host="127.0.0.1").start()
    return server.port, server.stop


@pytest.fixture(params=[_plain, _exporter, _controller], ids=["server", "exporter", "controller"])
def listening(request: pytest.FixtureRequest) -> Iterator[int]:
    port, stop = request.param()
    try:
        yield port
    finally:
        stop()


def listen_backlog(port: int) -> int:
    """The Send-Q column of the one listening TCP socket on `port`: its backlog, as the kernel keeps it."""
    ss = shutil.which("ss")
    assert ss is not None, "ss (iproute2) is missing: run scripts/setup.sh --for-tests"
    out = subprocess.run([ss, "-ltnH", f"sport = :{port}"], capture_output=True, text=True, check=True,
                         timeout=30).stdout
    rows = [line.split() for line in out.splitlines() if line.strip()]
    assert len(rows) == 1, out
    return int(rows[0][2])  # State Recv-Q Send-Q Local Peer


def test_the_backlog_is_the_systems_maximum(listening: int) -> None:
    """Compared with a socket of our own listening with `socket.SOMAXCONN`: the kernel caps both at its
    `net.core.somaxconn` (4096 by default; 128 before Linux 5.4)."""
    with socket.socket() as reference:
        reference.bind(("127.0.0.1", 0))
        reference.listen(socket.SOMAXCONN)
        system_maximum = listen_backlog(reference.getsockname()[1])
    assert listen_backlog(listening) == system_maximum
