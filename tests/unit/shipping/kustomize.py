"""A small kustomize renderer for our own manifests, so tests run where no kubectl/kustomize binary exists.

It implements exactly the kustomization fields manifests/ uses (resources, namespace, labels without
selectors, and `patches` of two kinds: JSON 6902 operations test/add/replace/remove on a `target`, and a
strategic-merge `$patch: delete` of a whole object) and refuses any other field or patch, so a kustomization
that grows beyond it fails loudly instead of rendering wrong. Where `kubectl` is installed, a test compares
this renderer's output with `kubectl kustomize`.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import yaml

SUPPORTED_FIELDS = frozenset({"apiVersion", "kind", "resources", "namespace", "labels", "patches"})
TARGET_FIELDS = frozenset({"kind", "name", "namespace", "group", "version"})
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
    for entry in doc.get("patches", []):
        objects = _patch(objects, entry, directory, kustomization_path)
    return objects


def _patch(objects: list[dict[str, Any]], entry: Any, directory: Path, where: Path) -> list[dict[str, Any]]:
    if not isinstance(entry, dict) or set(entry) - {"path", "target"} or "path" not in entry:
        raise KustomizeError(f"{where}: a patch must be {{path: FILE[, target: ...]}} (got {entry!r})")
    body = yaml.safe_load((directory / entry["path"]).read_text())
    target = entry.get("target")
    if target is None:
        if not isinstance(body, dict) or body.get("$patch") != "delete":
            raise KustomizeError(f"{where}: only `$patch: delete` strategic-merge patches are implemented")
        meta = body["metadata"]
        target = {"kind": body["kind"], "name": meta["name"]} | (
            {"namespace": meta["namespace"]} if "namespace" in meta else {})
        kept = [o for o in objects if not _matches(o, target)]
        if len(kept) == len(objects):
            raise KustomizeError(f"{where}: {entry['path']} deletes nothing")
        return kept
    if not isinstance(target, dict) or set(target) - TARGET_FIELDS or not isinstance(body, list):
        raise KustomizeError(f"{where}: a targeted patch must be a list of JSON 6902 operations")
    matched = [o for o in objects if _matches(o, target)]
    if not matched:
        raise KustomizeError(f"{where}: {entry['path']}: no object matches the target {target}")
    for obj in matched:
        for operation in body:
            _apply(obj, operation, where)
    return objects


def _matches(obj: dict[str, Any], target: dict[str, str]) -> bool:
    group, _, version = obj["apiVersion"].rpartition("/")
    actual = {"kind": obj["kind"], "name": obj["metadata"]["name"], "group": group, "version": version,
              "namespace": obj["metadata"].get("namespace", "")}
    return all(actual[field] == value for field, value in target.items())


def _apply(obj: dict[str, Any], operation: dict[str, Any], where: Path) -> None:
    op, pointer = operation.get("op"), operation.get("path", "")
    if op not in ("test", "add", "replace", "remove"):
        raise KustomizeError(f"{where}: JSON 6902 op {op!r} is not implemented (test, add, replace, remove)")
    *parents, last = [part.replace("~1", "/").replace("~0", "~") for part in pointer.split("/")[1:]]
    node: Any = obj
    for part in parents:
        node = node[int(part)] if isinstance(node, list) else node[part]
    if op == "test":
        actual = node[int(last)] if isinstance(node, list) else node.get(last)
        if actual != operation["value"]:
            raise KustomizeError(f"{where}: test of {pointer} failed: {actual!r} != {operation['value']!r}")
        return
    if isinstance(node, list):
        if op == "add":
            node.insert(len(node) if last == "-" else int(last), copy.deepcopy(operation["value"]))
        elif op == "replace":
            node[int(last)] = copy.deepcopy(operation["value"])
        else:
            del node[int(last)]
    elif op == "remove":
        del node[last]
    else:
        if op == "replace" and last not in node:
            raise KustomizeError(f"{where}: replace of missing {pointer}")
        node[last] = copy.deepcopy(operation["value"])


def key(obj: dict[str, Any]) -> tuple[str, str, str]:
    """(kind, namespace, name): identifies an object in a rendering."""
    meta = obj["metadata"]
    return obj["kind"], meta.get("namespace", ""), meta["name"]
