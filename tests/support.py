"""What tests that wait or run processes share: one bounded polling wait and one process harness.

Every wait polls a condition against a deadline (never a bare sleep) and fails naming what it waited for and
the last answer. Every process a test starts is stopped the same way: SIGTERM, then kill, then reaped with its
stderr read, so no test leaves a process behind and a failure can show what the process said. A process
whose output a test follows line by line (the demo) runs as a `LineProcess`, stopped the same way, with a
last SIGABRT so a hung Python child prints its threads' stacks (run it with `-X faulthandler`).
"""

from __future__ import annotations

import contextlib
import inspect
import queue
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import IO, TypeVar

T = TypeVar("T")

CLI = str(Path(sys.executable).parent / "gpu-autoscaler")
"""The installed `gpu-autoscaler` console script of this virtualenv."""


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


class LineProcess:
    """A subprocess whose stdout and stderr, merged, are collected line by line by a thread as they come."""

    def __init__(self, argv: Sequence[str], cwd: Path | None = None) -> None:
        self.proc = subprocess.Popen(list(argv), cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                     text=True)
        self.lines: queue.Queue[str] = queue.Queue()
        self.seen: list[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put(line)

    def wait_for_line(self, pattern: str, timeout: float) -> str:
        """The first new line matching `pattern` within `timeout` seconds."""
        deadline = time.monotonic() + timeout
        while (remaining := deadline - time.monotonic()) > 0:
            try:
                line = self.lines.get(timeout=remaining)
            except queue.Empty:
                break
            self.seen.append(line)
            if re.search(pattern, line):
                return line
        raise AssertionError(f"no line matching {pattern!r} in {timeout}s:\n{''.join(self.seen)}")

    def finish(self, timeout: float, grace: float = 20.0) -> tuple[int, str]:
        """Exit code and the whole output. A process that does not end in time fails the test with its
        output, after SIGTERM (`grace` seconds to stop what it started), then SIGABRT, then kill."""
        hung = None
        try:
            code = self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            hung = f"the process did not exit within {timeout:g} s"
            self.proc.terminate()
            try:
                self.proc.wait(timeout=grace)
            except subprocess.TimeoutExpired:
                hung += f"; nor within {grace:g} s of SIGTERM (thread stacks below, if it dumps them)"
                self.proc.send_signal(signal.SIGABRT)
                try:
                    self.proc.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    self.proc.kill()
                    self.proc.wait(timeout=10)
            code = self.proc.returncode
        finally:
            self._reader.join(timeout=10)
            assert self.proc.stdout is not None
            self.proc.stdout.close()
        while not self.lines.empty():
            self.seen.append(self.lines.get())
        output = "".join(self.seen)
        if hung is not None:
            raise AssertionError(f"{hung}:\n{output}")
        return code, output


class QuietHandler(BaseHTTPRequestHandler):
    """The handler of a test's HTTP server: `answer` sends a whole body with its length, and requests are not
    logged to stderr."""

    def answer(self, status: int, body: bytes, content_type: str | None = "application/json") -> None:
        self.send_response(status)
        if content_type is not None:
            self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        pass


@contextlib.contextmanager
def http_server(handler: type[BaseHTTPRequestHandler]) -> Iterator[str]:
    """A real HTTP server on 127.0.0.1 (a free port) answering with `handler` in a thread, shut down on exit;
    yields its base URL, `http://127.0.0.1:PORT`."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)
