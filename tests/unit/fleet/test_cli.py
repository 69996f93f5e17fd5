"""The `gpu-fleet` registry: every listed subcommand loads and has HELP, add_arguments and run; errors become
one line and an exit status."""

from __future__ import annotations

import argparse
import subprocess
import sys
import types
from pathlib import Path

import pytest

from fleet import cli
from fleet.errors import UsageError
from tests import REPO_ROOT


@pytest.mark.parametrize("name", cli.SUBCOMMANDS)
def test_every_registered_subcommand_exposes_the_three_names(name: str) -> None:
    module = cli.load(name)
    assert isinstance(module.HELP, str) and module.HELP
    parser = argparse.ArgumentParser()
    module.add_arguments(parser)
    assert callable(module.run)


def test_the_registry_lists_each_name_once() -> None:
    assert len(set(cli.SUBCOMMANDS)) == len(cli.SUBCOMMANDS)


def test_fleet_commands_holds_the_subcommands_and_nothing_else() -> None:
    """A module there that is no subcommand would be code two commands share, which belongs below them."""
    modules = {p.stem for p in (REPO_ROOT / "fleet" / "commands").glob("*.py") if p.stem != "__init__"}
    assert modules == set(cli.SUBCOMMANDS)


def fake_module(monkeypatch: pytest.MonkeyPatch, run: object) -> None:
    module = types.ModuleType("fleet.commands.fake")
    module.HELP = "a fake subcommand"  # type: ignore[attr-defined]
    module.add_arguments = lambda parser: parser.add_argument("--flag")  # type: ignore[attr-defined]
    module.run = run  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "fleet.commands.fake", module)


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
    module = types.ModuleType("fleet.commands.broken")
    module.HELP = "x"  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "fleet.commands.broken", module)
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


@pytest.mark.parametrize("make", ["file", "unwritable"])
def test_a_bad_out_is_one_message_before_any_query(make: str, tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    """Checked before the queries (port 1 would answer 'cannot reach' if one were sent)."""
    out = tmp_path / "out"
    if make == "file":
        out.write_text("a report of last week")
        expected = f"--out: {out} is not a directory"
    else:
        out = Path("/proc/no-such-dir/out")  # /proc takes no new directories, even as root
        expected = f"--out: cannot write into {out}"
    assert cli.main(["report", "--since", "1h", "--out", str(out), "--prometheus", "http://127.0.0.1:1"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"gpu-fleet report: {expected}") and "cannot reach" not in err


def test_a_full_disk_on_stdout_is_one_message() -> None:
    """/dev/full: every write fails with ENOSPC, as a full disk does."""
    gpu_fleet = str(Path(sys.executable).parent / "gpu-fleet")
    with open("/dev/full", "w") as full:
        done = subprocess.run([gpu_fleet, "estimate", "--params", "70B", "--dtype", "fp16", "--gpu-memory",
                               "80GiB"], stdout=full, stderr=subprocess.PIPE, text=True, timeout=60,
                              check=False)
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    assert done.stderr.strip() == "gpu-fleet estimate: cannot write the output: No space left on device"
