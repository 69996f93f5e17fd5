"""Every YAML file the CLIs read (rules, --config, --simulate-config, --prometheus-config, --web-config-file,
--kubeconfig), fed hostile content through the CLIs' own entry points.

Each run must end with exit 2 and one message naming the file (and the line where there is one) and no
traceback. Every (command, hostile file) pair runs in this process, through the same `main(argv)` the console
script calls; the costliest files also run through the installed console script as a child process, whose
peak memory must stay under 200 MiB (the documented bound), once per command: a child process per pair would
spend the suite's time starting interpreters, not reading files.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest

from autoscaler.kube.scale import KUBECONFIG_LIMITS
from plumbing.web.webconfig import LIMITS as WEB_LIMITS
from tests.hostile import (
    AUTOSCALER,
    EXPORTER,
    HANG_SECONDS,
    MAX_RSS_MIB,
    RULES,
    YAML_HOSTILE,
    Hostile,
)
from tests.measure import Measured, run_in_process, run_measured

Command = Callable[[Path, Path], list[str]]
"""(hostile file, directory with a valid rules file and trace) -> argv."""

COMMANDS: dict[str, Command] = {
    "check": lambda f, d: [AUTOSCALER, "check", str(f)],
    "simulate": lambda f, d: [AUTOSCALER, "simulate", str(f), str(d / "trace.csv")],
    "run": lambda f, d: [AUTOSCALER, "run", "--rules", str(f)],
    "status": lambda f, d: [AUTOSCALER, "status", "--rules", str(f)],
    "exporter-config": lambda f, d: [EXPORTER, "--simulate", "1", "--config", str(f), "status"],
    "simulate-config": lambda f, d: [EXPORTER, "status", "--simulate-config", str(f)],
    "prometheus-config": lambda f, d: [AUTOSCALER, "check", str(d / "rules.yaml"), "--prometheus-config",
                                       str(f)],
    "web-config": lambda f, d: [EXPORTER, "--simulate", "1", "--address", "127.0.0.1", "--port", "0",
                                "--web-config-file", str(f)],
    "kubeconfig": lambda f, d: [AUTOSCALER, "run", "--rules", str(d / "rules.yaml"), "--kubeconfig", str(f),
                                "--dry-run", "--once"],
}
# A file with a smaller size limit than the YAML reader's default refuses a large hostile file by its size.
MAX_BYTES = {"web-config": WEB_LIMITS.max_bytes, "kubeconfig": KUBECONFIG_LIMITS.max_bytes}
# The rules file has one reader (plumbing.yamlsafe + NodeReader) behind four commands: every hostile file
# goes through `check`; the other three get the costliest few, which proves each command uses that reader.
RULES_SUBSET = {"billion-laughs", "100000-brackets", "5000-digit-integer", "50-MB", "not-utf8"}
# The kubeconfig is read by the Kubernetes client, after the same bounded reader: the bombs and the sizes.
KUBECONFIG_SUBSET = {"billion-laughs", "recursive-alias", "100000-brackets", "300000-nodes", "50-MB",
                     "not-utf8"}
CASES = [
    pytest.param(command, hostile, id=f"{command}-{hostile.id}")
    for command in COMMANDS
    for hostile in YAML_HOSTILE
    if command in ("check", "exporter-config", "simulate-config", "prometheus-config", "web-config")
    or (command != "kubeconfig" and hostile.id in RULES_SUBSET)
    or (command == "kubeconfig" and hostile.id in KUBECONFIG_SUBSET)
]


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("hostile")
    (path / "rules.yaml").write_text(RULES)
    (path / "trace.csv").write_text("t,util\n0,0.5\n")
    return path


def assert_refused(result: Measured, path: Path, expected: str, line: int | None) -> None:
    output = result.output
    assert result.returncode == 2, output[-2000:]
    assert "Traceback" not in output, output[-2000:]
    lines = [text for text in output.splitlines() if expected in text]
    assert len(lines) == 1, output[-2000:]  # one message, not one per node or per alias
    assert str(path) in lines[0]
    if line is not None:
        assert f"{path}:{line}:" in lines[0] or f"{path}: line {line}:" in lines[0], lines[0]
    assert len(output.splitlines()) <= 3, output[-2000:]  # the message, at most a header and a count


CHILD_PROCESS = {"billion-laughs": set(COMMANDS) - set(MAX_BYTES), "50-MB": set(MAX_BYTES)}
"""The file that costs each reader most memory if it misses a guard (for a file with its own size limit,
the size), also run through the installed command as a child process, measured."""


def _refusal(command: str, hostile: Hostile) -> tuple[str, int | None]:
    if len(hostile.content) > MAX_BYTES.get(command, len(hostile.content)):
        return "larger than", None
    return hostile.expected, hostile.line


@pytest.mark.parametrize(("command", "hostile"), CASES)
def test_hostile_yaml_is_one_message_exit_2(command: str, hostile: Hostile, workdir: Path,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    path = workdir / f"{command}-{hostile.id}.yaml"
    path.write_bytes(hostile.content)
    try:
        result = run_in_process(COMMANDS[command](path, workdir), capsys)
    finally:
        path.unlink()  # the 50 MB files must not pile up
    assert_refused(result, path, *_refusal(command, hostile))


@pytest.mark.parametrize(("command", "hostile"), [
    pytest.param(command, hostile, id=f"{command}-{hostile.id}")
    for hostile in YAML_HOSTILE for command in sorted(CHILD_PROCESS.get(hostile.id, ()))])
def test_the_installed_command_refuses_it_in_bounded_memory(command: str, hostile: Hostile,
                                                             workdir: Path) -> None:
    path = workdir / f"child-{command}-{hostile.id}.yaml"
    path.write_bytes(hostile.content)
    try:
        result = run_measured(COMMANDS[command](path, workdir), workdir, HANG_SECONDS)
    finally:
        path.unlink()
    assert_refused(result, path, *_refusal(command, hostile))
    assert result.max_rss_mib < MAX_RSS_MIB, f"{result.max_rss_mib:.0f} MiB"


@pytest.mark.parametrize(("command", "expected"), [
    ("check", "the file is empty (expected a top-level 'rules:' list)"),
    ("simulate-config", "(top level): expected a mapping with 'gpus'"),
])
def test_empty_file(command: str, expected: str, workdir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """An empty rules or fleet file is a mistake; an empty --config is all defaults (documented), not here."""
    path = workdir / f"{command}-empty.yaml"
    path.write_bytes(b"")
    result = run_in_process(COMMANDS[command](path, workdir), capsys)
    assert_refused(result, path, expected, None)




def with_field(extra: str) -> str:
    """RULES with `extra` written on line 5, right after maxReplicas."""
    return RULES.replace("maxReplicas: 10\n", "maxReplicas: 10\n" + extra)


OVERFLOWING: list[tuple[str, str, str, str, int]] = [
    # (id, command, file text, expected message, line)
    ("rules-target-1e308", "check", RULES.replace("target: 0.8", "target: 1.0e+308"),
     "rules[0].metrics[0].target: expected a number <= 1e+15 (got 1e+308)", 6),
    ("rules-max-replicas-huge", "check",
     RULES.replace("maxReplicas: 10", "maxReplicas: 99999999999999999999"),
     "rules[0].maxReplicas: expected an integer in [1, 2147483647] (got 99999999999999999999)", 4),
    ("rules-window-1e300", "check",
     with_field("    behavior: {scaleDown: {stabilizationWindowSeconds: 1.0e+300}}\n"),
     "rules[0].behavior.scaleDown.stabilizationWindowSeconds: expected an integer", 5),
    ("rules-tolerance-1e300", "check",
     with_field("    behavior: {scaleUp: {tolerance: 1.0e+300}}\n"),
     "rules[0].behavior.scaleUp.tolerance: expected a number <= 10 (got 1e+300)", 5),
    ("rules-fallback-huge", "simulate",
     with_field("    fallback: {failureThreshold: 1, replicas: 4294967296}\n"),
     "rules[0].fallback.replicas: expected an integer in [0, 2147483647] (got 4294967296)", 5),
    ("config-sample-interval-1e-300", "exporter-config", "history: {sample_interval_seconds: 1.0e-300}\n",
     "history.sample_interval_seconds: expected a number of seconds in [0.01, 3600]", 1),
    ("config-refresh-1e300", "exporter-config", "pod_resources:\n  refresh_interval_seconds: 1.0e+300\n",
     "pod_resources.refresh_interval_seconds: expected a number of seconds in [0.01, 3600]", 2),
    ("config-timeout-1e300", "exporter-config", "pod_resources: {timeout_seconds: 1.0e+300}\n",
     "pod_resources.timeout_seconds: expected a number of seconds in (0, 300]", 1),
    ("config-retention-1e300", "exporter-config", "history: {retention_seconds: 1.0e+300}\n",
     "history.retention_seconds: expected a number of seconds in (0, 604800]", 1),
    ("config-max-samples-huge", "exporter-config", "history: {max_samples: 1000000000000000000000}\n",
     "history.max_samples: expected an integer in [2, 86400]", 1),
    ("config-xid-grace-1e300", "exporter-config", "xid: {recovery_grace_seconds: 1.0e+300}\n",
     "xid.recovery_grace_seconds: expected a number of seconds in [0, 86400]", 1),
    ("config-grpc-bytes-huge", "exporter-config", "pod_resources: {max_receive_message_bytes: 4294967296}\n",
     "pod_resources.max_receive_message_bytes: expected an integer in [4194304 (4 MiB), 2147483647]", 1),
    ("fleet-pcie-latency-1e300", "simulate-config", "pcie_latency_seconds: 1.0e+300\ngpus: [{count: 1}]\n",
     "pcie_latency_seconds: expected a number <= 10 (got 1e+300)", 1),
    ("fleet-memory-1e308", "simulate-config",
     "gpus: [{processes: [{pid: 1, memory_gib: 1.0e+308}]}]\n",
     "gpus[0].processes[0].memory_gib: expected a number <= 1024 (got 1e+308)", 1),
    ("fleet-period-1e300", "simulate-config", "gpus: [{load: {period_seconds: 1.0e+300}}]\n",
     "gpus[0].load.period_seconds: expected a number <= 3.1536e+07 (got 1e+300)", 1),
    ("fleet-pid-huge", "simulate-config", "gpus: [{processes: [{pid: 100000000000000000000}]}]\n",
     "gpus[0].processes[0].pid: expected an integer in [1, 4194304] (got 100000000000000000000)", 1),
    ("fleet-groups-many", "simulate-config", "gpus: [" + "{count: 64}, " * 10_000 + "]\n",
     "gpus: expected at most 64 GPUs in all (got 10000 groups)", 1),
]


@pytest.mark.parametrize(("command", "text", "expected", "line"),
                         [pytest.param(c, t, e, n, id=i) for i, c, t, e, n in OVERFLOWING])
def test_values_that_would_overflow_later_are_refused_when_read(
        command: str, text: str, expected: str, line: int, workdir: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    path = workdir / "overflow.yaml"
    path.write_text(text)
    result = run_in_process(COMMANDS[command](path, workdir), capsys)
    assert result.returncode == 2, result.output
    assert "Traceback" not in result.output
    assert expected in result.output, result.output
    assert str(path) in result.output
    if line:
        assert f"{path}:{line}:" in result.output, result.output


SPECIAL_FILES = ("fifo", "directory", "character-device")
"""What a path may name besides a regular file: each is refused at once, never read from or waited on."""


def special_file(kind: str, directory: Path) -> Path:
    if kind == "fifo":
        path = directory / "named-pipe.yaml"
        if not path.exists():
            os.mkfifo(path)
        return path
    if kind == "directory":
        return directory
    return Path("/dev/zero")  # endless: a reader without a bound would never finish


@pytest.mark.parametrize("kind", SPECIAL_FILES)
@pytest.mark.parametrize("command", ["check", "exporter-config", "simulate-config", "prometheus-config",
                                     "web-config", "kubeconfig"])
def test_a_path_that_is_no_regular_file_is_one_message_at_once(command: str, kind: str, workdir: Path,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    path = special_file(kind, workdir)
    result = run_in_process(COMMANDS[command](path, workdir), capsys)
    assert result.returncode == 2, result.output
    assert "Traceback" not in result.output
    assert "not a regular file" in result.output and str(path) in result.output, result.output


@pytest.mark.parametrize("kind", SPECIAL_FILES)
def test_a_trace_that_is_no_regular_file_is_one_message_at_once(kind: str, workdir: Path,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    path = special_file(kind, workdir)
    result = run_in_process([AUTOSCALER, "simulate", str(workdir / "rules.yaml"), str(path)], capsys)
    assert result.returncode == 2, result.output
    assert "Traceback" not in result.output and str(path) in result.output, result.output
