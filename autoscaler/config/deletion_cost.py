"""`podDeletionCost` of a rules file: the per-pod query that ranks a Deployment's pods before a scale-down.

Only the kinds whose pods a ReplicaSet removes honour `controller.kubernetes.io/pod-deletion-cost`; a
StatefulSet always removes its highest ordinal, so the block is refused there, where `check` can explain it.
"""

from __future__ import annotations

import re

from yaml.nodes import Node

from autoscaler.policy.spec import APPS_V1, PodDeletionCost, TargetRef
from plumbing.yamlnodes import NodeReader, line_of

__all__ = ["COST_KINDS", "parse_pod_deletion_cost"]

COST_KINDS = ("Deployment", "ReplicaSet")
"""apps/v1 kinds whose scale-down the ReplicaSet controller carries out, reading the pods' deletion cost."""
_LABEL_RE = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*")


def parse_pod_deletion_cost(reader: NodeReader, node: Node, where: str,
                            target: TargetRef | None) -> PodDeletionCost | None:
    fields = reader.mapping(node, where, {"query", "podLabel"}, required=("query",))
    if fields is None:
        return None
    query = reader.string(fields["query"], f"{where}.query") if "query" in fields else None
    if query is not None and not query.strip():
        reader.problem(line_of(fields["query"]), f"{where}.query",
                       "expected a PromQL query (got an empty one)")
        query = None
    label: str | None = "pod"
    if "podLabel" in fields:
        label = reader.string(fields["podLabel"], f"{where}.podLabel")
        if label is not None and not _LABEL_RE.fullmatch(label):
            reader.problem(line_of(fields["podLabel"]), f"{where}.podLabel",
                           f"expected a Prometheus label name such as pod (got {label[:80]!r})")
            label = None
    if target is not None and (target.kind not in COST_KINDS or target.api_version != APPS_V1):
        why = ("a StatefulSet always removes its highest ordinal first and reads no deletion cost"
               if target.kind == "StatefulSet" else
               f"only a {' or a '.join(COST_KINDS)} ({APPS_V1}) is scaled down by a ReplicaSet, which "
               "reads it")
        reader.problem(line_of(node), where, f"does not apply to a {target.kind}: {why}")
        return None
    if query is None or label is None:
        return None
    return PodDeletionCost(query.strip(), label, line_of(node))
