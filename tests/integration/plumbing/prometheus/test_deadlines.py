"""A deadline on the whole exchange, not on each read: a server on 127.0.0.1 that sends its answer one byte at
a time (tests/drip.py: in the status line, the headers or the body, at generated points and paces) never holds
the controller's queries, `tune`'s range queries or `gpu-fleet` past their timeout, and leaves no thread
behind that would keep a finished process alive.

The bound asserted is a hang guard (the server would drip for 60 s), not a speed."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import pytest
from hypothesis import HealthCheck, given, settings

from fleet.errors import Unreachable
from fleet.querying.prom import FleetPrometheus
from plumbing.prometheus.config import endpoint_from_url
from plumbing.prometheus.range_query import RangeQueryError, RangeSettings, query_range
from plumbing.prometheus.runner import PromQLRunner, PromQLSettings
from plumbing.prometheus.session import EndpointSession
from tests.drip import ANSWER, dripping, drips
from tests.support import wait_for

pytestmark = pytest.mark.integration

TIMEOUT = 0.6
HANG_GUARD = 8.0


def bounded(call: Callable[[], object]) -> tuple[object, float]:
    began = time.monotonic()
    result = call()
    return result, time.monotonic() - began


def no_new_threads(before: set[threading.Thread]) -> None:
    """Threads this exchange started are daemons or end within a few seconds (a client's pool finishing
    the cut exchange): none is left blocked to keep a finished process alive."""
    def lasting() -> list[threading.Thread]:
        return [t for t in threading.enumerate() if t not in before and not t.daemon and t.is_alive()]

    wait_for(lambda: not lasting(), timeout=5, what="the clients' worker threads to end")


DRIPS = drips(TIMEOUT)
SETTINGS = settings(max_examples=6, deadline=None,
                    suppress_health_check=[HealthCheck.function_scoped_fixture])


@SETTINGS
@given(DRIPS)
def test_the_controllers_query_is_a_timeout_at_its_query_timeout(drip: tuple[int, float]) -> None:
    start_at, pace = drip
    before = set(threading.enumerate())
    with dripping(start_at, pace) as url:
        runner = PromQLRunner(PromQLSettings(url, query_timeout=TIMEOUT, budget=5.0, max_attempts=1))
        try:
            results, took = bounded(lambda: runner.run_queries(["up"]))
        finally:
            runner.close()
    assert isinstance(results, dict)
    result = results["up"]
    assert (result.value, result.error_reason) == (None, "Timeout"), result
    assert f"within {TIMEOUT:.3g} s" in (result.error or "") or "in time" in (result.error or "")
    assert took < HANG_GUARD
    no_new_threads(before)


@SETTINGS
@given(DRIPS)
def test_tunes_range_query_is_one_error_at_its_timeout(drip: tuple[int, float]) -> None:
    start_at, pace = drip
    before = set(threading.enumerate())
    with dripping(start_at, pace) as url:
        session = EndpointSession(endpoint_from_url(url))
        try:
            with pytest.raises(RangeQueryError) as refused:
                bounded(lambda: query_range(session, "up", 0.0, 60.0, 15.0, RangeSettings(timeout=TIMEOUT)))
        finally:
            session.close()
    assert "within" in str(refused.value) or "in time" in str(refused.value)
    no_new_threads(before)


@SETTINGS
@given(DRIPS)
def test_gpu_fleet_is_unreachable_at_its_timeout(drip: tuple[int, float]) -> None:
    start_at, pace = drip
    before = set(threading.enumerate())
    with dripping(start_at, pace) as url, FleetPrometheus(endpoint_from_url(url), timeout=TIMEOUT) as client:
        began = time.monotonic()
        with pytest.raises(Unreachable):
            client.vector("up")
        assert time.monotonic() - began < HANG_GUARD
    no_new_threads(before)


def test_an_answer_that_arrives_in_time_is_read_whole() -> None:
    """The deadline cuts only what overruns it: the same server at full speed answers."""
    with dripping(len(ANSWER), 0.0) as url:
        runner = PromQLRunner(PromQLSettings(url, query_timeout=2.0, budget=5.0, max_attempts=1))
        try:
            assert runner.run_queries(["up"])["up"].value == 1.0
        finally:
            runner.close()
