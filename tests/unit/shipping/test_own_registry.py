"""Installing from a machine without the helm binary, and from a registry of one's own.

`scripts/helm` (Helm's Go library through helm-python-sdk) renders exactly what the tests' Helm renders and
installs with `--dry-run` with no cluster; the one line the docs give for each installer (kustomize's
`images:`, the chart's `image.repository`) points every container at the user's registry.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.unit.shipping import helm_chart, kustomize
from tests.unit.shipping.markdown import ROOT

HELM = ROOT / "scripts" / "helm"
PAGES = (ROOT / "README.md", ROOT / "docs" / "alerts-dashboards-manifests.md")
OWN = "registry.example.com/team/gpu-autoscaler"
KUSTOMIZE_LINE = f"images: [{{name: ghcr.io/gpu-autoscaler/gpu-autoscaler, newName: {OWN}}}]"
HELM_FLAG = f"--set image.repository={OWN}"


def scripts_helm(*args: str, home: Path) -> subprocess.CompletedProcess[str]:
    """scripts/helm on this interpreter's virtualenv, with no kubeconfig anywhere."""
    env = {key: value for key, value in os.environ.items() if key != "KUBECONFIG"}
    env.update(VENV=str(Path(sys.executable).parent.parent), HOME=str(home))
    return subprocess.run([str(HELM), *args], capture_output=True, text=True, timeout=120, check=False,
                          cwd=ROOT, env=env)


def images(objects: list[dict[str, Any]]) -> set[str]:
    return {c["image"] for o in objects if o["kind"] in ("Deployment", "DaemonSet")
            for c in [*o["spec"]["template"]["spec"]["containers"],
                      *o["spec"]["template"]["spec"].get("initContainers", [])]}


def test_template_renders_what_helm_renders(tmp_path: Path) -> None:
    result = scripts_helm("template", "gpu-autoscaler", "charts/gpu-autoscaler", "-n", "gpu-autoscaler",
                          home=tmp_path)
    assert result.returncode == 0, result.stderr
    printed = [o for o in yaml.safe_load_all(result.stdout) if o]
    assert printed == helm_chart.render().objects


def test_install_dry_run_needs_no_cluster(tmp_path: Path) -> None:
    result = scripts_helm("install", "gpu-autoscaler", "charts/gpu-autoscaler", "-n", "gpu-autoscaler",
                          "-f", "charts/gpu-autoscaler/examples/prometheus-operator.yaml", "--dry-run",
                          home=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "NAME: gpu-autoscaler\nNAMESPACE: gpu-autoscaler\n" in result.stdout
    assert "kind: ServiceMonitor" in result.stdout and "NOTES:" in result.stdout


def test_bad_values_are_one_line_and_exit_2(tmp_path: Path) -> None:
    result = scripts_helm("template", "x", "charts/gpu-autoscaler", "-f", "nope.yaml", home=tmp_path)
    assert (result.returncode, result.stdout) == (2, "")
    assert result.stderr.startswith("scripts/helm template: -f nope.yaml: cannot read")
    refused = scripts_helm("template", "x", "charts/gpu-autoscaler", "--set", "image.pullPolicy=Sometimes",
                           home=tmp_path)
    assert refused.returncode == 1 and "pullPolicy" in refused.stderr  # the chart's schema, as helm says


@pytest.mark.parametrize("line", [KUSTOMIZE_LINE, HELM_FLAG])
def test_the_docs_give_the_one_line(line: str) -> None:
    for page in PAGES:
        assert line in page.read_text(), f"{page.relative_to(ROOT)} does not show `{line}`"


def test_the_helm_line_points_every_container_at_the_own_registry(tmp_path: Path) -> None:
    result = scripts_helm("template", "gpu-autoscaler", "charts/gpu-autoscaler", "-n", "gpu-autoscaler",
                          *HELM_FLAG.split(), home=tmp_path)
    assert result.returncode == 0, result.stderr
    assert images([o for o in yaml.safe_load_all(result.stdout) if o]) == {f"{OWN}:0.1.0"}


def test_the_kustomize_line_points_every_container_at_the_own_registry(tmp_path: Path) -> None:
    overlay = tmp_path / "mine"
    overlay.mkdir()
    base = os.path.relpath(ROOT / "manifests", overlay)  # kustomize takes no absolute path
    (overlay / "kustomization.yaml").write_text(f"resources: [{base}]\n{KUSTOMIZE_LINE}\n")
    assert images(kustomize.render(overlay)) == {f"{OWN}:0.1.0"}
    assert images(kustomize.render(ROOT / "manifests")) == {"ghcr.io/gpu-autoscaler/gpu-autoscaler:0.1.0"}
