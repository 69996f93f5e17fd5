"""The autoscaler's RBAC grants exactly the API calls its code makes, and nothing more.

The calls are derived from the code itself (every module of autoscaler/, in practice kube.py and leader.py):
every method of the official client's API classes the code references
(`self._core.list_namespaced_pod`, ...) maps to an (API group, resource, verb) triple, following the client's
naming (read=get, replace=update, ...). A target's own resource is found by API discovery, not through a
generated method, so its calls are `target_calls` of the kinds the base grants (Deployment, StatefulSet);
tests/integration/autoscaler/kube/test_scalable_targets.py checks those against the requests the backend
sends.
"""

from __future__ import annotations

import ast
import dataclasses
import re
from pathlib import Path
from typing import Any

import autoscaler.kube.leader
from tests.unit.shipping.kustomize import render
from tests.unit.shipping.promql_names import ROOT

SOURCES = tuple(sorted((ROOT / "autoscaler").rglob("*.py")))
API_GROUPS = {"AppsV1Api": "apps", "CoreV1Api": "", "CoordinationV1Api": "coordination.k8s.io",
              "EventsV1Api": "events.k8s.io"}
VERBS = {"read": "get", "patch": "patch", "replace": "update", "create": "create", "delete": "delete",
         "list": "list", "watch": "watch"}
METHOD = re.compile(r"(read|patch|replace|create|delete|list|watch)_(?:namespaced_)?(\w+?)(_scale|_status)?$")
NAMESPACE = "gpu-autoscaler"
SERVICE_ACCOUNT = "gpu-autoscaler"

Call = tuple[str, str, str]  # (api group, resource, verb)
TARGET_RESOURCES = (("apps", "deployments"), ("apps", "statefulsets"))
"""The kinds the base ClusterRole lets the controller scale; docs/least-privilege.md lists what other kinds
(a ReplicaSet, an Argo Rollout, a LeaderWorkerSet, a custom resource) add."""


def target_calls(resources: tuple[tuple[str, str], ...] = TARGET_RESOURCES) -> set[Call]:
    """Per target resource: get and patch its scale (replicas, resourceVersion), get the object (annotations).
    Discovery (/api, /apis) is a non-resource URL every authenticated user may get (system:discovery)."""
    return {call for group, plural in resources
            for call in ((group, f"{plural}/scale", "get"), (group, f"{plural}/scale", "patch"),
                         (group, plural, "get"))}


def _resource(snake: str, sub: str | None) -> str:
    plural = snake.replace("_", "") + "s"
    return plural + (f"/{sub.lstrip('_')}" if sub else "")


def api_calls(paths: tuple[Path, ...] = SOURCES) -> set[Call]:
    """Every (group, resource, verb) the code can call: through the official client's API classes, and on the
    targets' own resources."""
    return client_calls(paths) | target_calls()


def client_calls(paths: tuple[Path, ...] = SOURCES) -> set[Call]:
    """Every (group, resource, verb) the code can call through the official client's API classes."""
    calls: set[Call] = set()
    for path in paths:
        tree = ast.parse(path.read_text())
        api_of: dict[str, str] = {}
        for node in ast.walk(tree):
            if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call):
                func = node.value.func
                cls = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
                if cls in API_GROUPS:
                    for target in node.targets:
                        if isinstance(target, ast.Attribute):
                            api_of[target.attr] = cls
        for node in ast.walk(tree):
            if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Attribute)
                    and node.value.attr in api_of):
                match = METHOD.fullmatch(node.attr)
                assert match, f"{path.name}: unrecognised client call {node.attr}"
                verb, kind, sub = match.groups()
                calls.add((API_GROUPS[api_of[node.value.attr]], _resource(kind, sub), VERBS[verb]))
    return calls


def bound_roles(objects: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The Roles / ClusterRoles bound to the autoscaler's ServiceAccount."""
    roles = {(o["kind"], o["metadata"].get("namespace", ""), o["metadata"]["name"]): o for o in objects
             if o["kind"] in ("Role", "ClusterRole")}
    bound = []
    for binding in (o for o in objects if o["kind"] in ("RoleBinding", "ClusterRoleBinding")):
        ours = ("ServiceAccount", SERVICE_ACCOUNT, NAMESPACE)
        if not any((s["kind"], s["name"], s.get("namespace")) == ours for s in binding["subjects"]):
            continue
        ref = binding["roleRef"]
        namespace = binding["metadata"].get("namespace", "") if ref["kind"] == "Role" else ""
        bound.append(roles[(ref["kind"], namespace, ref["name"])])
    return bound


def granted(roles: list[dict[str, Any]]) -> set[Call]:
    return {(group, resource, verb) for role in roles for rule in role["rules"]
            for group in rule["apiGroups"] for resource in rule["resources"] for verb in rule["verbs"]}


def test_derivation_finds_the_calls_the_controller_is_known_to_make() -> None:
    """Guards the derivation itself: these calls are in the contract, so it must find at least them."""
    calls = client_calls()
    assert {("", "events", "create"), ("", "pods", "list"),
            ("coordination.k8s.io", "leases", "update")} <= calls
    assert ("apps", "deployments/scale", "patch") in api_calls()


def test_rbac_covers_every_call_and_nothing_more() -> None:
    roles = bound_roles(render(ROOT / "manifests"))
    assert granted(roles) == api_calls()


def test_rbac_has_no_wildcards() -> None:
    for role in bound_roles(render(ROOT / "manifests")):
        for rule in role["rules"]:
            for field in ("apiGroups", "resources", "verbs"):
                assert "*" not in rule[field], role["metadata"]["name"]


def test_leases_only_in_the_autoscalers_own_namespace_and_by_name() -> None:
    fields = dataclasses.fields(autoscaler.kube.leader.LeaseSettings)
    lease_name = next(f.default for f in fields if f.name == "name")
    for role in bound_roles(render(ROOT / "manifests")):
        for rule in role["rules"]:
            if "leases" not in rule["resources"]:
                continue
            assert role["kind"] == "Role" and role["metadata"]["namespace"] == NAMESPACE
            if set(rule["verbs"]) - {"create"}:
                assert rule.get("resourceNames") == [lease_name]


def test_the_exporter_has_no_api_access() -> None:
    objects = render(ROOT / "manifests")
    for binding in (o for o in objects if o["kind"] in ("RoleBinding", "ClusterRoleBinding")):
        assert all(s["name"] != "gpu-exporter" for s in binding["subjects"])
    (account,) = [o for o in objects
                  if o["kind"] == "ServiceAccount" and o["metadata"]["name"] == "gpu-exporter"]
    assert account["automountServiceAccountToken"] is False


def test_an_extra_grant_is_detected() -> None:
    roles = bound_roles(render(ROOT / "manifests"))
    roles[0]["rules"].append({"apiGroups": [""], "resources": ["pods"], "verbs": ["watch"]})
    assert granted(roles) != api_calls()


NAMESPACED = ROOT / "manifests" / "overlays" / "namespaced-rbac"


def test_namespaced_overlay_grants_the_same_calls_only_in_the_listed_namespaces() -> None:
    objects = render(NAMESPACED)
    assert granted(bound_roles(objects)) == api_calls()
    ours = ("ServiceAccount", SERVICE_ACCOUNT, NAMESPACE)
    cluster_wide = [o for o in objects if o["kind"] == "ClusterRoleBinding"
                    and any((s["kind"], s["name"], s.get("namespace")) == ours for s in o["subjects"])]
    assert cluster_wide == []
    cluster_role = {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "gpu-autoscaler"}
    granted_in = {o["metadata"]["namespace"] for o in objects
                  if o["kind"] == "RoleBinding" and o["roleRef"] == cluster_role}
    (deployment,) = [o for o in objects if o["kind"] == "Deployment"]
    (flag,) = [a for a in deployment["spec"]["template"]["spec"]["containers"][0]["args"]
               if a.startswith("--namespaces=")]
    assert granted_in and set(flag.removeprefix("--namespaces=").split(",")) == granted_in


def test_pods_are_patched_only_where_a_rolebinding_grants_under_the_namespaced_overlay() -> None:
    """podDeletionCost patches pods: the overlay grants it through its RoleBindings, never cluster-wide."""
    objects = render(NAMESPACED)
    assert ("", "pods", "patch") in client_calls()
    grants = [o for o in objects if o["kind"] in ("RoleBinding", "ClusterRoleBinding")
              and ("", "pods", "patch") in granted(bound_roles([o, *[r for r in objects
                                                                      if r["kind"].endswith("Role")]]))]
    assert grants and all(o["kind"] == "RoleBinding" for o in grants)
