"""The layers of pyproject.toml's [tool.importlinter] hold, and the same contracts catch a violation.

`lint-imports` runs as a subprocess from the venv, so the check is the one a developer runs by hand. The
second half copies the real contracts next to a tree of empty stand-in packages and plants forbidden imports
there, each of which the report must name: a contract that could never fail would pass there too.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest

from tests import REPO_ROOT

ROOT = REPO_ROOT
LINT_IMPORTS = Path(sys.executable).parent / "lint-imports"


def contracts() -> list[dict[str, Any]]:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
    return list(config["contracts"])


def lint_imports(cwd: Path) -> subprocess.CompletedProcess[str]:
    """Run the contracts of `cwd/pyproject.toml` over the packages under `cwd` (no cache left behind)."""
    return subprocess.run([str(LINT_IMPORTS), "--no-cache"], cwd=cwd, capture_output=True, text=True,
                          timeout=60, check=False)


def test_the_repository_keeps_every_contract() -> None:
    result = lint_imports(ROOT)
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"Contracts: {len(contracts())} kept, 0 broken." in result.stdout, result.stdout


def test_the_policy_contract_names_every_autoscaler_package_outside_the_engine() -> None:
    """A new package of the autoscaler is forbidden to the engine the day it is added; a new module inside a
    package needs no edit (the layers contract places it by its package)."""
    policy = next(c for c in contracts() if c.get("source_modules") == ["autoscaler.policy"])
    forbidden = set(policy["forbidden_modules"])
    outside = {f"autoscaler.{p.stem}" for p in (ROOT / "autoscaler").glob("*.py") if p.stem != "__init__"}
    outside |= {f"autoscaler.{p.parent.name}" for p in (ROOT / "autoscaler").glob("*/__init__.py")}
    outside.discard("autoscaler.policy")
    assert outside - forbidden == set()


def test_the_layers_name_every_autoscaler_package() -> None:
    """Every package of the autoscaler stands in the layers contract (errors and reasons are modules)."""
    layers = next(c for c in contracts() if c.get("containers") == ["autoscaler"])
    packages = {p.parent.name for p in (ROOT / "autoscaler").glob("*/__init__.py")}
    assert packages == set(layers["layers"])


OURS = {"exporter", "autoscaler", "plumbing", "fleet", "demo", "benchmarks", "tests"}


def layer_names(layer: str) -> list[str]:
    """The modules of one layer: `a | b` (independent siblings) or `a : b` (siblings that may import each
    other) name several."""
    return [name.strip() for name in re.split(r"[|:]", layer)]


def stand_in_tree(tmp_path: Path) -> Path:
    """Empty packages and modules for every internal name the contracts mention and every module a planted
    violation below names (a contract's `fleet.commands.*` matches those), plus the real contracts."""
    names = {*OURS, "autoscaler.policy"}
    for contract in contracts():
        for key in ("source_modules", "forbidden_modules", "modules"):
            names.update(str(n) for n in contract.get(key, ()))
        for container in contract.get("containers", ()):
            names.update(f"{container}.{name}" for layer in contract["layers"] for name in layer_names(layer))
    names.update(name for path, line in VIOLATIONS.values() for name in (importer_of(path), line.split()[1]))
    for name in sorted(names):
        if name.split(".")[0] not in OURS or "*" in name:
            continue  # third-party and standard library names are not ours to fake; a wildcard is no module
        package = tmp_path.joinpath(*name.split("."))
        package.mkdir(parents=True, exist_ok=True)
        (package / "__init__.py").touch()
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    return tmp_path


VIOLATIONS = {
    "policy-reads-the-clock": ("autoscaler/policy/__init__.py", "import time\n"),
    "policy-logs": ("autoscaler/policy/__init__.py", "import logging\n"),
    "policy-imports-the-loader": ("autoscaler/policy/__init__.py", "import autoscaler.config\n"),
    "policy-talks-to-kubernetes": ("autoscaler/policy/__init__.py", "import kubernetes\n"),
    "exporter-imports-autoscaler": ("exporter/__init__.py", "import autoscaler.planning\n"),
    "autoscaler-imports-exporter": ("autoscaler/planning/__init__.py", "import exporter\n"),
    "kube-imports-the-controller": ("autoscaler/kube/__init__.py", "import autoscaler.controller\n"),
    "config-imports-planning": ("autoscaler/config/__init__.py", "import autoscaler.planning\n"),
    "controller-imports-the-cli": ("autoscaler/controller/__init__.py", "import autoscaler.cli\n"),
    "controller-loads-the-client": ("autoscaler/controller/__init__.py", "import kubernetes\n"),
    "demo-loads-the-client": ("demo/__init__.py", "import kubernetes\n"),
    "errors-import-the-engine": ("autoscaler/errors/__init__.py", "import autoscaler.policy\n"),
    "fleet-imports-autoscaler": ("fleet/__init__.py", "import autoscaler.errors\n"),
    "plumbing-imports-exporter": ("plumbing/__init__.py", "import exporter\n"),
    "production-imports-demo": ("autoscaler/__init__.py", "import demo\n"),
    "production-imports-tests": ("exporter/__init__.py", "import tests\n"),
    "production-imports-benchmarks": ("plumbing/__init__.py", "import benchmarks\n"),
    "exporter-imports-fleet": ("exporter/__init__.py", "import fleet\n"),
    "autoscaler-imports-fleet": ("autoscaler/planning/__init__.py", "import fleet\n"),
    "plumbing-imports-fleet": ("plumbing/__init__.py", "import fleet\n"),
    "fleet-imports-exporter": ("fleet/__init__.py", "import exporter\n"),
    "fleet-imports-tests": ("fleet/__init__.py", "import tests\n"),
    "command-imports-command": ("fleet/commands/estimate/__init__.py", "import fleet.commands.select\n"),
    "fleet-shared-imports-a-command": ("fleet/placing/__init__.py", "import fleet.commands.wait\n"),
    "fleet-sizing-imports-placing": ("fleet/sizing/__init__.py", "import fleet.placing\n"),
    "fleet-querying-imports-reporting": ("fleet/querying/__init__.py", "import fleet.reporting\n"),
    "fleet-output-imports-querying": ("fleet/output/__init__.py", "import fleet.querying\n"),
    "fleet-imports-its-dispatcher": ("fleet/commands/__init__.py", "import fleet.cli\n"),
    "exporter-pods-import-the-collector": ("exporter/pods/__init__.py", "import exporter.collector\n"),
    "exporter-health-imports-pods": ("exporter/health/__init__.py", "import exporter.pods\n"),
    "exporter-scrape-imports-pods": ("exporter/scrape/__init__.py", "import exporter.pods\n"),
    "exporter-nvml-imports-scrape": ("exporter/nvml/__init__.py", "import exporter.scrape\n"),
    "exporter-collector-imports-serving": ("exporter/collector/__init__.py", "import exporter.serving\n"),
}


def importer_of(path: str) -> str:
    return path.removesuffix("/__init__.py").replace("/", ".")


def test_the_stand_in_tree_keeps_every_contract(tmp_path: Path) -> None:
    """The control for the cases below: without a planted import, nothing is broken."""
    result = lint_imports(stand_in_tree(tmp_path))
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.fixture(scope="module")
def planted(tmp_path_factory: pytest.TempPathFactory) -> subprocess.CompletedProcess[str]:
    """Every violation below planted in one stand-in tree, checked by one `lint-imports` run (a run takes a
    fifth of a second; each violation names its own importer and imported module in the report)."""
    tree = stand_in_tree(tmp_path_factory.mktemp("planted"))
    for path, line in VIOLATIONS.values():
        with (tree / path).open("a") as module:
            module.write(line)
    return lint_imports(tree)


@pytest.mark.parametrize(("path", "line"), VIOLATIONS.values(), ids=VIOLATIONS.keys())
def test_a_planted_forbidden_import_breaks_a_contract(planted: subprocess.CompletedProcess[str], path: str,
                                                      line: str) -> None:
    assert planted.returncode == 1, planted.stdout + planted.stderr
    importer = importer_of(path)
    imported = line.split()[1]
    assert f"{importer} -> {imported}" in planted.stdout, planted.stdout
