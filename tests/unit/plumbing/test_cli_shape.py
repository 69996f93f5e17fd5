"""One shape for the three command lines: `--version`, `-o`, `$PROMETHEUS_URL` and "did you mean" behave the
same in `gpu-exporter`, `gpu-autoscaler` and `gpu-fleet` (in-process through each console script's `main`;
a real process only where what a process imports is under test)."""

from __future__ import annotations

import argparse
import importlib
import json
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from autoscaler.cli.main import SUBCOMMANDS as AUTOSCALER_SUBCOMMANDS
from autoscaler.cli.main import build_parser as autoscaler_parser
from exporter.cli import COMMANDS as EXPORTER_COMMANDS
from fleet.cli import COMMANDS as FLEET_COMMANDS
from fleet.cli import SUBCOMMANDS as FLEET_SUBCOMMANDS
from fleet.cli import build_parser as fleet_parser
from plumbing.cli import CLIENT_LIBRARIES, did_you_mean, version, version_text
from tests.measure import run_in_process
from tests.rules import VALID_RULES

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


@pytest.mark.parametrize(("argv", "usage", "said"), [
    (["gpu-autoscaler", "chek"], "usage: gpu-autoscaler [", "invalid choice: 'chek'"),
    (["gpu-fleet", "estmate"], "usage: gpu-fleet [", "invalid choice: 'estmate'"),
    (["gpu-exporter", "statsu"], "usage: gpu-exporter [", "invalid choice: 'statsu'"),
], ids=lambda v: " ".join(v) if isinstance(v, list) else "")
def test_a_mistyped_subcommand_gets_the_usage_and_the_closest_one(
        argv: list[str], usage: str, said: str, capsys: pytest.CaptureFixture[str]) -> None:
    result = run_in_process(argv, capsys)
    wanted = {"chek": "check", "estmate": "estimate", "statsu": "status"}[argv[1]]
    assert result.returncode == 2 and result.stderr.startswith(usage)
    assert said in result.stderr and result.stderr.endswith(f"; did you mean {wanted!r}?\n")


@pytest.mark.parametrize(("argv", "usage", "last_line"), [
    (["gpu-fleet", "estimate", "70B"], "usage: gpu-fleet estimate [",
     "gpu-fleet estimate: error: unrecognized arguments: 70B"),
    (["gpu-fleet", "estimate", "--tp", "2", "bf16"], "usage: gpu-fleet estimate [",
     "gpu-fleet estimate: error: unrecognized arguments: bf16; did you mean '--dtype bf16'?"),
    (["gpu-fleet", "status", "--sortt", "node"], "usage: gpu-fleet status [",
     "gpu-fleet status: error: unrecognized arguments: --sortt node; did you mean '--sort'?"),
    (["gpu-autoscaler", "check", "--rules", "r.yaml", "--prometeus", "x"], "usage: gpu-autoscaler check [",
     "gpu-autoscaler check: error: unrecognized arguments: --prometeus; did you mean '--prometheus'?"),
    (["gpu-exporter", "--gpus", "2"], "usage: gpu-exporter [",
     "gpu-exporter: error: unrecognized arguments: --gpus (gpu-exporter has no option --gpus: see --help)"),
    (["gpu-exporter", "status", "--simulate", "1", "--jsn"], "usage: gpu-exporter status [",
     "gpu-exporter: error: unrecognized arguments: --jsn; did you mean '--json'?"),
], ids=lambda v: " ".join(v) if isinstance(v, list) else "")
def test_what_a_subcommand_does_not_take_gets_its_own_usage(
        argv: list[str], usage: str, last_line: str, capsys: pytest.CaptureFixture[str]) -> None:
    result = run_in_process(argv, capsys)
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr.startswith(usage) and result.stderr.splitlines()[-1] == last_line


@given(word=st.text(max_size=12), choices=st.lists(st.text(min_size=1, max_size=12), min_size=1, max_size=6))
def test_did_you_mean_names_a_choice_or_nothing(word: str, choices: list[str]) -> None:
    hint = did_you_mean(word, choices)
    assert hint == "" or any(hint == f"; did you mean {c!r}?" for c in choices)
    assert did_you_mean(choices[0], choices) == f"; did you mean {choices[0]!r}?"


@pytest.mark.parametrize(("argv", "said"), [
    (["gpu-autoscaler", "check", "--rules", "nope.yaml"], "nope.yaml: not found\n"),
    (["gpu-autoscaler", "simulate", "--rules", "nope.yaml", "t.csv"], "nope.yaml: not found\n"),
    (["gpu-autoscaler", "check", "--rules", "r.yaml", "--prometheus-config", "nope.yaml"],
     "nope.yaml: not found\n"),
    (["gpu-exporter", "--config", "nope.yaml", "status", "--simulate", "1"], "nope.yaml: not found\n"),
    (["gpu-exporter", "--simulate-config", "nope.yaml", "status"], "nope.yaml: not found\n"),
    (["gpu-exporter", "--web-config-file", "nope.yaml"], "nope.yaml: not found\n"),
    (["gpu-fleet", "estimate", "--task-config", "nope.json", "--gpu-memory", "80GiB"],
     "nope.json: not found (--task-config)\n"),
], ids=lambda v: " ".join(v[:3]) if isinstance(v, list) else "")
def test_a_missing_file_is_file_not_found_in_every_tool(
        argv: list[str], said: str, tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "r.yaml").write_text(VALID_RULES)
    result = run_in_process(argv, capsys)
    assert result.returncode == 2 and said in result.output and "No such file" not in result.output


def test_a_failure_under_o_json_is_a_json_document_too(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    for argv in (["gpu-autoscaler", "simulate", "--rules", "nope.yaml", "t.csv", "-o", "json"],
                 ["gpu-autoscaler", "status", "--rules", "nope.yaml", "--assume-replicas", "1", "-o", "json"],
                 ["gpu-fleet", "estimate", "--task-config", "nope.json", "--gpu-memory", "80GiB",
                  "-o", "json"]):
        result = run_in_process(argv, capsys)
        document = json.loads(result.stdout)
        assert result.returncode == 2 and document["schemaVersion"] == 1 and document["exit_code"] == 2
        assert document["error"] in result.stderr


CONTRACT = ("HELP", "add_arguments", "run")
RETIRED = ("add_parser", "main", "handler")


def subcommand_modules() -> dict[str, str]:
    """Every subcommand of the three CLIs and the module holding it."""
    return {**{f"gpu-autoscaler {name}": sub.module for name, sub in AUTOSCALER_SUBCOMMANDS.items()},
            **{f"gpu-fleet {name}": f"{FLEET_COMMANDS}.{name}" for name in FLEET_SUBCOMMANDS},
            **{f"gpu-exporter {name}": module.__name__ for name, module in EXPORTER_COMMANDS.items()}}


@pytest.mark.parametrize(("command", "module_name"), sorted(subcommand_modules().items()))
def test_every_subcommand_module_exposes_help_add_arguments_and_run(command: str, module_name: str) -> None:
    assert len(subcommand_modules()) == len(AUTOSCALER_SUBCOMMANDS) + len(FLEET_SUBCOMMANDS) + 1
    """One contract for every subcommand: a one-line HELP, add_arguments(parser), run(args) -> int; the
    parser-and-handler pair `run` and `status` used to have is gone."""
    module = importlib.import_module(module_name)
    assert isinstance(module.HELP, str) and module.HELP and "\n" not in module.HELP
    assert callable(module.add_arguments) and callable(module.run)
    assert not [name for name in RETIRED if hasattr(module, name)], command
    parser = argparse.ArgumentParser()
    assert module.add_arguments(parser) is None
    assert parser.get_default("handler") is None and parser.get_default("func") is None


def test_the_autoscaler_lists_each_subcommand_with_its_modules_help() -> None:
    """main.py lists a subcommand without importing it: the line it lists is the module's HELP."""
    assert {name: sub.help for name, sub in AUTOSCALER_SUBCOMMANDS.items()} == {
        name: importlib.import_module(sub.module).HELP for name, sub in AUTOSCALER_SUBCOMMANDS.items()}
