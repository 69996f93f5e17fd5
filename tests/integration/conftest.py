"""Fixtures shared by every integration test package, each started only when a test asks for it: a real
Prometheus serving days of backfilled history (tests/history.py, once per session), a real Prometheus over a
target each test sets (tests/prom.py, once per package), the fake Kubernetes API (tests/fake_kube/) and a
server that never answers."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests import prom as prom_helpers
from tests.fake_kube.apiserver import FakeApiServer
from tests.history import BackfilledPrometheus, backfilled_prometheus_fixture
from tests.prom import Prom


@pytest.fixture(scope="session")
def backfilled_prometheus(tmp_path_factory: pytest.TempPathFactory, worker_id: str,
                          ) -> Iterator[BackfilledPrometheus]:
    """Prometheus on 127.0.0.1 with 3 days of 3 nodes x 4 GPUs and the `embed` service (tests/history.py);
    its blocks are written once for every pytest-xdist worker of the run (their base temporary directories
    share a parent, the run's own), and each worker serves a copy."""
    run = tmp_path_factory.getbasetemp()
    shared = run if worker_id == "master" else run.parent
    yield from backfilled_prometheus_fixture(shared / "shared-history")


@pytest.fixture(scope="package")
def prom() -> Iterator[Prom]:
    yield from prom_helpers.running_prom()


@pytest.fixture
def apiserver() -> Iterator[FakeApiServer]:
    server = FakeApiServer().start()
    yield server
    server.stop()


@pytest.fixture
def silent_server() -> Iterator[int]:
    """Accepts connections and never answers: a Prometheus hanging on a heavy query."""
    yield from prom_helpers.silent_server()
