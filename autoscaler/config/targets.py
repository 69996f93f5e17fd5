"""A rule's `target`: any resource with a scale subresource, named by apiVersion, kind, namespace and name.

Deployment, StatefulSet and ReplicaSet default to apps/v1; every other kind (an Argo Rollout, a
LeaderWorkerSet, a user's custom resource) names its apiVersion, and the controller finds its resource through
API discovery. Built-in kinds that cannot be scaled are refused here, where `check` can explain them.
"""

from __future__ import annotations

import re

from yaml.nodes import Node

from autoscaler.policy.spec import APPS_V1, TargetRef
from plumbing.yamlnodes import NodeReader, line_of

__all__ = ["APPS_V1_KINDS", "KNOWN_API_VERSIONS", "UNSCALABLE_KINDS", "parse_target"]

APPS_V1_KINDS = ("Deployment", "StatefulSet", "ReplicaSet")
"""Kinds whose apiVersion may be left out (apps/v1); any other kind names its apiVersion."""
KNOWN_API_VERSIONS = {"Rollout": "argoproj.io/v1alpha1", "LeaderWorkerSet": "leaderworkerset.x-k8s.io/v1"}
"""Examples for the message when a well-known custom kind has no apiVersion."""
UNSCALABLE_KINDS = {
    "DaemonSet": "runs one pod per node",
    "Job": "runs to completion; set its parallelism instead",
    "CronJob": "starts Jobs on a schedule",
    "Pod": "is one pod",
}
"""Built-in kinds that have no scale subresource: refused by `check` before the controller meets them."""
_DNS_LABEL_RE = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
_DNS_SUBDOMAIN_RE = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
_KIND_RE = re.compile(r"[A-Z][A-Za-z0-9]{0,62}")
_API_VERSION_RE = re.compile(r"([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"
                             r"v[1-9][0-9]*((alpha|beta)[1-9][0-9]*)?")


def parse_target(reader: NodeReader, node: Node, where: str) -> TargetRef | None:
    fields = reader.mapping(node, where, {"apiVersion", "kind", "namespace", "name"},
                            required=("kind", "namespace", "name"))
    if fields is None:
        return None
    kind = namespace = name = None
    if "kind" in fields:
        kind = _kind(reader, fields["kind"], f"{where}.kind")
    api_version = _api_version(reader, fields, where, kind)
    if "namespace" in fields:
        namespace = reader.string(fields["namespace"], f"{where}.namespace")
    if namespace is not None and (len(namespace) > 63 or not _DNS_LABEL_RE.fullmatch(namespace)):
        reader.problem(line_of(fields["namespace"]), f"{where}.namespace",
                       "expected a Kubernetes namespace (lower-case DNS label, <= 63 chars) "
                       f"(got {namespace!r})")
        namespace = None
    if "name" in fields:
        name = reader.string(fields["name"], f"{where}.name")
    if name is not None and (len(name) > 253 or not _DNS_SUBDOMAIN_RE.fullmatch(name)):
        reader.problem(line_of(fields["name"]), f"{where}.name",
                       f"expected a Kubernetes object name (lower-case DNS subdomain) (got {name!r})")
        name = None
    if kind is None or api_version is None or namespace is None or name is None:
        return None
    return TargetRef(kind, namespace, name, api_version)


def _kind(reader: NodeReader, node: Node, where: str) -> str | None:
    kind = reader.string(node, where)
    if kind is None:
        return None
    if not _KIND_RE.fullmatch(kind):
        reader.problem(line_of(node), where, "expected a Kubernetes kind in CamelCase, e.g. Deployment, "
                                             f"StatefulSet, Rollout (got {kind[:80]!r})")
        return None
    if kind in UNSCALABLE_KINDS:
        reader.problem(line_of(node), where,
                       f"a {kind} has no scale subresource (it {UNSCALABLE_KINDS[kind]}): a rule scales a "
                       "Deployment, a StatefulSet or any resource with /scale, such as an Argo Rollout, a "
                       "LeaderWorkerSet or a custom resource")
        return None
    return kind


def _api_version(reader: NodeReader, fields: dict[str, Node], where: str, kind: str | None) -> str | None:
    """The target's apiVersion: as written, or apps/v1 for the apps kinds; other kinds must name theirs."""
    if "apiVersion" not in fields:
        if kind is None or kind in APPS_V1_KINDS:
            return APPS_V1
        example = KNOWN_API_VERSIONS.get(kind, "group/version, e.g. example.com/v1")
        reader.problem(line_of(fields["kind"]), f"{where}.apiVersion",
                       f"required for kind {kind} ({example}); only {', '.join(APPS_V1_KINDS)} default to "
                       f"{APPS_V1}")
        return None
    node = fields["apiVersion"]
    value = reader.string(node, f"{where}.apiVersion")
    if value is not None and (len(value) > 253 or not _API_VERSION_RE.fullmatch(value)):
        reader.problem(line_of(node), f"{where}.apiVersion",
                       f"expected group/version such as apps/v1 or argoproj.io/v1alpha1 (got {value[:80]!r})")
        return None
    if value is not None and kind in APPS_V1_KINDS and value != APPS_V1:
        reader.problem(line_of(node), f"{where}.apiVersion",
                       f"a {kind} is served as {APPS_V1} (got {value!r})")
        return None
    return value
