"""Which nodes run the exporter: the DaemonSet's required node affinity, evaluated as the scheduler does
(terms ORed, expressions within a term ANDed), against the labels the GPU Operator and node-feature-discovery
really set; and docs/alerts-dashboards-manifests.md names exactly the labels the affinity selects on."""

from __future__ import annotations

import re
from typing import Any

import pytest

from tests.unit.shipping.kustomize import render
from tests.unit.shipping.promql_names import ROOT

NFD = "feature.node.kubernetes.io"
# (node, its labels, runs an exporter). Stock NFD labels PCI devices of the classes 03 (display), 0b40, 12 as
# pci-<class>_<vendor>.present; NFD with deviceLabelFields [vendor] (the GPU Operator's) as
# pci-<vendor>.present.
NODES: list[tuple[str, dict[str, str], bool]] = [
    ("gpu-operator", {"nvidia.com/gpu.present": "true"}, True),
    ("stock-nfd-3d-controller", {f"{NFD}/pci-0302_10de.present": "true"}, True),
    ("stock-nfd-vga-controller", {f"{NFD}/pci-0300_10de.present": "true"}, True),
    ("nfd-vendor-only", {f"{NFD}/pci-10de.present": "true"}, True),
    ("stock-nfd-cpu-node-with-bmc-vga", {f"{NFD}/pci-0300_102b.present": "true"}, False),
    ("stock-nfd-intel-gpu", {f"{NFD}/pci-0300_8086.present": "true"}, False),
    ("gpu-operator-says-no", {"nvidia.com/gpu.present": "false"}, False),
    ("unlabelled", {}, False),
]


def exporter_pod() -> dict[str, Any]:
    (daemonset,) = [o for o in render(ROOT / "manifests") if o["kind"] == "DaemonSet"]
    pod: dict[str, Any] = daemonset["spec"]["template"]["spec"]
    return pod


def terms() -> list[list[dict[str, Any]]]:
    affinity = exporter_pod()["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    return [term["matchExpressions"] for term in affinity["nodeSelectorTerms"]]


def expression_matches(expression: dict[str, Any], labels: dict[str, str]) -> bool:
    present = expression["key"] in labels
    operator = expression["operator"]
    if operator == "In":
        return present and labels[expression["key"]] in expression["values"]
    if operator == "Exists":
        return present
    raise AssertionError(f"operator {operator} not evaluated by this test")


def schedules_on(labels: dict[str, str]) -> bool:
    return any(all(expression_matches(e, labels) for e in term) for term in terms())


@pytest.mark.parametrize(("node", "labels", "expected"), NODES, ids=[n[0] for n in NODES])
def test_exporter_runs_exactly_on_gpu_nodes(node: str, labels: dict[str, str], expected: bool) -> None:
    assert schedules_on(labels) is expected, node


def test_nodeselector_does_not_narrow_the_affinity() -> None:
    assert not exporter_pod().get("nodeSelector")


def test_docs_name_exactly_the_selecting_labels() -> None:
    text = (ROOT / "docs" / "alerts-dashboards-manifests.md").read_text()
    start = text.index("- **GPU nodes**")
    bullet = text[start:text.index("\n- **", start + 1)]
    named = set(re.findall(r"`([\w./-]+\.present)`", bullet))
    selecting = {e["key"] for term in terms() for e in term
                 if e["operator"] == "In" and e["values"] == ["true"]}
    assert named == selecting
