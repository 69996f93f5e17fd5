"""The subcommand registry: a module exposing HELP/add_arguments/run dispatches; only the chosen one is
imported."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from autoscaler.cli.main import SUBCOMMANDS, Subcommand, main

ARGUMENTS_STYLE = '''
HELP = "first"

def add_arguments(parser):
    parser.add_argument("--n", type=int, default=1)

def run(args):
    return args.n + 10
'''
FAILING = '''
from autoscaler.errors import UsageError

HELP = "second"

def add_arguments(parser):
    parser.add_argument("--fail", action="store_true")

def run(args):
    if args.fail:
        raise UsageError("two: --fail: asked to fail")
    return 7
'''
BROKEN = "raise RuntimeError('imported although not chosen')\n"


@pytest.fixture
def registry(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, Subcommand]]:
    for name, text in {"cli_one": ARGUMENTS_STYLE, "cli_two": FAILING, "cli_broken": BROKEN}.items():
        (tmp_path / f"{name}.py").write_text(text)
    monkeypatch.syspath_prepend(str(tmp_path))
    yield {"one": Subcommand("first", "cli_one"), "two": Subcommand("second", "cli_two"),
           "broken": Subcommand("never loaded unless chosen", "cli_broken")}
    for name in ("cli_one", "cli_two", "cli_broken"):
        sys.modules.pop(name, None)


def test_add_arguments_and_run_style(registry: dict[str, Subcommand]) -> None:
    assert main(["one", "--n", "5"], registry) == 15
    assert "cli_broken" not in sys.modules


def test_another_module_dispatches_to_its_own_run(registry: dict[str, Subcommand]) -> None:
    assert main(["two"], registry) == 7


def test_autoscaler_error_is_one_line_and_exit_2(registry: dict[str, Subcommand],
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["two", "--fail"], registry) == 2
    assert capsys.readouterr().err == "two: --fail: asked to fail\n"


def test_the_shipped_registry_has_check_and_simulate() -> None:
    assert {"check", "simulate"} <= set(SUBCOMMANDS)
