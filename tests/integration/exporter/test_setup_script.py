"""scripts/setup.sh on a stock Debian whose python3 has no ensurepip (no python3-venv package), and how it
installs the lock.

The script runs for real with bash, in a copy of the project, with a PATH holding only stand-ins: a python3
that fails `-m venv` like Debian's (leaving bin/python behind) until python3-venv is installed, an apt-get
that installs it, an `id` that says root or not, a venv pip that installs a `uv` stand-in which logs what it
is asked to install. The project's own .venv is never touched.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests import REPO_ROOT

pytestmark = pytest.mark.integration

ROOT = REPO_ROOT
BASH = shutil.which("bash") or "/bin/bash"

FAKE_PYTHON = """#!{real}
# Debian's python3: everything real but ensurepip, which only python3-venv brings
import os, sys, pathlib
state = pathlib.Path(os.environ["FAKE_STATE"])
args = sys.argv[1:]
has_ensurepip = (state / "ensurepip").exists()
if args[:2] == ["-c", "import ensurepip"]:
    sys.exit(0 if has_ensurepip else 1)
if args[:2] == ["-m", "venv"]:
    with open(state / "venv.log", "a") as log:
        log.write(" ".join(args) + "\\n")
    bin_dir = pathlib.Path(args[2]) / "bin"
    bin_dir.mkdir(parents=True, exist_ok=True)
    (bin_dir / "python").write_text(os.environ["FAKE_VENV_PYTHON"])
    (bin_dir / "python").chmod(0o755)
    if not has_ensurepip:
        print("The virtual environment was not created successfully because ensurepip is not available.",
              file=sys.stderr)
        sys.exit(1)
    (bin_dir / "pip").touch()
    sys.exit(0)
os.execv("{real}", ["{real}", *args])
"""

FAKE_VENV_PYTHON = """#!{real}
import os, sys, pathlib
here = pathlib.Path(sys.argv[0]).parent
if sys.argv[1:3] == ["-m", "pip"]:
    if not (here / "pip").exists():
        print(sys.argv[0] + ": No module named pip", file=sys.stderr)
        sys.exit(1)
    if sys.argv[3:] == ["--version"]:
        sys.exit(0)
    with open(pathlib.Path(os.environ["FAKE_STATE"]) / "pip.log", "a") as log:
        log.write(" ".join(sys.argv[3:]) + "\\n")
    if "uv==0.13.9" in sys.argv:
        (here / "uv").write_text(os.environ["FAKE_UV"])
        (here / "uv").chmod(0o755)
    sys.exit(0)
sys.exit(3)
"""

FAKE_UV = """#!{bash}
if [ "$1" = --version ]; then echo "uv 0.13.9"; exit 0; fi
echo "$*" >> "$FAKE_STATE/uv.log"
echo "Resolved 2 packages in 1ms"
echo " + pyyaml==6.0.4"
"""

LOCK = "# scripts/lock.sh\npyyaml==6.0.4 \\\n    --hash=sha256:00\nuv==0.13.9 \\\n    --hash=sha256:11\n"

FAKE_APT = """#!{bash}
echo "$*" >> "$FAKE_STATE/apt.log"
case " $* " in *" python3-venv "*) touch "$FAKE_STATE/ensurepip" ;; esac
"""


class Machine:
    """A project copy plus a PATH of stand-ins; `run(root=...)` runs scripts/setup.sh there."""

    def __init__(self, tmp: Path) -> None:
        self.project = tmp / "project"
        (self.project / "scripts").mkdir(parents=True)
        shutil.copy(ROOT / "scripts" / "setup.sh", self.project / "scripts" / "setup.sh")
        (self.project / "pyproject.toml").write_text("[project]\nname = 'x'\n")
        (self.project / "requirements").mkdir()
        (self.project / "requirements" / "all.txt").write_text(LOCK)
        self.state = tmp / "state"
        self.state.mkdir()
        self.bin = tmp / "bin"
        self.bin.mkdir()
        for tool in ("dirname", "sha256sum", "cut", "rm", "touch", "cat", "grep", "sed"):
            found = shutil.which(tool)
            assert found, tool
            (self.bin / tool).symlink_to(found)
        self.script("python3", FAKE_PYTHON.format(real=sys.executable))
        (self.bin / "python3.11").symlink_to(self.bin / "python3")
        self.script("apt-get", FAKE_APT.format(bash=BASH))
        self.script("id", f'#!{BASH}\necho "$FAKE_UID"\n')
        for tool in ("prometheus", "promtool", "prometheus-alertmanager", "curl", "ip", "buildah",
                     "mmdebstrap"):
            self.script(tool, f"#!{BASH}\n")

    def script(self, name: str, text: str) -> None:
        path = self.bin / name
        path.write_text(text)
        path.chmod(0o755)

    def run(self, root: bool, *args: str) -> subprocess.CompletedProcess[str]:
        env = {"PATH": str(self.bin), "FAKE_STATE": str(self.state), "FAKE_UID": "0" if root else "1000",
               "FAKE_VENV_PYTHON": FAKE_VENV_PYTHON.format(real=sys.executable), "HOME": str(self.state),
               "FAKE_UV": FAKE_UV.format(bash=BASH)}
        return subprocess.run([BASH, "scripts/setup.sh", *args], cwd=self.project, env=env,
                              capture_output=True, text=True, timeout=60, check=False)

    def log(self, name: str) -> list[str]:
        path = self.state / name
        return path.read_text().splitlines() if path.exists() else []

    @property
    def venv(self) -> Path:
        return self.project / ".venv"


@pytest.fixture
def machine(tmp_path: Path) -> Machine:
    return Machine(tmp_path)


def test_the_broken_venv_a_failed_run_left_is_completed_as_root(machine: Machine) -> None:
    """The reported sequence: `python3 -m venv` failed without ensurepip and left bin/python behind."""
    (machine.venv / "bin").mkdir(parents=True)
    (machine.venv / "bin" / "python").write_text(FAKE_VENV_PYTHON.format(real=sys.executable))
    (machine.venv / "bin" / "python").chmod(0o755)
    (machine.venv / "keep-me").write_text("a file in the venv")

    result = machine.run(root=True)
    assert result.returncode == 0, result.stderr
    assert any("install" in line and "python3-venv" in line.split() for line in machine.log("apt.log"))
    assert machine.log("venv.log") == ["-m venv .venv"]  # never --clear: nothing deleted
    assert (machine.venv / "keep-me").exists() and (machine.venv / "bin" / "pip").exists()
    assert machine.log("pip.log") == ["install -q --disable-pip-version-check uv==0.13.9"]  # the lock's uv
    assert machine.log("uv.log") == [
        "pip sync --python .venv/bin/python --require-hashes requirements/all.txt",
        "pip install --quiet --python .venv/bin/python --no-deps -e .",
    ]
    assert list(machine.venv.glob(".installed-*"))
    # Each slow step is announced; uv's summary is shown, its line per package is not.
    assert "setup: installing uv==0.13.9 into .venv" in result.stderr
    assert "setup: installing 2 locked packages (requirements/all.txt" in result.stderr
    assert "Resolved 2 packages" in result.stderr and "+ pyyaml" not in result.stderr

    again = machine.run(root=True)  # quick second run: nothing to do
    assert again.returncode == 0 and again.stderr == ""
    assert len(machine.log("apt.log")) == 2 and len(machine.log("venv.log")) == 1
    assert len(machine.log("pip.log")) == 1 and len(machine.log("uv.log")) == 2


def test_not_root_without_ensurepip_says_which_package_to_install(machine: Machine) -> None:
    result = machine.run(root=False)
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1 and "sudo apt-get install python3-venv" in result.stderr
    assert "no ensurepip" in result.stderr and "Traceback" not in result.stderr
    assert machine.log("apt.log") == [] and machine.log("venv.log") == [] and not machine.venv.exists()


def test_a_working_venv_is_kept_and_only_reinstalled_into(machine: Machine) -> None:
    (machine.state / "ensurepip").touch()
    assert machine.run(root=False).returncode == 0
    (machine.venv / "keep-me").write_text("installed packages")
    (machine.project / "pyproject.toml").write_text("[project]\nname = 'x'\nversion = '2'\n")
    (machine.state / "ensurepip").unlink()  # ensurepip gone later: a working venv does not need it

    result = machine.run(root=False)
    assert result.returncode == 0, result.stderr
    assert machine.log("venv.log") == ["-m venv .venv"] and machine.log("apt.log") == []
    assert (machine.venv / "keep-me").exists()
    assert len(machine.log("pip.log")) == 1  # uv is bootstrapped once
    assert len(machine.log("uv.log")) == 4 and machine.log("uv.log")[2].startswith("pip sync ")
    assert len(list(machine.venv.glob(".installed-*"))) == 1  # the stamp of what is installed now

    (machine.project / "requirements" / "all.txt").write_text(LOCK.replace("6.0.4", "6.0.5"))
    assert machine.run(root=False).returncode == 0  # a new lock is installed too
    assert len(machine.log("uv.log")) == 6 and len(machine.log("pip.log")) == 1


def test_a_lock_without_uv_is_one_clear_error(machine: Machine) -> None:
    (machine.project / "requirements" / "all.txt").write_text("pyyaml==6.0.4 \\\n    --hash=sha256:00\n")
    result = machine.run(root=True)
    assert result.returncode == 2
    assert result.stderr == "setup: requirements/all.txt pins no uv; run scripts/lock.sh\n"


def test_a_venv_still_without_pip_after_venv_is_one_clear_error(machine: Machine) -> None:
    (machine.state / "ensurepip").touch()
    machine.script("python3", f"#!{sys.executable}\nimport os, sys\n"
                   "sys.exit(0) if sys.argv[1:2] == ['-m'] else os.execv("
                   f"{sys.executable!r}, [{sys.executable!r}, *sys.argv[1:]])\n")
    result = machine.run(root=False)
    assert result.returncode == 2 and result.stderr.splitlines()[-1].startswith(
        "setup: .venv/bin/python cannot run pip even after 'python3.11 -m venv .venv'")


def test_the_suites_own_debian_packages_only_for_the_suite(machine: Machine) -> None:
    """The demo does not wait for buildah: the image and docs tests' packages come with --for-tests only."""
    (machine.state / "ensurepip").touch()
    for tool in ("ip", "buildah", "mmdebstrap"):
        (machine.bin / tool).unlink()
    assert machine.run(root=True).returncode == 0
    assert machine.log("apt.log") == []  # the demo's packages are there: nothing to install
    result = machine.run(True, "--for-tests")
    assert result.returncode == 0, result.stderr
    installed = machine.log("apt.log")[-1].split()
    assert {"iproute2", "buildah", "mmdebstrap"} <= set(installed)
