"""`gpu-exporter` as a subprocess, shared by the CLI integration tests: run once, or serve until stopped."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from demo.processes import free_port, wait_http_ok
from tests.support import reap

EXPORTER = str(Path(sys.executable).parent / "gpu-exporter")


def run_exporter(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    """Run `gpu-exporter ARGS` to completion; the caller checks exit code and output."""
    return subprocess.run([EXPORTER, *args], capture_output=True, text=True, timeout=timeout, check=False)


def start_exporter(started: list[subprocess.Popen[str]], *args: str, ready_path: str = "/healthz",
                   env: dict[str, str] | None = None) -> tuple[str, subprocess.Popen[str]]:
    """Serve on a free 127.0.0.1 port until `ready_path` answers; the process is appended to `started`."""
    port = free_port()
    proc = subprocess.Popen([EXPORTER, "--address", "127.0.0.1", "--port", str(port), *args],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    started.append(proc)
    base = f"http://127.0.0.1:{port}"
    wait_http_ok(base + ready_path, timeout=30, proc=proc)  # type: ignore[arg-type]
    return base, proc


def stop_all(started: list[subprocess.Popen[str]]) -> None:
    """Kill what still runs and reap every process, so no test leaves an exporter behind."""
    for proc in started:
        reap(proc)
