"""A range answer whose samples lie far outside the window asked for (timestamps of ±1e300, a year 9999 and
after): `gpu-fleet report` and `export` drop them and print what the answer without them gives (an
`OverflowError: timestamp out of range for platform time_t` traceback before); a timestamp that is no number
is a malformed answer, exit 2."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from tests.big_answers import report_server
from tests.measure import run_captured

pytestmark = pytest.mark.integration

FLEET = str(Path(sys.executable).parent / "gpu-fleet")
WINDOW = ("--until", "1700000000", "--since", "1h", "--query-timeout", "30s")
OUTSIDE = ('[1e300, "0.5"]', '[-1e300, "0.5"]', '[253402300800, "0.5"]', '[-62135596801, "0.5"]',
           '[1699996399, "0.5"]', '[1700000001, "0.9"]')


@pytest.mark.parametrize("command", [("report", "-o", "json", "--quiet"), ("report", "-o", "wide", "--quiet"),
                                     ("export", "-o", "csv")], ids=["report-json", "report-wide", "export"])
def test_samples_outside_the_window_are_dropped(command: tuple[str, ...]) -> None:
    outputs = []
    for extra in ((), OUTSIDE):
        with report_server(4, 4, extra=extra) as url:
            result = run_captured([FLEET, *command, *WINDOW, "--prometheus", url])
        assert result.returncode == 0, result.stderr[-2000:]
        outputs.append(result.stdout)
    clean, hostile = outputs
    assert hostile == clean and clean


@pytest.mark.parametrize("point", ['["1e300", "0.5"]', '[true, "0.5"]', '[null, "0.5"]', '[1700000000]'])
def test_a_timestamp_that_is_no_number_is_a_malformed_answer(point: str) -> None:
    with report_server(4, 4, extra=(point,)) as url:
        result = run_captured([FLEET, "report", "--quiet", *WINDOW, "--prometheus", url])
    assert result.returncode == 2 and result.stdout == "", result.output[-2000:]
    assert "malformed answer from Prometheus" in result.stderr and result.stderr.count("\n") == 1
