"""Every `gpu-autoscaler check ...` command the README, docs/, the manifests and the examples tell users
to run is accepted by the real command-line parser (`check` takes the rules file as a positional argument)."""

from __future__ import annotations

import contextlib
import io
import re
import shlex

import pytest

from autoscaler.cli.args import rules_file
from autoscaler.cli.main import build_parser
from tests.unit.shipping.promql_names import ROOT

DOCUMENTS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")), ROOT / "Dockerfile",
             *sorted((ROOT / "manifests").rglob("*.yaml")), *sorted((ROOT / "examples").glob("*.yaml"))]
# A command with arguments, up to the end of its inline code span, table cell, shell comment or line (a bare
# `gpu-autoscaler check` is the name of the command in prose).
COMMAND = re.compile(r"gpu-autoscaler check +[^`|#\s][^`|#\n]*")


def documented_commands() -> list[tuple[str, str]]:
    """(file:line, command) of every `gpu-autoscaler check` outside markdown headings (usage synopses)."""
    found = []
    for path in DOCUMENTS:
        for number, line in enumerate(path.read_text().splitlines(), start=1):
            if path.suffix == ".md" and line.startswith("#"):
                continue
            for match in COMMAND.finditer(line):
                found.append((f"{path.relative_to(ROOT)}:{number}", match.group(0).strip()))
    return found


def test_the_documents_show_check_commands() -> None:
    where = {place.split(":")[0] for place, _ in documented_commands()}
    assert {"docs/rules.md", "docs/runbook.md", "manifests/base/autoscaler-rules-configmap.yaml"} <= where


@pytest.mark.parametrize(("place", "command"), documented_commands(), ids=lambda value: value)
def test_documented_check_command_parses(place: str, command: str) -> None:
    argv = shlex.split(command)[1:]
    stderr = io.StringIO()
    try:
        with contextlib.redirect_stderr(stderr):
            args = build_parser(argv).parse_args(argv)
    except SystemExit:
        pytest.fail(f"{place}: `{command}` is rejected: {stderr.getvalue().strip()}")
    assert args.command == "check", f"{place}: `{command}` is not a check command"
    assert rules_file(args, "check")[0], f"{place}: `{command}` names no rules file"
    assert args.rules, f"{place}: `{command}`: document the --rules FILE form every subcommand takes"
