"""One shape for the three command lines: `--version`, `-o`, `$PROMETHEUS_URL` and "did you mean" behave the
same in `gpu-exporter`, `gpu-autoscaler` and `gpu-fleet` (in-process through each console script's `main`;
a real process only where what a process imports is under test)."""

from __future__ import annotations

import argparse
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import pytest

from autoscaler.cli.main import build_parser as autoscaler_parser
from fleet.cli import build_parser as fleet_parser
from plumbing.cli import CLIENT_LIBRARIES, version, version_text
from tests.measure import run_in_process

REPO = Path(__file__).resolve().parents[3]
TOOLS = ("gpu-exporter", "gpu-autoscaler", "gpu-fleet")


@pytest.mark.parametrize("argv", [
    ["gpu-exporter"], ["gpu-exporter", "status"], ["gpu-autoscaler"], ["gpu-autoscaler", "check"],
    ["gpu-autoscaler", "status"], ["gpu-autoscaler", "tune"], ["gpu-fleet"], ["gpu-fleet", "estimate"],
], ids=" ".join)
def test_version_names_the_tool_and_its_client_libraries(argv: list[str],
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    result = run_in_process([*argv, "--version"], capsys)
    lines = result.stdout.splitlines()
    assert result.returncode == 0 and result.stderr == ""
    assert lines[0] == f"{argv[0]} {metadata.version('gpu-autoscaler')}"
    for distribution, _ in CLIENT_LIBRARIES:
        assert f"{distribution} {metadata.version(distribution)} (" in result.stdout
    assert lines[-1].startswith("Python 3.")


def test_a_library_that_is_not_installed_is_said_so() -> None:
    assert version("no-such-distribution-here") == "not installed"
    assert version_text("gpu-x").splitlines()[0] == f"gpu-x {version()}"


HEAVY = ("kubernetes", "pynvml", "prometheus_client")
PROBE = """
import sys
from {module} import build_parser, main
build_parser({parser_argv})
before = [m for m in {heavy} if m in sys.modules]
try:
    main(["--version"])
except SystemExit:
    pass
print("HEAVY", before, [m for m in {heavy} if m in sys.modules])
"""


@pytest.mark.parametrize("tool", TOOLS)
def test_version_imports_no_client_library(tool: str) -> None:
    """`--version` reads the libraries' metadata: it imports none of them (the Kubernetes client alone takes
    0.35 s), beyond what building the parser imports. What a process imported is only visible in a process of
    its own."""
    module = {"gpu-exporter": "exporter.cli", "gpu-autoscaler": "autoscaler.cli.main",
              "gpu-fleet": "fleet.cli"}[tool]
    parser_argv = '["--version"]' if tool == "gpu-autoscaler" else ""  # its parser loads what argv names
    probe = PROBE.format(module=module, parser_argv=parser_argv, heavy=HEAVY)
    done = subprocess.run([sys.executable, "-c", probe], cwd=REPO, capture_output=True, text=True, timeout=60,
                          check=True)
    before, after = done.stdout.rsplit("HEAVY ", 1)[1].split("] [")
    assert before + "]" == "[" + after.strip() and "kubernetes" not in after, done.stdout


@pytest.mark.parametrize("command", [
    ["gpu-autoscaler", "run"], ["gpu-autoscaler", "status"], ["gpu-autoscaler", "check"],
    ["gpu-autoscaler", "tune"], ["gpu-fleet", "status"], ["gpu-fleet", "select"], ["gpu-fleet", "report"],
], ids=" ".join)
def test_every_command_that_queries_prometheus_reads_prometheus_url(
        command: list[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """One flag definition: the default of `--prometheus` is `$PROMETHEUS_URL` wherever the flag is."""
    monkeypatch.setenv("PROMETHEUS_URL", "http://prometheus.example:9091")
    args = _parse(command)
    assert args.prometheus == "http://prometheus.example:9091"
    monkeypatch.setenv("PROMETHEUS_URL", "")  # set but empty: unset
    assert _parse(command).prometheus == (None if command[1] == "check" else "http://localhost:9090")
    monkeypatch.setenv("PROMETHEUS_URL", "http://prometheus.example:9091")
    assert _parse([*command, "--prometheus", "http://flag:1"]).prometheus == "http://flag:1"


def _parse(command: list[str]) -> argparse.Namespace:
    """`command`'s parsed flags (the minimum each needs), through its tool's own parser."""
    tool, name, *rest = command
    needs = {"select": ["--gpus", "1"]} if tool == "gpu-fleet" else {name: ["--rules", "r.yaml"]}
    argv = [name, *needs.get(name, []), *rest]
    if tool == "gpu-fleet":
        return fleet_parser().parse_args(argv)
    return autoscaler_parser(argv).parse_args(argv)
