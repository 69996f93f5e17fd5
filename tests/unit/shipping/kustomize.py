"""A small kustomize renderer for our own manifests, so tests run where no kubectl/kustomize binary exists.

It implements exactly the kustomization fields manifests/ uses (resources, namespace, labels without
selectors) and refuses any other field, so a kustomization that grows beyond it fails loudly instead of
rendering wrong. Where `kubectl` is installed, a test compares this renderer's output with
`kubectl kustomize`.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import yaml

SUPPORTED_FIELDS = frozenset({"apiVersion", "kind", "resources", "namespace", "labels"})
CLUSTER_SCOPED_KINDS = frozenset({
    "Namespace", "PriorityClass", "ClusterRole", "ClusterRoleBinding", "CustomResourceDefinition",
    "RuntimeClass", "StorageClass", "ValidatingWebhookConfiguration", "MutatingWebhookConfiguration",
})


class KustomizeError(ValueError):
    """The kustomization uses something this renderer does not implement, or is malformed."""


def render(directory: Path) -> list[dict[str, Any]]:
    """Every object `kubectl kustomize directory` would print (same content; order of resources)."""
    kustomization_path = directory / "kustomization.yaml"
    doc = yaml.safe_load(kustomization_path.read_text())
    if not isinstance(doc, dict):
        raise KustomizeError(f"{kustomization_path}: expected a mapping")
    unknown = set(doc) - SUPPORTED_FIELDS
    if unknown:
        raise KustomizeError(f"{kustomization_path}: fields the test renderer does not implement: "
                             f"{sorted(unknown)}")
    objects: list[dict[str, Any]] = []
    for entry in doc.get("resources", []):
        path = (directory / entry).resolve()
        if path.is_dir():
            objects.extend(render(path))
        else:
            objects.extend(copy.deepcopy(o) for o in yaml.safe_load_all(path.read_text()) if o)
    namespace = doc.get("namespace")
    for obj in objects:
        if namespace and obj["kind"] not in CLUSTER_SCOPED_KINDS:
            obj["metadata"]["namespace"] = namespace
        for label_set in doc.get("labels", []):
            if label_set.get("includeSelectors") or label_set.get("includeTemplates"):
                raise KustomizeError(f"{kustomization_path}: labels with selectors/templates not supported")
            obj["metadata"].setdefault("labels", {}).update(label_set["pairs"])
    return objects


def key(obj: dict[str, Any]) -> tuple[str, str, str]:
    """(kind, namespace, name): identifies an object in a rendering."""
    meta = obj["metadata"]
    return obj["kind"], meta.get("namespace", ""), meta["name"]
