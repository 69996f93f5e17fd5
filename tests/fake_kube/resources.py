"""The fake API server's discovery documents and pods, as the real API server renders them.

Discovery: `/api` (APIVersions), `/apis` (APIGroupList), `/api/v1` and `/apis/{group}/{version}`
(APIResourceList, with a `<plural>/scale` entry for each kind that has one, kind Scale of autoscaling/v1).
Pods: a list filtered by `labelSelector` (equality and set-based terms, as labels.Parse accepts them) and
`fieldSelector` (`status.phase` only, as the fake needs), paged by `limit` and `continue`.
"""

from __future__ import annotations

import base64
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Resource:
    """A kind the fake serves: its apiVersion, plural and whether it has a scale subresource."""

    group_version: str
    plural: str
    kind: str
    scale: bool = True
    namespaced: bool = True
    scale_verbs: tuple[str, ...] = ("get", "patch", "update")

    @property
    def group(self) -> str:
        return self.group_version.rpartition("/")[0]


BUILTIN = (
    Resource("apps/v1", "deployments", "Deployment"),
    Resource("apps/v1", "statefulsets", "StatefulSet"),
    Resource("apps/v1", "replicasets", "ReplicaSet"),
    Resource("apps/v1", "daemonsets", "DaemonSet", scale=False),
    Resource("v1", "pods", "Pod", scale=False),
    Resource("v1", "events", "Event", scale=False),
    Resource("v1", "replicationcontrollers", "ReplicationController"),
    Resource("coordination.k8s.io/v1", "leases", "Lease", scale=False),
)
ROLLOUT = Resource("argoproj.io/v1alpha1", "rollouts", "Rollout")
LEADER_WORKER_SET = Resource("leaderworkerset.x-k8s.io/v1", "leaderworkersets", "LeaderWorkerSet")
INFERENCE_SERVICE = Resource("example.com/v1", "inferenceservices", "InferenceService")
MODEL_CACHE = Resource("example.com/v1", "modelcaches", "ModelCache", scale=False)
"""A custom kind without /scale, in the same group as InferenceService."""
_DISCOVERY = re.compile(r"^/(?:api/(v1)|apis/([^/]+/[^/]+))$")
_VERBS = ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"]


def api_versions(address: str) -> dict[str, Any]:
    return {"kind": "APIVersions", "versions": ["v1"],
            "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": address}]}


def group_list(resources: Iterable[Resource]) -> dict[str, Any]:
    versions: dict[str, list[str]] = {}
    for r in resources:
        if r.group and r.group_version not in versions.setdefault(r.group, []):
            versions[r.group].append(r.group_version)
    groups = [{"name": group,
               "versions": [{"groupVersion": gv, "version": gv.rpartition("/")[2]} for gv in gvs],
               "preferredVersion": {"groupVersion": gvs[0], "version": gvs[0].rpartition("/")[2]}}
              for group, gvs in versions.items()]
    return {"kind": "APIGroupList", "apiVersion": "v1", "groups": groups}


def resource_list(group_version: str, resources: Iterable[Resource]) -> dict[str, Any] | None:
    """The APIResourceList of `group_version`, None when nothing is served there (the server answers 404)."""
    entries: list[dict[str, Any]] = []
    for r in (r for r in resources if r.group_version == group_version):
        entries.append({"name": r.plural, "singularName": r.kind.lower(), "namespaced": r.namespaced,
                        "kind": r.kind, "verbs": _VERBS, "storageVersionHash": "aGFzaA=="})
        entries.append({"name": f"{r.plural}/status", "singularName": "", "namespaced": r.namespaced,
                        "kind": r.kind, "verbs": ["get", "patch", "update"]})
        if r.scale:
            entries.append({"name": f"{r.plural}/scale", "singularName": "", "namespaced": r.namespaced,
                            "group": "autoscaling", "version": "v1", "kind": "Scale",
                            "verbs": list(r.scale_verbs)})
    if not entries:
        return None
    return {"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": group_version,
            "resources": entries}


def pod_json(
    name: str, namespace: str, labels: Mapping[str, str], phase: str, unschedulable_since: str | None
) -> dict[str, Any]:
    """A pod; Pending ones carry PodScheduled False with reason Unschedulable since `unschedulable_since`."""
    conditions = [] if unschedulable_since is None else [{
        "type": "PodScheduled", "status": "False", "reason": "Unschedulable", "lastProbeTime": None,
        "lastTransitionTime": unschedulable_since,
        "message": "0/4 nodes are available: 4 Insufficient nvidia.com/gpu.",
    }]
    return {"kind": "Pod", "apiVersion": "v1",
            "metadata": {"name": name, "namespace": namespace, "labels": dict(labels),
                         "resourceVersion": "1"},
            "spec": {"containers": [{"name": "main", "image": "example/gpu:1"}]},
            "status": {"phase": phase, "conditions": conditions, "qosClass": "BestEffort"}}


def merge_patch(target: object, patch: object) -> Any:
    """`target` with the JSON merge patch `patch` applied (RFC 7386): objects merge, null removes a key, any
    other value replaces; `target` itself is not changed."""
    if not isinstance(patch, dict):
        return patch
    merged = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            merged.pop(key, None)
        else:
            merged[key] = merge_patch(merged.get(key), value)
    return merged


class SelectorError(ValueError):
    """A selector the real server refuses with 400 BadRequest."""


_TERM = re.compile(r"^\s*(!)?\s*([A-Za-z0-9./_-]+)\s*"
                   r"(?:(==|=|!=)\s*([A-Za-z0-9._-]*)|\s(in|notin)\s*\(([^)]*)\))?\s*$")


def label_matcher(selector: str) -> Callable[[Mapping[str, str]], bool]:
    """labels -> matches, for a selector of `a=b`, `a==b`, `a!=b`, `a in (x,y)`, `a notin (x)`, `a`, `!a`."""
    tests: list[Callable[[Mapping[str, str]], bool]] = []
    for term in _split(selector):
        m = _TERM.match(term)
        if m is None:
            raise SelectorError(f"unable to parse requirement: {term!r}")
        bang, key, op, value, set_op, values = m.groups()
        if bang and (op or set_op):
            raise SelectorError(f"unable to parse requirement: {term!r}")
        if op in ("=", "=="):
            tests.append(lambda labels, k=key, v=value: labels.get(k) == v)
        elif op == "!=":
            tests.append(lambda labels, k=key, v=value: labels.get(k) != v)
        elif set_op:
            allowed = {v.strip() for v in values.split(",")}
            inside = set_op == "in"
            tests.append(lambda labels, k=key, a=allowed, i=inside: (labels.get(k) in a) == i
                         if k in labels else not i)
        else:
            tests.append(lambda labels, k=key, b=bool(bang): (k in labels) != b)
    return lambda labels: all(test(labels) for test in tests)


def _split(selector: str) -> list[str]:
    """Terms split on the commas outside parentheses."""
    terms, depth, current = [], 0, ""
    for char in selector:
        depth += {"(": 1, ")": -1}.get(char, 0)
        if char == "," and depth == 0:
            terms.append(current)
            current = ""
        else:
            current += char
    return [t for t in [*terms, current] if t.strip()] if selector.strip() else []


def discovery_document(path: str, resources: Iterable[Resource], address: str) -> dict[str, Any] | None:
    """The discovery document at `path`, None when there is none (the API server answers 404)."""
    if path == "/api":
        return api_versions(address)
    if path == "/apis":
        return group_list(resources)
    m = _DISCOVERY.match(path)
    return None if m is None else resource_list(m[1] or m[2], resources)


def pod_list(pods: Iterable[dict[str, Any]], query: Mapping[str, str], version: str) -> dict[str, Any]:
    """The PodList answering a list request (SelectorError on a bad query)."""
    items, token = list_pods(pods, query)
    metadata: dict[str, Any] = {"resourceVersion": version} | ({"continue": token} if token else {})
    return {"kind": "PodList", "apiVersion": "v1", "metadata": metadata, "items": items}


def list_pods(
    pods: Iterable[dict[str, Any]], query: Mapping[str, str]
) -> tuple[list[dict[str, Any]], str | None]:
    """(this page's pods, the next page's continue token) for a list request; SelectorError on a bad query."""
    matches = label_matcher(query.get("labelSelector", ""))
    field = query.get("fieldSelector", "")
    phase: str | None = None
    if field:
        key, sep, phase = field.partition("=")
        if key != "status.phase" or not sep:
            raise SelectorError(f'field label not supported: "{key}"')
    chosen = sorted((p for p in pods if matches(p["metadata"].get("labels") or {})
                     and (phase is None or p["status"]["phase"] == phase)),
                    key=lambda p: p["metadata"]["name"])
    start = int(base64.b64decode(query["continue"]).decode()) if query.get("continue") else 0
    limit = int(query.get("limit") or 0) or len(chosen)
    end = start + limit
    token = base64.b64encode(str(end).encode()).decode() if end < len(chosen) else None
    return chosen[start:end], token
