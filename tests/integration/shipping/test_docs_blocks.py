"""Every runnable shell block of README.md and docs/*.md, run as written: a page's blocks in order in one
bash, as a reader runs them in one terminal.

Each page runs in a network namespace of its own (`unshare --net`, loopback only), so the ports the docs name
(9090, 9400) are free whatever else the machine runs, and nothing can reach past this machine. The pages that
take their ports from `PROMETHEUS_PORT` and `EXPORTER_PORT` are given others (PORTS), so a command that still
names 9090 or 9400 fails here. The working directory is a scratch copy of the repository's top level (links to
its folders), where the page's commands find `.venv/`, `examples/` and `rules/` where the docs say. Every
process a page leaves behind is ended with its process group.

A page leaves nothing behind: the top level it ran in lists the same names after it as before, and its
temporary directory (`TMPDIR`, where `mktemp -d` makes the scratch directory a page writes Prometheus' data
and its files into) is empty again. Both are the page's own, so what other tests create meanwhile (xdist
runs them side by side, in the same /tmp) is never counted; test_doc_blocks.py checks that no block names
/tmp itself.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.unit.shipping.doc_blocks import page_script, runnable_pages
from tests.unit.shipping.markdown import ROOT

pytestmark = pytest.mark.integration

PAGE_TIMEOUT = 180.0
"""A hang guard for one page (Prometheus' first scrape takes 5 s; a page runs in under 30 s)."""
PORTS = {"PROMETHEUS_PORT": "19090", "EXPORTER_PORT": "19400"}
"""Not the docs' defaults: what a reader whose 9090 and 9400 are taken sets, as the docs say."""


def namespace_command() -> list[str] | None:
    """How to enter a fresh network namespace here: as root, or as a user with user namespaces."""
    unshare = shutil.which("unshare")
    if unshare is None:
        return None
    for command in ([unshare, "--net"], [unshare, "--user", "--map-root-user", "--net"]):
        if subprocess.run([*command, "true"], capture_output=True, check=False).returncode == 0:
            return command
    return None


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    """The repository's top level as links, in a scratch directory a page may write into."""
    space = tmp_path / "repo"
    space.mkdir()
    for entry in ROOT.iterdir():
        if entry.name not in (".git",):
            (space / entry.name).symlink_to(entry)
    return space


@pytest.mark.parametrize("page", runnable_pages(), ids=lambda page: page.relative_to(ROOT).as_posix())
def test_the_page_runs_as_written(page: Path, workspace: Path, tmp_path: Path) -> None:
    enter = namespace_command()
    if enter is None:
        pytest.skip("no network namespace here (unshare --net needs root or user namespaces)")
    script = tmp_path / "page.sh"
    script.write_text(page_script(page))
    # The venv the suite runs in first on PATH, as `./scripts/setup.sh` users have it (scripts/check-latest.sh
    # runs the docs on its own venv); no Prometheus URL or kubeconfig from the developer's shell.
    env = {key: value for key, value in os.environ.items()
           if key not in ("PROMETHEUS_URL", "KUBECONFIG", "KUBERNETES_SERVICE_HOST", "VIRTUAL_ENV")}
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    env.update(PORTS, PATH=f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}",
               HOME=str(tmp_path), TMPDIR=str(scratch))
    before = sorted(entry.name for entry in workspace.iterdir())
    bash = shutil.which("bash") or "/bin/bash"
    log = tmp_path / "output.log"
    # Output to a file, not a pipe: a process a page leaves in the background keeps a pipe open.
    with log.open("w") as sink:
        process = subprocess.Popen(
            [*enter, bash, "-c", f'ip link set lo up && exec {bash} "$0"', str(script)], cwd=workspace,
            env=env, stdout=sink, stderr=subprocess.STDOUT, text=True, start_new_session=True)
    try:
        process.wait(timeout=PAGE_TIMEOUT)
    except subprocess.TimeoutExpired:
        pytest.fail(f"{page.name} still running after {PAGE_TIMEOUT:g} s:\n{log.read_text()[-3000:]}")
    finally:
        with contextlib.suppress(ProcessLookupError):  # with what the page left in the background
            os.killpg(process.pid, signal.SIGKILL)
        process.wait()
    output = log.read_text()
    announced = [line for line in output.splitlines() if line.startswith("::block ")]
    assert process.returncode == 0, (f"{announced[-1] if announced else page.name} failed "
                                     f"(exit {process.returncode}):\n{output[-3000:]}")
    expected = page_script(page).count("echo '::block ")
    assert len(announced) == expected, output[-3000:]
    assert sorted(entry.name for entry in workspace.iterdir()) == before, "left in the repository's top level"
    assert not list(scratch.iterdir()), "left in the temporary directory"
