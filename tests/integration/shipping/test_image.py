"""The container image, built from the repository with buildah and run: what the DaemonSet and the Deployment
run, checked by running it, not by reading the Dockerfile.

No image registry is reachable here, so the base the Dockerfile's PYTHON_IMAGE names is made with Debian's
mmdebstrap (the Essential packages plus python3, python3-venv, python-is-python3 and passwd) written into a
scratch buildah container and committed, and passed as `--build-arg PYTHON_IMAGE=...`. mmdebstrap rather than
debootstrap: it installs with apt in one pass, in a third of debootstrap's CPU. buildah builds as root without
a daemon (`--isolation chroot`, storage under the test's temporary directory, so nothing of the machine's own
storage is touched): `overlay` storage where the kernel mounts it, else `vfs`, which copies every layer whole
and takes about twice the CPU. Where the machine reaches the package index through a proxy with its own
certificate authority, the build gets the host's trust store, mounted read-only, and pip is told where it is
(PIP_CERT): verification stays on.

Then the image is run: `gpu-exporter --simulate 2` answers /metrics with the contract metrics as uid 65532,
`gpu-autoscaler check` passes on a shipped example, `gpu-fleet --help` works (the Dockerfile's last RUN
starts all three console scripts), and the final stage holds no compiler and no pip cache. The image's size
is reported.

The build takes minutes on a busy machine, so the test says what it is doing as it goes: a line per stage
(the base, each FROM and RUN of the Dockerfile, the checks) on the terminal, past pytest's capture, with the
seconds since the build began.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest

from demo.processes import free_port
from tests.unit.shipping.markdown import ROOT

pytestmark = [pytest.mark.integration, pytest.mark.image]

HOST_CA = Path("/etc/ssl/certs/ca-certificates.crt")
CONTRACT_METRICS = ("gpu_utilization_ratio", "gpu_memory_used_bytes", "gpu_temperature_celsius",
                    "gpu_power_usage_watts", "gpu_up", "gpu_health_state", "gpu_availability_score",
                    "gpu_exporter_nvml_up")
NONROOT = "65532"
NICE = ("nice", "-n", "10")
"""The build is the suite's heaviest work: at a low priority it takes mostly what the other tests leave. Not
the lowest: against two busy loops at priority 0 (another job on the machine), nice 19 got about 1 % of a
core and mmdebstrap outlasted its 600 s; nice 10 gets about a tenth."""
COMPILERS = ("gcc", "cc", "g++", "c++", "clang", "make")
BASE_PACKAGES = "python3,python3-venv,python-is-python3,passwd"
"""What the Dockerfile needs of its base: `python -m venv` and `useradd` (the python:3.11-slim images have
them); apt is left out, which only an architecture without binary wheels would use."""
BASE_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
STEP = re.compile(r"(?:\[\d+/\d+\] )?STEP \d+/\d+: (?:FROM|RUN) .*")
"""A FROM or RUN step of `buildah build` (`[1/2] STEP 6/13: RUN ...`): the steps that take the time."""


class Progress:
    """Lines on the terminal while the image builds, past pytest's capture (also under xdist: a worker's
    stderr is the run's), each with the seconds since the first."""

    def __init__(self, config: pytest.Config) -> None:
        self._capture = config.pluginmanager.getplugin("capturemanager")
        self._start = time.monotonic()

    def say(self, line: str) -> None:
        text = f"[image {time.monotonic() - self._start:4.0f} s] {line[:110]}"
        if self._capture is None:
            print(text, file=sys.stderr, flush=True)
            return
        with self._capture.global_and_fixture_disabled():
            print(text, file=sys.stderr, flush=True)


@dataclass(frozen=True)
class Buildah:
    """buildah with its storage under one directory, with one storage driver."""

    root: Path
    driver: str = "overlay"

    def command(self, *args: str) -> list[str]:
        executable = shutil.which("buildah") or "buildah"
        return [*NICE, executable, "--root", str(self.root / "storage"), "--runroot", str(self.root / "run"),
                "--storage-driver", self.driver, *args]

    def mounts(self) -> bool:
        """Whether a container of this driver can be mounted here (overlay needs the kernel's leave)."""
        made = subprocess.run(self.command("from", "scratch"), capture_output=True, text=True, check=False)
        if made.returncode != 0:
            return False
        container = made.stdout.strip()
        mounted = subprocess.run(self.command("mount", container), capture_output=True, check=False)
        subprocess.run(self.command("rm", container), capture_output=True, check=False)
        return mounted.returncode == 0

    def run(self, *args: str, timeout: float = 300) -> str:
        done = subprocess.run(self.command(*args), capture_output=True, text=True, timeout=timeout,
                              check=False)
        assert done.returncode == 0, f"buildah {' '.join(args[:3])} failed:\n{done.stderr[-3000:]}"
        return done.stdout.strip()

    def build(self, *args: str, progress: Progress, timeout: float) -> None:
        """`buildah build args`, each step announced as buildah starts it; its output's tail on failure."""
        deadline = time.monotonic() + timeout
        tail: list[str] = []
        with subprocess.Popen(self.command("build", *args), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              text=True) as build:
            assert build.stdout is not None
            for line in build.stdout:
                tail = [*tail[-60:], line]
                if STEP.fullmatch(line.strip()):
                    progress.say(" ".join(line.split()))
                if time.monotonic() > deadline:
                    build.kill()
                    break
            returncode = build.wait(timeout=60)
        assert returncode == 0, f"buildah build failed ({returncode}):\n{''.join(tail)[-3000:]}"

    def inside(self, container: str, *argv: str, volumes: Sequence[str] = (),
               user: str | None = None) -> subprocess.CompletedProcess[str]:
        """`argv` run in `container` as the image's user (or `user`), each volume `host:path[:ro]` mounted."""
        options = [arg for volume in volumes for arg in ("--volume", volume)]
        options += ["--user", user] if user else []
        return subprocess.run(self.command("run", "--isolation", "chroot", *options, container, "--", *argv),
                              capture_output=True, text=True, timeout=60, check=False)


def requirements() -> str | None:
    """Why the image cannot be built here (None: it can)."""
    missing = [tool for tool in ("buildah", "mmdebstrap") if shutil.which(tool) is None]
    if missing:
        return f"{' and '.join(missing)} not installed (scripts/setup.sh --for-tests installs them as root)"
    if os.geteuid() != 0:
        return "buildah --isolation chroot and mmdebstrap need root"
    return None


@pytest.fixture(scope="session")
def progress(pytestconfig: pytest.Config) -> Progress:
    return Progress(pytestconfig)


@pytest.fixture(scope="session")
def buildah(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Buildah]:
    why = requirements()
    if why is not None:
        pytest.skip(why)
    root = tmp_path_factory.mktemp("buildah")
    tool = Buildah(root)
    if not tool.mounts():
        shutil.rmtree(root / "storage", ignore_errors=True)
        tool = Buildah(root, driver="vfs")
    yield tool
    subprocess.run(tool.command("rm", "--all"), capture_output=True, check=False)
    shutil.rmtree(tool.root, ignore_errors=True)  # half a gigabyte of layers


@pytest.fixture(scope="session")
def base_image(buildah: Buildah, progress: Progress) -> str:
    """A minimal Debian with Python, made once per test session: mmdebstrap writes straight into a scratch
    container's mounted root (no tar of it to make and unpack again), then it is committed."""
    progress.say(f"base: mmdebstrap bookworm with {BASE_PACKAGES} ({buildah.driver} storage)")
    container = buildah.run("from", "scratch")
    rootfs = buildah.run("mount", container)
    done = subprocess.run([*NICE, "mmdebstrap", "--quiet", "--variant=essential",
                           f"--include={BASE_PACKAGES}", "bookworm", rootfs],
                          capture_output=True, text=True, timeout=1200, check=False)
    assert done.returncode == 0, f"mmdebstrap failed:\n{done.stdout[-2000:]}{done.stderr[-2000:]}"
    buildah.run("umount", container)
    buildah.run("config", "--env", f"PATH={BASE_PATH}", container)
    buildah.run("commit", "--quiet", "--rm", container, "localhost/gpu-autoscaler-test-base:bookworm")
    progress.say("base: committed")
    return "localhost/gpu-autoscaler-test-base:bookworm"


@pytest.fixture(scope="session")
def image(buildah: Buildah, base_image: str, progress: Progress) -> str:
    trust = ([f"--volume={HOST_CA}:/run/host-ca.crt:ro", "--build-arg", "PIP_CERT=/run/host-ca.crt"]
             if HOST_CA.is_file() else [])
    buildah.build("--isolation", "chroot", "--build-arg", f"PYTHON_IMAGE={base_image}", *trust,
                  "--tag", "localhost/gpu-autoscaler:test", "--file", str(ROOT / "Dockerfile"), str(ROOT),
                  progress=progress, timeout=1200)
    progress.say("built: localhost/gpu-autoscaler:test")
    return "localhost/gpu-autoscaler:test"


def scrape(url: str, deadline: float) -> str:
    last: Exception | None = None
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(url, timeout=5) as response:
                return str(response.read().decode())
        except OSError as exc:
            last = exc
            time.sleep(0.5)
    raise AssertionError(f"{url} never answered: {last}")


@pytest.mark.timeout(2700)  # a hang guard: the base and the build count in it
def test_the_image_builds_and_runs(buildah: Buildah, image: str, progress: Progress) -> None:
    progress.say("checks: the user, an example, no compiler or pip cache, gpu-exporter serving")
    container = buildah.run("from", "--quiet", image)
    # One run as the image's user, not one per check (each `buildah run` sets up a container): who it is,
    # and a shipped example checked (the Dockerfile's last RUN starts every console script: a build that
    # passed has them).
    examples = f"{ROOT / 'examples'}:/examples:ro"
    script = ("id -u && gpu-fleet --help >/dev/null && "
              "gpu-autoscaler check --rules /examples/gpu-inference-rules.yaml")
    checked = buildah.inside(container, "sh", "-c", script, volumes=[examples])
    assert checked.returncode == 0, checked.stdout + checked.stderr
    who, verdict = checked.stdout.splitlines()[0], checked.stdout.splitlines()[-1]
    assert who == NONROOT and "OK:" in verdict, checked.stdout

    compilers = buildah.inside(container, "sh", "-c",
                               f"for c in {' '.join(COMPILERS)}; do command -v $c; done; "
                               "ls -d /root/.cache/pip /tmp/pip-* /home/*/.cache/pip /opt/venv/.cache "
                               "2>/dev/null; true", user="0:0")  # root sees every home
    assert compilers.returncode == 0 and compilers.stdout.strip() == "", (
        f"the final stage holds a compiler or a pip cache: {compilers.stdout}")

    port = free_port()
    exporter = subprocess.Popen(
        buildah.command("run", "--isolation", "chroot", container, "--", "gpu-exporter", "--simulate", "2",
                        "--address", "127.0.0.1", "--port", str(port)),
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)
    try:
        metrics = scrape(f"http://127.0.0.1:{port}/metrics", time.monotonic() + 60)
    finally:
        os.killpg(exporter.pid, 15)
        output, _ = exporter.communicate(timeout=30)
    for name in CONTRACT_METRICS:
        assert f"\n{name}{{" in metrics or f"\n{name} " in metrics, f"{name} missing from /metrics"
    assert 'gpu_up{' in metrics and metrics.count("gpu_up{") == 2, "two simulated GPUs"
    assert "Traceback" not in output, output[-2000:]

    size = buildah.run("images", "--format", "{{.Size}}", image)
    print(f"image {image}: {size}")  # shown with -rA; docs/alerts-dashboards-manifests.md has the figure
    buildah.run("rm", container)
    progress.say(f"done: {size}")
