"""Run a CLI in this process through its entry point (run_in_process), or as a child process and measure it
(run_measured): exit code, output, wall time and peak memory (rusage).

`os.wait4` returns the child's own rusage, whose `ru_maxrss` (KiB on Linux) is the peak resident memory of
that process. But Linux carries the high-water mark of the memory a process replaces at exec, and a child
forked from this test process starts from pytest's own (hundreds of MiB after a long run). So the CLI is
started by a small Python launcher: the launcher inherits pytest's mark, the CLI inherits only the launcher's
(~10 MiB, less than the CLI itself), and the launcher reports the CLI's exit status, time and rusage in a
file. The wait is bounded: a CLI that hangs is killed, with its launcher, at `timeout`.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

_LAUNCHER = """\
import json, os, subprocess, sys, time
start = time.monotonic()
child = subprocess.Popen(sys.argv[2:])
_, status, usage = os.wait4(child.pid, 0)
child.returncode = os.waitstatus_to_exitcode(status)
with open(sys.argv[1], "w") as report:
    json.dump({"returncode": child.returncode, "seconds": time.monotonic() - start,
               "max_rss_kib": usage.ru_maxrss}, report)
"""


@dataclass(frozen=True)
class Measured:
    returncode: int
    stdout: str
    stderr: str
    seconds: float
    max_rss_mib: float

    @property
    def output(self) -> str:
        return self.stdout + self.stderr


Run = Callable[..., Measured]
"""A CLI runner fixture: its arguments in, the exit code and output out."""


def run_measured(argv: list[str], cwd: Path, timeout: float = 30.0) -> Measured:
    """Run `argv` to completion (killed after `timeout` s); outputs go through files, never a full pipe."""
    with tempfile.TemporaryDirectory() as scratch:
        report = Path(scratch) / "report.json"
        with open(Path(scratch) / "out", "w+b") as out, open(Path(scratch) / "err", "w+b") as err:
            launcher = subprocess.Popen([sys.executable, "-c", _LAUNCHER, str(report), *argv], cwd=cwd,
                                        stdin=subprocess.DEVNULL, stdout=out, stderr=err,
                                        start_new_session=True)
            try:
                launcher.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                os.killpg(launcher.pid, signal.SIGKILL)  # the launcher and the CLI: one session
                launcher.wait(timeout=10)
                raise AssertionError(f"{argv[:2]} still running after {timeout:g} s") from None
            out.seek(0)
            err.seek(0)
            stdout, stderr = out.read().decode(errors="replace"), err.read().decode(errors="replace")
        assert launcher.returncode == 0, f"the launcher failed: {stderr[-2000:]}"
        measured = json.loads(report.read_text())
    return Measured(measured["returncode"], stdout, stderr, measured["seconds"],
                    measured["max_rss_kib"] / 1024)


def _entry_point(script: str) -> Callable[[list[str]], int]:
    """The function the console script `script` calls (pyproject's [project.scripts])."""
    name = Path(script).name
    if name == "gpu-autoscaler":
        from autoscaler.cli.main import main as autoscaler_main

        return lambda argv: autoscaler_main(argv)
    if name == "gpu-exporter":
        from exporter.cli import main as exporter_main

        return lambda argv: exporter_main(argv)
    if name == "gpu-fleet":
        from fleet.cli import main as fleet_main

        return lambda argv: fleet_main(argv)
    raise ValueError(f"no entry point known for {script}")


def _exit_code(argv: list[str]) -> int:
    """The exit code of the script `argv[0]` run here with `argv[1:]`, as its console script would give it."""
    try:
        return _entry_point(argv[0])(argv[1:])
    except SystemExit as exc:  # argparse's usage errors
        return exc.code if isinstance(exc.code, int) else 2


def run_captured(argv: list[str]) -> Measured:
    """`argv` through the script's own `main`, here, its output captured in memory: for a fixture that has
    no `capsys` (one shared by a module's tests). The command must not need a real file descriptor."""
    out, err = io.StringIO(), io.StringIO()
    start = time.monotonic()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = _exit_code(argv)
    return Measured(code, out.getvalue(), err.getvalue(), time.monotonic() - start, 0.0)


def run_in_process(argv: list[str], capsys: pytest.CaptureFixture[str]) -> Measured:
    """`argv` (a console script and its arguments) through the script's own `main`, here: the exit code and
    what it printed. No memory figure: this process's peak is pytest's."""
    capsys.readouterr()
    start = time.monotonic()
    code = _exit_code(argv)
    seconds = time.monotonic() - start
    out, err = capsys.readouterr()
    return Measured(code, out, err, seconds, 0.0)
