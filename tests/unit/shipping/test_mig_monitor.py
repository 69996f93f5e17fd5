"""The MIG-monitor opt-in (manifests/components/mig-monitor, manifests/overlays/mig-monitor, the chart's
`exporter.migMonitorDevices`): the exporter gets NVIDIA_MIG_MONITOR_DEVICES=all and CAP_SYS_ADMIN, the one
capability the NVIDIA container toolkit requires for it, and nothing else changes; the component adds it to
any other overlay; off by default. Rendered by the real `kubectl kustomize` and Helm's own library."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

from tests.unit.shipping.helm_chart import render as helm_render
from tests.unit.shipping.kustomize import KustomizeError, key, render
from tests.unit.shipping.promql_names import ROOT

MANIFESTS = ROOT / "manifests"
COMPONENT = MANIFESTS / "components" / "mig-monitor"
MIG_MONITOR = {"name": "NVIDIA_MIG_MONITOR_DEVICES", "value": "all"}


def exporter(objects: list[dict[str, Any]]) -> dict[str, Any]:
    """The exporter DaemonSet's one container: the dict inside `objects`, not a copy."""
    (daemonset,) = [o for o in objects if key(o)[0::2] == ("DaemonSet", "gpu-exporter")]
    (container,) = daemonset["spec"]["template"]["spec"]["containers"]
    return container


def without_mig_monitor(objects: list[dict[str, Any]]) -> dict[tuple[str, str, str], dict[str, Any]]:
    """The objects by key, the exporter's two MIG-monitor changes taken out again."""
    container = exporter(objects)
    container["env"][:] = [e for e in container["env"] if e != MIG_MONITOR]
    container["securityContext"]["capabilities"].pop("add", None)
    return {key(o): o for o in objects}


def test_the_overlay_is_the_base_with_the_env_and_sys_admin_added() -> None:
    overlay = render(MANIFESTS / "overlays" / "mig-monitor")
    container = exporter(overlay)
    assert container["env"][-1] == MIG_MONITOR
    assert container["securityContext"]["capabilities"] == {"drop": ["ALL"], "add": ["SYS_ADMIN"]}
    assert container["securityContext"]["privileged"] is False
    assert container["securityContext"]["allowPrivilegeEscalation"] is False
    assert without_mig_monitor(overlay) == without_mig_monitor(render(MANIFESTS))


def test_the_base_and_the_charts_defaults_leave_it_out() -> None:
    for objects in (render(MANIFESTS), helm_render({}).objects):
        container = exporter(objects)
        assert MIG_MONITOR["name"] not in {e["name"] for e in container["env"]}
        assert container["securityContext"]["capabilities"] == {"drop": ["ALL"]}


def test_the_chart_value_adds_the_same_two_things() -> None:
    container = exporter(helm_render({"exporter": {"migMonitorDevices": True}}).objects)
    assert container["env"][-1] == MIG_MONITOR
    assert container["securityContext"]["capabilities"] == {"drop": ["ALL"], "add": ["SYS_ADMIN"]}


def test_the_component_adds_it_to_another_overlay(tmp_path: Path) -> None:
    """A user's own kustomization: the tls-auth overlay plus the component, as its comment says to write."""
    shutil.copytree(MANIFESTS, tmp_path / "manifests")
    mine = tmp_path / "manifests" / "overlays" / "mine"
    mine.mkdir()
    (mine / "kustomization.yaml").write_text(
        "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\n"
        "resources:\n  - ../tls-auth\ncomponents:\n  - ../../components/mig-monitor\n")
    combined = render(mine)
    container = exporter(combined)
    assert container["env"][-1] == MIG_MONITOR and "add" in container["securityContext"]["capabilities"]
    assert any(a.startswith("--web-config-file=") for a in container["args"])  # still tls-auth's exporter
    assert without_mig_monitor(combined) == without_mig_monitor(render(MANIFESTS / "overlays" / "tls-auth"))


@pytest.mark.parametrize(("old", "new", "path"), [
    ('drop: ["ALL"]', 'drop: ["NET_RAW"]', "capabilities/drop"),
    ("- name: gpu-exporter\n          image:", "- name: sidecar\n          image:", "containers/0/name"),
])
def test_the_components_test_operations_refuse_a_changed_base(tmp_path: Path, old: str, new: str,
                                                               path: str) -> None:
    """SYS_ADMIN is only ever added next to `drop: [ALL]`, and only to the exporter's container."""
    shutil.copytree(MANIFESTS, tmp_path / "manifests")
    daemonset = tmp_path / "manifests" / "base" / "exporter-daemonset.yaml"
    text = daemonset.read_text()
    assert text.count(old) == 1
    daemonset.write_text(text.replace(old, new))
    with pytest.raises(KustomizeError, match=path):
        render(tmp_path / "manifests" / "overlays" / "mig-monitor")
