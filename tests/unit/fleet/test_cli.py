"""The `gpu-fleet` registry: every listed subcommand loads and has HELP, add_arguments and run; errors become
one line and an exit status."""

from __future__ import annotations

import argparse
import sys
import types

import pytest

from fleet import cli
from fleet.errors import UsageError


@pytest.mark.parametrize("name", cli.SUBCOMMANDS)
def test_every_registered_subcommand_exposes_the_three_names(name: str) -> None:
    module = cli.load(name)
    assert isinstance(module.HELP, str) and module.HELP
    parser = argparse.ArgumentParser()
    module.add_arguments(parser)
    assert callable(module.run)


def test_the_registry_lists_each_name_once() -> None:
    assert len(set(cli.SUBCOMMANDS)) == len(cli.SUBCOMMANDS)


def fake_module(monkeypatch: pytest.MonkeyPatch, run: object) -> None:
    module = types.ModuleType("fleet.fake")
    module.HELP = "a fake subcommand"  # type: ignore[attr-defined]
    module.add_arguments = lambda parser: parser.add_argument("--flag")  # type: ignore[attr-defined]
    module.run = run  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "fleet.fake", module)


def test_a_fleet_error_is_one_line_and_its_exit_status(monkeypatch: pytest.MonkeyPatch,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    def run(args: argparse.Namespace) -> int:
        raise UsageError("--flag: expected something (got 'x')")

    fake_module(monkeypatch, run)
    assert cli.main(["fake", "--flag", "x"], subcommands=("fake",)) == 2
    assert capsys.readouterr().err == "gpu-fleet fake: --flag: expected something (got 'x')\n"


def test_run_returns_the_exit_status(monkeypatch: pytest.MonkeyPatch) -> None:
    fake_module(monkeypatch, lambda args: 1)
    assert cli.main(["fake"], subcommands=("fake",)) == 1


def test_a_module_without_run_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    module = types.ModuleType("fleet.broken")
    module.HELP = "x"  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "fleet.broken", module)
    with pytest.raises(TypeError, match="lacks add_arguments, run"):
        cli.build_parser(("broken",))


@pytest.mark.parametrize(("url", "expected"), [
    ("localhost:9090", "gpu-fleet status: --prometheus: url: expected an http:// or https:// URL (got no "
     "scheme in 'localhost:9090'; write 'http://localhost:9090')"),
    ("u:secret@prom:9090", "gpu-fleet status: --prometheus: url: expected an http:// or https:// URL (got no "
     "scheme in 'u:***@prom:9090'; write 'http://u:***@prom:9090')"),
    ("ftp://prom", "gpu-fleet status: --prometheus: url: expected an http:// or https:// URL (got scheme "
     "'ftp': 'ftp://prom')"),
])
def test_a_url_without_its_scheme_is_named_once_with_what_to_write(
        url: str, expected: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["status", "--prometheus", url]) == 2
    err = capsys.readouterr().err
    assert err == expected + "\n"
    assert "secret" not in err
