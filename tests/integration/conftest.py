"""Fixtures shared by every integration test package: a real Prometheus serving days of backfilled history
(tests/history.py), started once per session and only when a test asks for it."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.history import BackfilledPrometheus, backfilled_prometheus_fixture


@pytest.fixture(scope="session")
def backfilled_prometheus() -> Iterator[BackfilledPrometheus]:
    """Prometheus on 127.0.0.1 with 3 days of 3 nodes x 4 GPUs and the `embed` service (tests/history.py)."""
    yield from backfilled_prometheus_fixture()
