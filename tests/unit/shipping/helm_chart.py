"""charts/gpu-autoscaler rendered by Helm itself: helm-python-sdk (test extra) binds Helm v4's own Go library,
so loading, values coalescing, values.schema.json and the template engine are those of `helm install`, with no
helm binary and no cluster.

A chart is loaded once per process and each values set rendered once (many tests read the same rendering);
every caller gets its own copy to change.
"""

from __future__ import annotations

import copy
import functools
import json
from dataclasses import dataclass
from typing import Any

import helm_python as helm
import yaml

from tests.unit.shipping.promql_names import ROOT

Object = dict[str, Any]

CHART = ROOT / "charts" / "gpu-autoscaler"
EXAMPLES = CHART / "examples"
RELEASE = "gpu-autoscaler"
NAMESPACE = "gpu-autoscaler"
NOTES = "gpu-autoscaler/templates/NOTES.txt"


class KubeLoader(yaml.CSafeLoader):
    """YAML as the API server reads it: PyYAML's YAML 1.1 also reads a plain `=` as the `value` key type,
    which it then cannot construct; Kubernetes' parser reads it as the string "=" (Helm writes it plain)."""


KubeLoader.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers if tag != "tag:yaml.org,2002:value"]
    for first, resolvers in yaml.CSafeLoader.yaml_implicit_resolvers.items()}


@dataclass(frozen=True)
class Rendering:
    """What `helm install --dry-run` would apply, and the notes it prints."""

    objects: list[Object]
    notes: str


@functools.cache
def chart() -> helm.Chart:
    return helm.Chart.load(CHART)


@functools.cache
def _rendered(values_json: str, namespace: str) -> Rendering:
    manifests = chart().render(json.loads(values_json), name=RELEASE, namespace=namespace, is_install=True)
    objects = [o for path, text in sorted(manifests.items()) if path != NOTES
               for o in yaml.load_all(text, Loader=KubeLoader) if o]
    return Rendering(objects, manifests.get(NOTES, ""))


def render(values: dict[str, Any] | None = None, namespace: str = NAMESPACE) -> Rendering:
    """The chart with these values over its defaults, installed as `gpu-autoscaler` in `namespace`."""
    return copy.deepcopy(_rendered(json.dumps(values or {}, sort_keys=True), namespace))


def example(name: str) -> dict[str, Any]:
    """The values of examples/NAME.yaml (the equivalent of manifests/overlays/NAME)."""
    values = yaml.safe_load((EXAMPLES / f"{name}.yaml").read_text())
    assert isinstance(values, dict), f"{EXAMPLES / name}.yaml: not a mapping"
    return values


def example_names() -> list[str]:
    return sorted(path.stem for path in EXAMPLES.glob("*.yaml"))


def validate(values: dict[str, Any]) -> None:
    """values.schema.json over these values, as `helm install` checks them (helm.HelmValuesError)."""
    chart().validate_schema(values)


def lint(values: dict[str, Any] | None, kube_version: str) -> list[str]:
    """`helm lint --strict --kube-version`: the errors and warnings, empty when clean."""
    report = helm.lint(CHART, values, strict=True, kube_version=kube_version)
    return [f"{m['path']}: {m['error']}" for m in report["messages"] if m["severity"] >= 2]


def without_helm_labels(obj: Object) -> Object:
    """The object less the labels only Helm sets (chart, release, manager), which kustomize cannot know."""
    labels = obj["metadata"]["labels"]
    for label in ("helm.sh/chart", "app.kubernetes.io/managed-by", "app.kubernetes.io/instance"):
        assert label in labels, f"{obj['kind']}/{obj['metadata']['name']}: no label {label}"
        del labels[label]
    return obj


def kind_names(objects: list[Object]) -> set[tuple[str, str]]:
    return {(o["kind"], o["metadata"]["name"]) for o in objects}
