"""`gpu-autoscaler run --dry-run --assume-replicas` as a real process against a real Prometheus, no cluster:
one decision line per rule per sync on stdout, --once and SIGTERM, and the refusals."""

from __future__ import annotations

import json
import os
import pty
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests import REPO_ROOT
from tests.prom import Prom

pytestmark = pytest.mark.integration

CLI = [sys.executable, "-m", "autoscaler.cli.main", "run"]


def no_cluster_env(tmp_path: Path) -> dict[str, str]:
    """No kubeconfig and no in-cluster service: a laptop without Kubernetes."""
    env = {k: v for k, v in os.environ.items() if k not in ("KUBECONFIG", "KUBERNETES_SERVICE_HOST")}
    env["KUBECONFIG"] = str(tmp_path / "does-not-exist")
    env["HOME"] = str(tmp_path)
    return env


@pytest.fixture
def rules(tmp_path: Path, prom: Prom) -> Path:
    prom.target.set("try-a", 160)
    prom.target.set("try-b", 10)
    prom.wait_value('test_load{series="try-a"}', 160)
    prom.wait_value('test_load{series="try-b"}', 10)
    path = tmp_path / "rules.yaml"
    path.write_text(textwrap.dedent("""\
        rules:
          - name: a
            target: {kind: Deployment, namespace: ml, name: a}
            maxReplicas: 10
            metrics:
              - {name: util, query: 'test_load{series="try-a"}', type: Average, target: 80}
          - name: b
            target: {kind: Deployment, namespace: ml, name: b}
            maxReplicas: 10
            metrics:
              - {name: load, query: 'test_load{series="try-b"}', type: Total, target: 5}
    """))
    return path


def test_once_prints_one_line_per_rule(tmp_path: Path, prom: Prom, rules: Path) -> None:
    done = subprocess.run(
        [*CLI, "--rules", str(rules), "--prometheus", prom.url, "--dry-run", "--once", "--metrics-port", "0",
         "--assume-replicas", "2", "--assume-replicas", "b=1"],
        capture_output=True, text=True, timeout=60, env=no_cluster_env(tmp_path), check=False,
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert len(lines) == 2, done.stdout
    a, b = lines
    assert " a: 2 -> 4 DesiredWithinRange | util=160 (target 80) | " in a
    assert " b: 1 -> 2 DesiredWithinRange | load=10 (target 5/replica) | " in b
    assert "Traceback" not in done.stderr


def test_on_a_terminal_each_decision_shows_once(tmp_path: Path, prom: Prom, rules: Path) -> None:
    """stdout and stderr on one terminal (a pty: the boundary under test): the printed decision line, not
    also the INFO log line of the same decision; a pipe keeps the log line on stderr."""
    argv = [*CLI, "--rules", str(rules), "--prometheus", prom.url, "--dry-run", "--once",
            "--metrics-port", "0", "--assume-replicas", "2"]
    leader, follower = pty.openpty()
    with subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=follower, stderr=follower,
                          env=no_cluster_env(tmp_path)) as proc:
        os.close(follower)
        screen = b""
        while True:  # until the process closes the terminal (EIO on Linux), bounded by its own --once
            try:
                chunk = os.read(leader, 65536)
            except OSError:
                break
            if not chunk:
                break
            screen += chunk
        assert proc.wait(timeout=60) == 0, screen
    os.close(leader)
    lines = screen.decode().splitlines()
    assert len([line for line in lines if " a: 2 -> 4 " in line or "rule a: " in line]) == 1, lines
    piped = subprocess.run(argv, capture_output=True, text=True, timeout=60, env=no_cluster_env(tmp_path),
                           check=False)
    assert " a: 2 -> 4 " in piped.stdout and "rule a: would scale" in piped.stderr, piped.stderr


COUNTING_OPENS = """\
import atexit, os, sys
from autoscaler.cli.main import main
watched, opened = os.path.realpath(sys.argv[1]), []
sys.addaudithook(lambda event, args: opened.append(args[0]) if event == "open" and isinstance(args[0], str)
                 and os.path.realpath(args[0]) == watched else None)
atexit.register(lambda: print(f"rules file opened {len(opened)} time(s)", file=sys.stderr))
sys.exit(main(["run", "--rules", *sys.argv[1:]]))
"""


def test_the_rules_file_is_read_once(tmp_path: Path, prom: Prom, rules: Path) -> None:
    """Checked before anything starts, then run from those bytes: an audit hook counts the opens."""
    done = subprocess.run(
        [sys.executable, "-c", COUNTING_OPENS, str(rules), "--prometheus", prom.url, "--dry-run", "--once",
         "--metrics-port", "0", "--assume-replicas", "2"],
        capture_output=True, text=True, timeout=60, env=no_cluster_env(tmp_path), check=False, cwd=REPO_ROOT,
    )
    assert done.returncode == 0, done.stderr
    assert len(done.stdout.splitlines()) == 2, done.stdout  # it ran: one decision line per rule
    assert "rules file opened 1 time(s)" in done.stderr


def test_interval_runs_until_sigterm_with_fixed_counts(tmp_path: Path, prom: Prom, rules: Path) -> None:
    process = subprocess.Popen(
        [*CLI, "--rules", str(rules), "--prometheus", prom.url, "--dry-run", "--interval", "200ms",
         "--metrics-port", "0", "--assume-replicas", "2"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=no_cluster_env(tmp_path),
    )
    assert process.stdout is not None
    seen: list[str] = []
    try:
        for _ in range(6):  # three syncs of two rules; readline returns at EOF, so this loop ends by itself
            line = process.stdout.readline()
            if not line:
                break
            seen.append(line)
        process.send_signal(signal.SIGTERM)
        _rest, stderr = process.communicate(timeout=30)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(timeout=10)
    assert process.returncode == 0, stderr
    a_lines = [line for line in seen if " a: " in line]
    assert len(a_lines) == 3
    assert all(" a: 2 -> 4 " in line for line in a_lines)  # the count stays assumed: never played forward
    assert "Traceback" not in stderr


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--assume-replicas", "2"], "--assume-replicas needs --dry-run"),
        (["--dry-run", "--leader-elect", "--assume-replicas", "2"], "cannot be used with --leader-elect"),
        (["--dry-run", "--assume-replicas", "a=2"], "no assumed count for rule(s) b"),
        (["--dry-run", "--assume-replicas", "2", "--assume-replicas", "zz=1"], "no rule named 'zz'"),
        (["--dry-run", "--assume-replicas", "\u0662"], "expected a replica count"),
        (["--dry-run", "--assume-replicas", "9" * 5000], "expected a replica count"),
        (["--dry-run", "--assume-replicas", "2", "--kubeconfig", "k"], "drop --kubeconfig"),
    ],
    ids=["no-dry-run", "leader-elect", "missing-count", "unknown-rule", "unicode", "huge", "kubeconfig"],
)
def test_refusals(tmp_path: Path, prom: Prom, rules: Path, extra: list[str], message: str) -> None:
    done = subprocess.run(
        [*CLI, "--rules", str(rules), "--prometheus", prom.url, "--once", "--metrics-port", "0", *extra],
        capture_output=True, text=True, timeout=60, env=no_cluster_env(tmp_path), check=False,
    )
    assert done.returncode == 2 and message in done.stderr, done.stderr
    assert "Traceback" not in done.stderr and done.stdout == ""
    assert len(done.stderr) < 1000


def test_production_code_never_imports_demo() -> None:
    import ast

    source = (REPO_ROOT / "autoscaler" / "cli" / "assumed.py").read_text()
    imported = {n.module for n in ast.walk(ast.parse(source)) if isinstance(n, ast.ImportFrom)}
    assert imported and not any(m and m.startswith("demo") for m in imported)


def cli(command: str, *args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "autoscaler.cli.main", command, *args], capture_output=True,
                          text=True, timeout=60, env=env, check=False)


@pytest.mark.parametrize(("command", "extra", "hint"), [
    ("run", ["--dry-run", "--once"], "no cluster? --dry-run --assume-replicas N assumes N replicas"),
    ("status", [], "no cluster? --assume-replicas N assumes N replicas"),
])
def test_without_a_kubeconfig_the_message_names_assume_replicas(tmp_path: Path, prom: Prom, rules: Path,
                                                                 command: str, extra: list[str],
                                                                 hint: str) -> None:
    done = cli(command, "--rules", str(rules), "--prometheus", prom.url, *extra, env=no_cluster_env(tmp_path))
    assert done.returncode == 2, done.stderr
    first, second = done.stderr.splitlines()
    assert first.startswith(f"gpu-autoscaler {command}: cannot load Kubernetes configuration from ")
    assert second.startswith(hint) and "docs/try-without-a-cluster.md" in second


def test_status_runs_against_assumed_replicas(tmp_path: Path, prom: Prom, rules: Path) -> None:
    """The same decisions as `run --dry-run --assume-replicas`, as status' table: a (util 160, target 80)
    doubles its assumed 2 replicas, b (load 10, 5 per replica) needs 2 where 1 is assumed."""
    done = cli("status", "--rules", str(rules), "--prometheus", prom.url, "--assume-replicas", "2",
               "--assume-replicas", "b=1", env=no_cluster_env(tmp_path))
    assert done.returncode == 0, done.stderr
    rows = [line.split() for line in done.stdout.splitlines()[1:]]
    assert [(r[0], r[2], r[3]) for r in rows] == [("a", "2", "4"), ("b", "1", "2")], done.stdout
    as_json = cli("status", "--rules", str(rules), "--assume-replicas", "2", "--assume-replicas", "b=1",
                  "-o", "json", env={**no_cluster_env(tmp_path), "PROMETHEUS_URL": prom.url})
    assert as_json.returncode == 0, as_json.stderr
    assert [(r["rule"], r["current"], r["desired"]) for r in json.loads(as_json.stdout)["rules"]] == [
        ("a", 2, 4), ("b", 1, 2)]
    refused = cli("status", "--rules", str(rules), "--prometheus", prom.url, "--assume-replicas", "2",
                  "--kubeconfig", "k", env=no_cluster_env(tmp_path))
    assert refused.returncode == 2 and "drop --kubeconfig" in refused.stderr
    missing = cli("status", "--rules", str(rules), "--prometheus", prom.url, "--assume-replicas", "a=2",
                  env=no_cluster_env(tmp_path))
    assert missing.returncode == 2 and "no assumed count for rule(s) b" in missing.stderr


def test_the_commands_without_a_cluster_never_load_the_kubernetes_client(rules: Path) -> None:
    """`status` and `run --dry-run` with --assume-replicas have no cluster: the client (0.35 s to import)
    stays unloaded; `status` against a cluster loads it (the control)."""
    probe = textwrap.dedent("""
        import contextlib, io, sys
        from autoscaler.cli.main import main
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            main(sys.argv[1:])
        print("kubernetes" in sys.modules)
    """)
    unreachable = ["--rules", str(rules), "--prometheus", "http://127.0.0.1:9"]
    for argv, loaded in ((["status", *unreachable, "--assume-replicas", "2"], "False"),
                         (["run", *unreachable, "--dry-run", "--once", "--assume-replicas", "2",
                           "--metrics-port", "0"], "False"),
                         (["status", *unreachable, "--kubeconfig", str(rules)], "True")):
        done = subprocess.run([sys.executable, "-c", probe, *argv], capture_output=True, text=True,
                              timeout=60, check=False)
        assert done.stdout.strip() == loaded, (argv[0], done.stdout, done.stderr[-2000:])
