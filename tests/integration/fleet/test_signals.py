"""A stop signal ends `gpu-fleet` while its queries hang: `status --watch`, `wait` and `estimate --then-wait`
against a Prometheus that reads the query and never answers (tests/drip.py `hanging`), with `--query-timeout
60s`, exit soon after SIGINT or SIGTERM with their documented status (watch 0, the waits 128 + the signal),
because the signal cuts the queries in flight (plumbing.deadline.Cancel), not at the query's timeout.

The bound asserted is a hang guard (without the cut the process waited the whole 60 s), not a speed; the
time measured is printed with `-s` and recorded in docs/fleet.md."""

from __future__ import annotations

import signal
import subprocess
import threading
import time

import pytest

from fleet.errors import Stopped
from fleet.placing.inventory import QUERIES
from fleet.querying.prom import FleetPrometheus
from plumbing.prometheus.config import endpoint_from_url
from tests.drip import hanging
from tests.integration.fleet.conftest import FLEET

pytestmark = pytest.mark.integration

HANG_GUARD = 10.0
"""Seconds a stopped process is given; it takes well under one (docs/fleet.md), the query 60."""
ASKED_WITHIN = 30.0
"""The first query reaches the server within this, on a busy machine too (interpreter start-up)."""

COMMANDS = {
    "status-watch": (["status", "--watch", "1"], {signal.SIGINT: 0, signal.SIGTERM: 0}),
    "wait": (["wait", "--gpus", "1", "--interval", "1s"], {signal.SIGINT: 130, signal.SIGTERM: 143}),
    "estimate-then-wait": (["estimate", "--params", "7B", "--gpu-memory", "80GiB", "--then-wait",
                            "--interval", "1s"], {signal.SIGINT: 130, signal.SIGTERM: 143}),
}


@pytest.mark.parametrize("stop", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
@pytest.mark.parametrize("command", list(COMMANDS))
def test_a_signal_stops_the_command_while_its_query_hangs(command: str, stop: signal.Signals) -> None:
    args, codes = COMMANDS[command]
    with hanging() as (url, asked):
        process = subprocess.Popen([FLEET, *args, "--prometheus", url, "--query-timeout", "60s"],
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            assert asked.wait(ASKED_WITHIN), "the command never queried"
            began = time.monotonic()
            process.send_signal(stop)
            _, err = process.communicate(timeout=HANG_GUARD)
            took = time.monotonic() - began
        finally:
            if process.poll() is None:
                process.kill()
                process.communicate()
    print(f"{command} {stop.name}: exit {process.returncode} {took:.2f} s after the signal")
    assert process.returncode == codes[stop], err[-2000:]
    assert "Traceback" not in err, err[-2000:]
    if codes[stop]:
        assert f"stopped by {stop.name}" in err


def test_cancel_cuts_every_query_of_a_look_in_flight() -> None:
    """The 13 concurrent queries of one `status` look, each hanging: one cancel ends them all, as Stopped."""
    with hanging() as (url, asked):
        client = FleetPrometheus(endpoint_from_url(url), timeout=60.0)
        outcome: list[BaseException] = []

        def look() -> None:
            try:
                client.vectors(QUERIES)
            except BaseException as exc:
                outcome.append(exc)

        thread = threading.Thread(target=look, daemon=True)
        thread.start()
        assert asked.wait(ASKED_WITHIN)
        client.cancel.cancel()
        thread.join(HANG_GUARD)
        client.close()
    assert not thread.is_alive(), "the look still waits on its queries"
    assert len(outcome) == 1 and isinstance(outcome[0], Stopped), outcome
