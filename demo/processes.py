"""Start real Prometheus and Alertmanager processes on 127.0.0.1 in a temp dir, and stop them.

Used by the demo and by the integration tests, so both run the Debian-packaged servers the same way: a free
port, a private data directory, a bounded wait for readiness, and a stop that never leaves a process behind.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import yaml

PROMETHEUS_BINARY = "prometheus"
PROMTOOL_BINARY = "promtool"
ALERTMANAGER_BINARIES = ("prometheus-alertmanager", "alertmanager")


class ProcessError(RuntimeError):
    """A server binary is missing, or did not become ready in time."""


class Stopped(Exception):
    """The caller's stop event was set (Ctrl-C) while a start-up wait was under way: not an error."""


_ONLY_WHILE_PARENT_LIVES = '[ "$PPID" = "$1" ] || exit 0; shift; exec "$@"'


def _dies_with_parent(argv: list[str]) -> list[str]:
    """`argv` run so the server gets SIGTERM when its parent dies, even by SIGKILL: setpriv(1) (util-linux,
    on every Debian) sets PR_SET_PDEATHSIG, which survives exec, and a shell then checks that the parent is
    still the one that forked it (had it died before setpriv ran, no signal would come) before it execs the
    server under the same pid. No Python runs between fork and exec, so this is safe whatever threads the
    caller has, unlike subprocess's preexec_fn. The servers run in their own session so a terminal's Ctrl-C
    reaches only the demo, which stops them in order; this covers the demo being killed or crashing.

    The kernel signals when the forking *thread* exits, so callers start servers from a long-lived thread (the
    demo and the test fixtures use the main thread). Without setpriv (not Linux), `argv` unchanged: the
    servers are then stopped by their caller's cleanup only.
    """
    setpriv, shell = shutil.which("setpriv"), shutil.which("sh")
    if not sys.platform.startswith("linux") or setpriv is None or shell is None:
        return argv
    return [setpriv, "--pdeathsig", "TERM", "--", shell, "-c", _ONLY_WHILE_PARENT_LIVES, "sh",
            str(os.getpid()), *argv]


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


def wait_http_ok(url: str, timeout: float, proc: subprocess.Popen[bytes] | None = None,
                 stop: threading.Event | None = None, headers: Mapping[str, str] | None = None,
                 context: ssl.SSLContext | None = None) -> None:
    """Poll `url` until it answers 200, the process exits, or `timeout` seconds pass; raises Stopped as soon
    as `stop` is set (Ctrl-C during start-up is not an error). `headers` and `context` (TLS) go with each
    probe, for a server behind basic auth or TLS."""
    stop = stop or threading.Event()
    deadline = time.monotonic() + timeout
    last_error = "no answer"
    while time.monotonic() < deadline:
        if stop.is_set():
            raise Stopped(f"stopped while waiting for {url}")
        if proc is not None and proc.poll() is not None:
            raise ProcessError(f"process exited with {proc.returncode} before {url} was ready")
        try:
            request = urllib.request.Request(url, headers=dict(headers or {}))
            with urllib.request.urlopen(request, timeout=1, context=context) as resp:
                if resp.status == 200:
                    return
                last_error = f"HTTP {resp.status}"
        except (urllib.error.URLError, OSError) as exc:
            last_error = str(exc)
        stop.wait(0.05)
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
    owned: tempfile.TemporaryDirectory[str] | None, timeout: float, stop: threading.Event | None = None,
    probe_headers: Mapping[str, str] | None = None, probe_context: ssl.SSLContext | None = None,
) -> ManagedProcess:
    log_path = workdir / f"{name}.log"
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(_dies_with_parent(argv), stdout=log, stderr=subprocess.STDOUT, cwd=workdir,
                                start_new_session=True)
    managed = ManagedProcess(name, url, workdir, proc, log_path, owned)
    try:
        wait_http_ok(url + ready_path, timeout, proc, stop, probe_headers, probe_context)
    except Stopped:
        managed.stop()
        raise
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
    stop: threading.Event | None = None,
    web_config: dict[str, object] | None = None,
    probe_headers: Mapping[str, str] | None = None,
    probe_context: ssl.SSLContext | None = None,
) -> ManagedProcess:
    """Start Prometheus with `config` (a prometheus.yml as a dict) and optional rule files {name: text}.

    `web_config` is its --web.config.file (TLS, basic auth); with `tls_server_config` the URL is https, and
    the readiness probe sends `probe_headers` (e.g. Authorization) with `probe_context` (the test CA).

    Rule files are written next to the config and added to `rule_files`. The server listens on 127.0.0.1 on a
    free port with the lifecycle API enabled, so callers can reload it with POST /-/reload. Setting `stop`
    during the wait for readiness stops the server and raises Stopped.
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
    scheme = "http"
    if web_config is not None:
        (workdir / "web.yml").write_text(yaml.safe_dump(web_config, sort_keys=False))
        argv.append(f"--web.config.file={workdir / 'web.yml'}")
        scheme = "https" if web_config.get("tls_server_config") else "http"
    url = f"{scheme}://127.0.0.1:{port}"
    return _start("prometheus", argv, url, "/-/ready", workdir, owned, timeout, stop, probe_headers,
                  probe_context)


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
