"""SIGTERM while a sync waits on a Prometheus that drips its answer (tests/drip.py): `gpu-autoscaler run`
stops within a few seconds, its query failed at the query timeout (at most 5 s), with no traceback, and
exits 0. The bound asserted is a hang guard: without the exchange's deadline the process waited as long as
the server dripped."""

from __future__ import annotations

import signal
import time
from pathlib import Path

import pytest

from tests.drip import dripping
from tests.rules import minimal_rules
from tests.support import CLI, LineProcess

pytestmark = pytest.mark.integration

HANG_GUARD = 15.0


def test_sigterm_during_a_dripping_query_stops_the_controller(tmp_path: Path) -> None:
    rules = tmp_path / "rules.yaml"
    rules.write_text(minimal_rules("a", query="up"))
    with dripping(0, 0.5) as url:
        process = LineProcess([CLI, "run", "--rules", str(rules), "--prometheus", url, "--dry-run",
                               "--assume-replicas", "2", "--interval", "2m", "--metrics-port", "0"])
        process.wait_for_line("gpu-autoscaler running", timeout=30)  # its handlers are in place
        time.sleep(1.0)  # the first sync's query is being dripped
        began = time.monotonic()
        process.proc.send_signal(signal.SIGTERM)
        code, output = process.finish(timeout=HANG_GUARD)
        took = time.monotonic() - began
    assert code == 0, output[-2000:]
    assert "received SIGTERM" in output and "Traceback" not in output, output[-2000:]
    assert took < HANG_GUARD
