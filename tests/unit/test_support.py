"""tests/support.py itself: the wait is bounded and says what it waited for; stopped processes are gone."""

from __future__ import annotations

import itertools
import signal
import subprocess
import sys
import time

import pytest

from tests.support import LineProcess, reap, start_process, stop_process, wait_for


def test_wait_for_returns_the_first_truthy_answer() -> None:
    answers = itertools.count()
    assert wait_for(lambda: next(answers) >= 3 and "ready", timeout=5, what="three polls") == "ready"


def test_wait_for_fails_in_time_naming_what_and_the_last_answer() -> None:
    started = time.monotonic()
    with pytest.raises(AssertionError, match=r"timed out after 0.2s waiting for the door \(last: 0\)"):
        wait_for(lambda: 0, timeout=0.2, what="the door")
    assert time.monotonic() - started < 2.0


def test_wait_for_without_what_names_the_condition_by_its_source() -> None:
    with pytest.raises(AssertionError, match="never_true"):
        wait_for(lambda: "never_true" == "", timeout=0.05)


def sleeper(on_sigterm: str) -> subprocess.Popen[str]:
    """A child that installs `on_sigterm` as its SIGTERM handler, says `up` on stderr, then sleeps."""
    script = ("import signal, sys, time\n"
              f"signal.signal(signal.SIGTERM, {on_sigterm})\n"
              "sys.stderr.write('up\\n'); sys.stderr.flush()\n"
              "time.sleep(60)\n")
    proc = start_process([sys.executable, "-c", script])
    assert proc.stderr is not None
    assert proc.stderr.readline() == "up\n"
    return proc


def test_stop_process_sends_sigterm_first_and_reap_returns_stderr() -> None:
    proc = sleeper("lambda *_: (sys.stderr.write('got TERM\\n'), sys.exit(3))")
    assert stop_process(proc, timeout=10) == 3
    assert reap(proc) == "got TERM\n"


def test_stop_process_kills_what_ignores_sigterm() -> None:
    proc = sleeper("signal.SIG_IGN")
    assert stop_process(proc, timeout=0.5) == -signal.SIGKILL
    reap(proc)


def test_line_process_follows_lines_and_returns_the_whole_output() -> None:
    child = LineProcess([sys.executable, "-c", "import sys; print('one'); print('two', file=sys.stderr)"])
    assert child.wait_for_line(r"^one", timeout=10) == "one\n"
    code, output = child.finish(timeout=10)
    assert code == 0 and output.splitlines() == ["one", "two"]


def test_line_process_that_hangs_fails_with_its_output_and_is_gone() -> None:
    child = LineProcess([sys.executable, "-c", "import time; print('started', flush=True); time.sleep(60)"])
    child.wait_for_line("started", timeout=10)
    with pytest.raises(AssertionError, match=r"did not exit within 0.2 s:\nstarted"):
        child.finish(timeout=0.2, grace=5)
    assert child.proc.poll() is not None
