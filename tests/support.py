"""What tests that wait or run processes share: one bounded polling wait and one process harness.

Every wait polls a condition against a deadline (never a bare sleep) and fails naming what it waited for and
the last answer. Every process a test starts is stopped the same way: SIGTERM, then kill, then reaped with its
stderr read, so no test leaves a process behind and a failure can show what the process said.
"""

from __future__ import annotations

import inspect
import signal
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import IO, TypeVar

T = TypeVar("T")


def describe(condition: Callable[[], object]) -> str:
    """A readable name for a condition: its function name, or a lambda's source line."""
    name = getattr(condition, "__name__", "")
    if name and name != "<lambda>":
        return name
    try:
        return inspect.getsource(condition).strip()
    except (OSError, TypeError):
        return repr(condition)


def wait_for(condition: Callable[[], T], timeout: float = 10.0, what: str | None = None,
             interval: float = 0.02) -> T:
    """Poll `condition` until it returns something truthy and return that; fail after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        last = condition()
        if last:
            return last
        if time.monotonic() >= deadline:
            break
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout:g}s waiting for {what or describe(condition)} "
                         f"(last: {last!r})")


def start_process(argv: Sequence[str], *, stdout: int | IO[str] | None = subprocess.DEVNULL,
                  env: Mapping[str, str] | None = None, cwd: Path | None = None) -> subprocess.Popen[str]:
    """Start `argv` with stderr captured as text (read it with `reap`)."""
    return subprocess.Popen(list(argv), stdout=stdout, stderr=subprocess.PIPE, text=True,
                            env=None if env is None else dict(env), cwd=cwd)


def stop_process(proc: subprocess.Popen[str], timeout: float = 10.0) -> int:
    """SIGTERM, wait up to `timeout` seconds, then kill: the exit code of a process that is gone."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            return proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
    return proc.wait(timeout=timeout)


def reap(proc: subprocess.Popen[str], timeout: float = 10.0) -> str:
    """Kill `proc` if it still runs, wait for it, and return its stderr (empty when not captured)."""
    if proc.poll() is None:
        proc.kill()
    _, stderr = proc.communicate(timeout=timeout)
    return stderr or ""
