"""The lock files agree with pyproject.toml, and the suite runs on what they pin.

`scripts/lock.sh --check` re-resolves against the package index, which tests may not reach; this reads the
same agreement from the files alone: every range pyproject.toml states has a pin that satisfies it, every
package the lock says is wanted by pyproject.toml is still wanted there, every pin is reachable from
pyproject.toml and carries hashes, runtime.txt and build.txt (the image's) pin what all.txt pins, and the
virtualenv running this test holds exactly the pinned versions (scripts/setup.sh installed the lock).
"""

from __future__ import annotations

import importlib.metadata
import re
import sys
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from packaging.markers import Marker
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

from tests.unit.shipping.promql_names import ROOT

PYPROJECT = re.compile(r"gpu-autoscaler \(pyproject\.toml(:\w+)?\)")
"""How a `# via` note names pyproject.toml (with `:group` for a dependency group)."""


@dataclass
class Pin:
    name: str
    version: Version
    marker: Marker | None
    hashes: int
    via: list[str] = field(default_factory=list)


def read_lock(path: Path) -> list[Pin]:
    """The pins of a hash-pinned requirements file as `uv pip compile` writes it (with `# via` notes)."""
    pins: list[Pin] = []
    for line in path.read_text().splitlines():
        if match := re.match(r"([A-Za-z0-9][A-Za-z0-9._-]*)==(\S+)(?: ; (.*?))?(?: \\)?$", line):
            name, version, marker = match.groups()
            pins.append(Pin(canonicalize_name(name), Version(version), Marker(marker) if marker else None, 0))
        elif line.strip().startswith("--hash=sha256:") and pins:
            pins[-1].hashes += 1
        elif (note := re.match(r"\s+# (?:via )?\s*(\S.*)$", line)) and pins and note.group(1) != "via":
            pins[-1].via.append(note.group(1))
    return pins


def pyproject() -> dict[str, object]:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())


def runtime_requirements() -> list[Requirement]:
    return [Requirement(text) for text in pyproject()["project"]["dependencies"]]  # type: ignore[index]


def all_requirements() -> list[Requirement]:
    data = pyproject()
    extras = data["project"]["optional-dependencies"]  # type: ignore[index]
    groups = data["dependency-groups"]  # type: ignore[index]
    texts = [*data["project"]["dependencies"], *(t for ts in extras.values() for t in ts),  # type: ignore[index]
             *(t for ts in groups.values() for t in ts)]
    return [Requirement(text) for text in texts]


def build_requirements() -> list[Requirement]:
    groups = pyproject()["dependency-groups"]  # type: ignore[index]
    return [Requirement(text) for text in groups["tools"]]  # type: ignore[index]


LOCKS = {"runtime.txt": runtime_requirements, "all.txt": all_requirements, "build.txt": build_requirements}


@pytest.mark.parametrize("lock", sorted(LOCKS))
def test_every_range_of_pyproject_has_a_pin_that_satisfies_it(lock: str) -> None:
    pins = read_lock(ROOT / "requirements" / lock)
    for requirement in LOCKS[lock]():
        found = [pin for pin in pins if pin.name == canonicalize_name(requirement.name)]
        assert found, f"requirements/{lock} pins no {requirement.name}: run scripts/lock.sh"
        for pin in found:
            assert requirement.specifier.contains(pin.version, prereleases=True), (
                f"requirements/{lock} pins {pin.name}=={pin.version}, outside pyproject.toml's "
                f"{requirement}: run scripts/lock.sh")


@pytest.mark.parametrize("lock", sorted(LOCKS))
def test_every_pin_is_wanted_and_hashed(lock: str) -> None:
    pins = read_lock(ROOT / "requirements" / lock)
    wanted = {canonicalize_name(r.name) for r in LOCKS[lock]()}
    names = {pin.name for pin in pins}
    for pin in pins:
        assert pin.hashes >= 1, f"requirements/{lock}: {pin.name} has no --hash"
        assert pin.via, f"requirements/{lock}: {pin.name} says nothing of who wants it"
        from_pyproject = any(PYPROJECT.fullmatch(v) for v in pin.via)
        if from_pyproject:
            assert pin.name in wanted, (f"requirements/{lock} pins {pin.name} for pyproject.toml, which no "
                                        "longer asks for it: run scripts/lock.sh")
        others = [v for v in pin.via if not PYPROJECT.fullmatch(v) and not v.startswith("-c ")]
        assert from_pyproject or any(canonicalize_name(v) in names for v in others), (
            f"requirements/{lock}: {pin.name} is wanted by {pin.via}, none of them locked")


@pytest.mark.parametrize("lock", ["runtime.txt", "build.txt"])
def test_the_image_locks_pin_what_all_pins(lock: str) -> None:
    """What the image installs (runtime.txt, with build.txt's uv) is what the suite ran against."""
    part = {(p.name, str(p.marker)): p.version for p in read_lock(ROOT / "requirements" / lock)}
    full = {(p.name, str(p.marker)): p.version for p in read_lock(ROOT / "requirements" / "all.txt")}
    assert part and part.keys() <= full.keys()
    assert {key: full[key] for key in part} == part


def test_the_running_virtualenv_holds_the_pinned_versions() -> None:
    """What scripts/setup.sh installed is what the lock says (scripts/check-latest.sh runs elsewhere)."""
    if Path(sys.prefix).name != ".venv":
        pytest.skip("not the project's .venv (scripts/check-latest.sh tests the newest versions instead)")
    wrong = []
    for pin in read_lock(ROOT / "requirements" / "all.txt"):
        if pin.marker is not None and not pin.marker.evaluate():
            continue
        try:
            installed = Version(importlib.metadata.version(pin.name))
        except importlib.metadata.PackageNotFoundError:
            wrong.append(f"{pin.name} not installed")
            continue
        if installed != pin.version:
            wrong.append(f"{pin.name} {installed} (locked {pin.version})")
    assert not wrong, "the virtualenv differs from requirements/all.txt: " + ", ".join(wrong)


def test_the_reader_sees_every_pin() -> None:
    """The parser above must not skip lines: as many pins as lines that start a requirement."""
    text = (ROOT / "requirements" / "all.txt").read_text()
    starts = re.findall(r"^[A-Za-z0-9]", text, re.M)
    assert len(read_lock(ROOT / "requirements" / "all.txt")) == len(starts) > 50
    assert re.search(r"^uv==", text, re.M), "setup.sh bootstraps the uv that all.txt pins"
