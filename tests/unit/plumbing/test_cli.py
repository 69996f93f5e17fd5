"""The argparse types and stop-signal handling every command line shares (plumbing/cli.py)."""

from __future__ import annotations

import argparse
import signal
import threading
from collections.abc import Iterator

import pytest

from plumbing.cli import EXIT_USAGE, duration, fail, install_stop_handlers, parse_duration, port_number


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("15s", 15.0), ("500ms", 0.5), ("1m", 60.0), ("2h", 7200.0), ("7", 7.0), ("1.5s", 1.5), (" 2m ", 120.0)],
)
def test_parse_duration(text: str, seconds: float) -> None:
    assert parse_duration(text) == seconds
    assert duration()(text) == seconds


@pytest.mark.parametrize("text", ["", "0s", "-1s", "15 minutes", "s", "1d"])
def test_parse_duration_rejects(text: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError, match="expected a positive duration"):
        parse_duration(text)


@pytest.mark.parametrize(
    ("bounds", "text", "ok"),
    [
        ({}, "0", True),
        ({"above": True}, "0s", False),
        ({"high": 3600.0}, "1h", True),
        ({"high": 3600.0}, "61m", False),
        ({"low": 0.2}, "100ms", False),
        ({"low": 0.2}, "200ms", True),
        ({}, "-1", False),
    ],
    ids=lambda v: str(v),
)
def test_bounded_duration(bounds: dict[str, float], text: str, ok: bool) -> None:
    convert = duration(**bounds)  # type: ignore[arg-type]
    if ok:
        assert convert(text) >= 0
    else:
        with pytest.raises(argparse.ArgumentTypeError, match=r"expected a duration like 15s.*\(got "):
            convert(text)


def test_bounded_duration_names_the_range() -> None:
    with pytest.raises(argparse.ArgumentTypeError) as caught:
        duration(0.0, 3600.0, above=True)("2h")
    assert str(caught.value) == "expected a duration like 15s, 500ms or 1m, in (0s, 3600s] (got '2h')"


@pytest.mark.parametrize(("text", "port"), [("0", 0), ("9400", 9400), ("65535", 65535)])
def test_port_number(text: str, port: int) -> None:
    assert port_number(text) == port


@pytest.mark.parametrize("text", ["65536", "-1", "http", ""])
def test_port_number_rejects(text: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError, match="expected a port number from 0 to 65535"):
        port_number(text)


@pytest.fixture
def restore_handlers() -> Iterator[None]:
    saved = {s: signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)}
    yield
    for signum, handler in saved.items():
        signal.signal(signum, handler)


@pytest.mark.timeout(10)
@pytest.mark.usefixtures("restore_handlers")
def test_the_callback_runs_before_stop_is_set_and_only_for_the_signals_named() -> None:
    stop = threading.Event()
    seen: list[tuple[int, bool]] = []
    install_stop_handlers(stop, lambda signum: seen.append((signum, stop.is_set())),
                          signals=(signal.SIGTERM, signal.SIGHUP))
    handler = signal.getsignal(signal.SIGHUP)
    assert callable(handler) and signal.getsignal(signal.SIGINT) is not handler
    handler(signal.SIGHUP, None)
    assert stop.wait(5)
    assert seen == [(signal.SIGHUP, False)]


@pytest.mark.parametrize(("prog", "message", "shown"), [
    ("gpu-autoscaler run", "invalid rules file, not starting:\nr.yaml:3: x",
     "gpu-autoscaler run: invalid rules file, not starting:\nr.yaml:3: x\n"),
    (None, "r.yaml:3: rules[0].name: expected a name", "r.yaml:3: rules[0].name: expected a name\n"),
], ids=["prefixed", "already-named"])
def test_fail_prints_one_error_on_stderr_and_returns_the_usage_status(
    capsys: pytest.CaptureFixture[str], prog: str | None, message: str, shown: str
) -> None:
    assert fail(prog, message) == EXIT_USAGE == 2
    out, err = capsys.readouterr()
    assert (out, err) == ("", shown)


@pytest.mark.parametrize("text", ["99999999999999999h", "25h", "86401", "9" * 400])
def test_durations_that_would_overflow_a_wait_are_refused(text: str) -> None:
    """`run --interval` of 10^17 hours once crashed the sync loop's first wait (OverflowError)."""
    with pytest.raises(argparse.ArgumentTypeError, match="at most 24h"):
        parse_duration(text)
    with pytest.raises(argparse.ArgumentTypeError):
        duration(0.0, 86400.0)(text)


def test_a_duration_without_upper_bound_is_still_finite() -> None:
    with pytest.raises(argparse.ArgumentTypeError):
        duration(0.0)("9" * 400)  # float() of 400 digits is inf
