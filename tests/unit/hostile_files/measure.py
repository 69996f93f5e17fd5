"""Run a CLI as a child process and measure it: exit code, output, wall time and peak memory (rusage).

`os.wait4` returns the child's own rusage, so `ru_maxrss` (KiB on Linux) is the peak resident memory of that
process alone, interpreter included. The wait is a bounded poll: a CLI that hangs is killed at `timeout`.
"""

from __future__ import annotations

import os
import signal
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path


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


def run_measured(argv: list[str], cwd: Path, timeout: float = 30.0) -> Measured:
    """Run `argv` to completion (killed after `timeout` s); outputs go through files, never a full pipe."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        start = time.monotonic()
        proc = subprocess.Popen(argv, cwd=cwd, stdin=subprocess.DEVNULL, stdout=out, stderr=err)
        deadline = start + timeout
        while True:
            pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
            if pid == proc.pid:
                break
            if time.monotonic() > deadline:
                os.kill(proc.pid, signal.SIGKILL)
                _, status, usage = os.wait4(proc.pid, 0)
                break
            time.sleep(0.005)
        seconds = time.monotonic() - start
        proc.returncode = os.waitstatus_to_exitcode(status)  # reaped here: Popen must not wait again
        out.seek(0)
        err.seek(0)
        stdout, stderr = out.read().decode(errors="replace"), err.read().decode(errors="replace")
        return Measured(proc.returncode, stdout, stderr, seconds, usage.ru_maxrss / 1024)
