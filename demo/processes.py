"""Start real Prometheus and Alertmanager processes on 127.0.0.1 in a temp dir, and stop them.

Used by the demo and by the integration tests, so both run the Debian-packaged servers the same way: a free
port, a private data directory, a bounded wait for readiness, and a stop that never leaves a process behind.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import yaml

PROMETHEUS_BINARY = "prometheus"
PROMTOOL_BINARY = "promtool"
ALERTMANAGER_BINARIES = ("prometheus-alertmanager", "alertmanager")


PR_SET_PDEATHSIG = 1
"""prctl(2) option: the signal the kernel sends a child when the thread that forked it dies (Linux only)."""


class ProcessError(RuntimeError):
    """A server binary is missing, or did not become ready in time."""


def _die_with_parent() -> Callable[[], None] | None:
    """A preexec_fn making the child get SIGTERM when its parent dies (even by SIGKILL), or None where prctl
    is unavailable (not Linux). The servers run in their own session so a terminal's Ctrl-C reaches only the
    demo, which stops them in order; this covers the demo being killed or crashing without its cleanup.

    libc and prctl are looked up here, in the parent: the child only calls them between fork and exec.
    The kernel signals when the forking *thread* exits, so callers start servers from a long-lived thread
    (the demo and the test fixtures use the main thread).
    """
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        prctl = libc.prctl
    except (OSError, AttributeError):
        return None
    parent = os.getpid()

    def preexec() -> None:
        prctl(PR_SET_PDEATHSIG, int(signal.SIGTERM), 0, 0, 0)
        if os.getppid() != parent:  # the parent died before prctl took effect: no signal will come
            os.kill(os.getpid(), signal.SIGTERM)

    return preexec


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def find_binary(*names: str) -> str:
    for name in names:
        path = shutil.which(name)
        if path:
            return path
    raise ProcessError(
        f"none of {', '.join(names)} is on PATH; install the Debian package (scripts/setup.sh)")


def wait_http_ok(url: str, timeout: float, proc: subprocess.Popen[bytes] | None = None) -> None:
    """Poll `url` until it answers 200, the process exits, or `timeout` seconds pass."""
    deadline = time.monotonic() + timeout
    last_error = "no answer"
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise ProcessError(f"process exited with {proc.returncode} before {url} was ready")
        try:
            with urllib.request.urlopen(url, timeout=1) as resp:
                if resp.status == 200:
                    return
                last_error = f"HTTP {resp.status}"
        except (urllib.error.URLError, OSError) as exc:
            last_error = str(exc)
        time.sleep(0.05)
    raise ProcessError(f"{url} not ready after {timeout:.0f}s: {last_error}")


@dataclass
class ManagedProcess:
    """A started server: its URL, its working directory and the process handle."""

    name: str
    url: str
    workdir: Path
    proc: subprocess.Popen[bytes]
    log_path: Path
    _owned_dir: tempfile.TemporaryDirectory[str] | None = field(default=None, repr=False)

    def log_tail(self, lines: int = 30) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""

    def stop(self, timeout: float = 10.0) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=timeout)
        if self._owned_dir is not None:
            self._owned_dir.cleanup()
            self._owned_dir = None


def _start(
    name: str, argv: list[str], url: str, ready_path: str, workdir: Path,
    owned: tempfile.TemporaryDirectory[str] | None, timeout: float,
) -> ManagedProcess:
    log_path = workdir / f"{name}.log"
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, cwd=workdir,
                                start_new_session=True, preexec_fn=_die_with_parent())
    managed = ManagedProcess(name, url, workdir, proc, log_path, owned)
    try:
        wait_http_ok(url + ready_path, timeout, proc)
    except ProcessError as exc:
        tail = managed.log_tail()
        managed.stop()
        raise ProcessError(f"{name}: {exc}\n{tail}") from exc
    return managed


def start_prometheus(
    config: dict[str, object],
    rule_files: dict[str, str] | None = None,
    workdir: Path | None = None,
    extra_args: tuple[str, ...] = (),
    timeout: float = 30.0,
) -> ManagedProcess:
    """Start Prometheus with `config` (a prometheus.yml as a dict) and optional rule files {name: text}.

    Rule files are written next to the config and added to `rule_files`. The server listens on 127.0.0.1 on a
    free port with the lifecycle API enabled, so callers can reload it with POST /-/reload.
    """
    owned = None
    if workdir is None:
        owned = tempfile.TemporaryDirectory(prefix="gpu-autoscaler-prom-")
        workdir = Path(owned.name)
    workdir.mkdir(parents=True, exist_ok=True)
    config = dict(config)
    if rule_files:
        names = []
        for filename, text in rule_files.items():
            (workdir / filename).write_text(text)
            names.append(filename)
        config["rule_files"] = [*list(config.get("rule_files", []) or []), *names]  # type: ignore[arg-type]
    config_path = workdir / "prometheus.yml"
    config_path.write_text(yaml.safe_dump(config, sort_keys=False))
    port = free_port()
    argv = [
        find_binary(PROMETHEUS_BINARY),
        f"--config.file={config_path}",
        f"--storage.tsdb.path={workdir / 'data'}",
        f"--web.listen-address=127.0.0.1:{port}",
        "--web.enable-lifecycle",
        "--storage.tsdb.retention.time=1d",
        *extra_args,
    ]
    return _start("prometheus", argv, f"http://127.0.0.1:{port}", "/-/ready", workdir, owned, timeout)


def start_alertmanager(
    config: dict[str, object], workdir: Path | None = None, timeout: float = 30.0
) -> ManagedProcess:
    """Start Alertmanager with `config` (alertmanager.yml as a dict) on a free 127.0.0.1 port, unclustered."""
    owned = None
    if workdir is None:
        owned = tempfile.TemporaryDirectory(prefix="gpu-autoscaler-am-")
        workdir = Path(owned.name)
    workdir.mkdir(parents=True, exist_ok=True)
    config_path = workdir / "alertmanager.yml"
    config_path.write_text(yaml.safe_dump(config, sort_keys=False))
    port = free_port()
    argv = [
        find_binary(*ALERTMANAGER_BINARIES),
        f"--config.file={config_path}",
        f"--storage.path={workdir / 'am-data'}",
        f"--web.listen-address=127.0.0.1:{port}",
        "--cluster.listen-address=",
    ]
    return _start("alertmanager", argv, f"http://127.0.0.1:{port}", "/-/ready", workdir, owned, timeout)


@contextlib.contextmanager
def running(process: ManagedProcess) -> Iterator[ManagedProcess]:
    """Stop `process` when the block ends, however it ends."""
    try:
        yield process
    finally:
        process.stop()


def promtool(*args: str, stdin: str | None = None, timeout: float = 60.0) -> subprocess.CompletedProcess[str]:
    """Run promtool with `args`; the caller checks returncode and output."""
    return subprocess.run(
        [find_binary(PROMTOOL_BINARY), *args], input=stdin, capture_output=True, text=True, timeout=timeout,
        check=False,
    )
