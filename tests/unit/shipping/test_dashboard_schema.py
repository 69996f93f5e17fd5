"""dashboards/*.json type-check, strictly, against Grafana's own `Dashboard` type from @grafana/schema: each
file becomes `export const dashboard = <json> satisfies Dashboard;` and the
TypeScript compiler checks it in strict mode, so a missing required field, a wrong type or a key Grafana does
not know (excess property check) is an error at its line.

npm installs both packages once per test session into the test's own temporary folder, from the lock in
tests/unit/shipping/grafana_schema/ (`npm ci`: the release that was the latest when it was locked, so a new
upstream release cannot turn the suite red). scripts/check-latest.sh sets LATEST_NPM_PACKAGES=1 to take the
newest releases instead. The test is skipped only where npm is absent; a failed install fails it.
"""

from __future__ import annotations

import copy
import json
import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.unit.shipping.test_dashboards import DASHBOARD_FILES, load

NPM = shutil.which("npm")
LOCKED = Path(__file__).parent / "grafana_schema"
Errors = dict[str, list[tuple[int, str]]]
"""Per dashboard, the (line, message) of each type error."""
ERROR = re.compile(r"^(?P<file>[\w.-]+)\.ts\((?P<line>\d+),\d+\): error (?P<message>.*)$")

pytestmark = pytest.mark.skipif(NPM is None, reason="npm is not installed: the dashboards cannot be "
                                "type-checked against Grafana's @grafana/schema")


@pytest.fixture(scope="session")
def typescript(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder with @grafana/schema and the TypeScript compiler installed."""
    assert NPM is not None
    root = tmp_path_factory.mktemp("grafana-schema")
    wanted = json.loads((LOCKED / "package.json").read_text())["dependencies"]
    if os.environ.get("LATEST_NPM_PACKAGES") == "1":
        (root / "package.json").write_text(json.dumps({"private": True,
                                                       "dependencies": dict.fromkeys(wanted, "latest")}))
        verb = "install"
    else:
        for name in ("package.json", "package-lock.json"):
            shutil.copyfile(LOCKED / name, root / name)
        verb = "ci"
    install = [NPM, verb, "--no-audit", "--no-fund", "--ignore-scripts", "--loglevel=error"]
    result = subprocess.run(install, cwd=root, capture_output=True, text=True, timeout=300, check=False)
    assert result.returncode == 0, f"npm {verb} {' '.join(wanted)}: {result.stderr.strip()[-2000:]}"
    return root


def as_typescript(dashboard: dict[str, Any]) -> str:
    return ('import type { Dashboard } from "@grafana/schema";\n'
            f"export const dashboard = {json.dumps(dashboard, indent=2)} satisfies Dashboard;\n")


def type_errors(root: Path, dashboards: dict[str, dict[str, Any]]) -> Errors:
    """tsc --strict over every dashboard at once: {name: [(line, message), ...]}, empty for a valid one."""
    for name, dashboard in dashboards.items():
        (root / f"{name}.ts").write_text(as_typescript(dashboard))
    (root / "tsconfig.json").write_text(json.dumps({
        "compilerOptions": {"strict": True, "noEmit": True, "module": "nodenext",
                            "moduleResolution": "nodenext", "target": "es2022", "skipLibCheck": True,
                            "types": []},
        "files": [f"{name}.ts" for name in dashboards]}))
    result = subprocess.run([str(root / "node_modules" / ".bin" / "tsc"), "-p", str(root)], cwd=root,
                            capture_output=True, text=True, timeout=120, check=False)
    errors: Errors = {name: [] for name in dashboards}
    for text in (result.stdout + result.stderr).splitlines():
        if match := ERROR.match(text):
            errors[match["file"]].append((int(match["line"]), match["message"]))
        elif text.strip() and not text.startswith(" "):  # continuation lines of a message are indented
            pytest.fail(f"tsc: {text}")
    assert (result.returncode == 0) == (not any(errors.values())), result.stdout + result.stderr
    return errors


def broken(dashboard: dict[str, Any]) -> dict[str, Any]:
    """The dashboard with three faults Grafana's type refuses, each on a line of its own: a variable's
    `current` without text and value (what the generator once wrote), and keys Grafana does not know on a
    panel and on a panel's position."""
    dashboard = copy.deepcopy(dashboard)
    dashboard["templating"]["list"][-1]["current"] = {}
    dashboard["panels"][0]["planted"] = True
    dashboard["panels"][1]["gridPos"]["planted"] = 1
    return dashboard


def test_dashboards_type_check_against_grafanas_dashboard_type(typescript: Path) -> None:
    """One test, so one npm install per run however the tests are spread over workers; the planted faults
    prove that the check can fail."""
    dashboards = {path.stem: load(path) for path in DASHBOARD_FILES}
    refused = broken(load(DASHBOARD_FILES[0]))
    errors = type_errors(typescript, dashboards | {"refused": refused})
    assert {name: errors[name] for name in dashboards} == {name: [] for name in dashboards}
    lines = as_typescript(refused).splitlines()
    planted = {number for number, line in enumerate(lines, start=1)
               if '"current": {}' in line or '"planted":' in line}
    assert len(planted) == 3
    assert {line for line, _ in errors["refused"]} == planted
