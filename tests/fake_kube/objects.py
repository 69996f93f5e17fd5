"""What the fake API server answers with: v1 Status errors, Scale and workload JSON (Deployment, StatefulSet
or any registered kind), as the real API server renders them (fake_apiserver.py holds the server and its
state, fake_api_resources.py the discovery documents and pods)."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Any

PLURALS = {"deployments": "Deployment", "statefulsets": "StatefulSet"}
"""The kinds of the workloads `Workload` defaults to (apps/v1)."""
_REASONS = {
    400: "BadRequest",
    403: "Forbidden",
    404: "NotFound",
    409: "Conflict",
    415: "UnsupportedMediaType",
    422: "Invalid",
    500: "InternalError",
    501: "NotImplemented",
    503: "ServiceUnavailable",
    504: "Timeout",
}
MERGE_PATCHES = ("application/merge-patch+json", "application/strategic-merge-patch+json")
"""For a Scale's spec.replicas a strategic merge patch is a merge patch."""
UNMODELLED_PATCHES = ("application/json-patch+json", "application/apply-patch+yaml")
ACCEPTED_PATCHES = "application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml"


@dataclass
class Workload:
    kind_plural: str
    namespace: str
    name: str
    replicas: int
    annotations: dict[str, str] = field(default_factory=dict)
    version: int = 1
    uid: str = field(default_factory=lambda: str(uuid.uuid4()))
    status_replicas: int | None = None
    """Replicas running (Scale status.replicas); set by `add`, changed only by tests (a rollout)."""
    selector: str | None = None
    """Scale status.selector; `add` sets app=<name>; None leaves it out."""
    kind: str = ""
    """The workload's kind ('' for PLURALS[kind_plural]) and apiVersion."""
    api_version: str = "apps/v1"


def status(
    code: int, message: str, name: str = "", kind: str = "", reason: str | None = None
) -> tuple[int, dict[str, Any]]:
    reason = reason or _REASONS.get(code, "Unknown")
    return code, {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason,
        "details": {"name": name, "kind": kind},
        "code": code,
    }


def scale_json(w: Workload) -> dict[str, Any]:
    return {
        "kind": "Scale",
        "apiVersion": "autoscaling/v1",
        "metadata": {
            "name": w.name,
            "namespace": w.namespace,
            "uid": w.uid,
            "resourceVersion": str(w.version),
            "creationTimestamp": "2026-01-01T00:00:00Z",
        },
        "spec": {"replicas": w.replicas},
        "status": {"replicas": _running(w)} | ({} if w.selector is None else {"selector": w.selector}),
    }


def patch_scale(w: Workload, body: dict[str, Any], qualified: str) -> tuple[int, dict[str, Any]]:
    """A merge patch of the Scale: 409 when it carries a resourceVersion that is not the current one."""
    wanted = (body.get("metadata") or {}).get("resourceVersion")
    if wanted is not None and wanted != str(w.version):
        return status(
            409,
            f'Operation cannot be fulfilled on {qualified} "{w.name}": the object has been modified; please '
            "apply your changes to the latest version and try again",
            name=w.name,
            kind=w.kind_plural,
        )
    w.replicas = int(body["spec"]["replicas"])
    w.version += 1
    body["_applied"] = True
    return 200, scale_json(w)


def workload_json(w: Workload) -> dict[str, Any]:
    labels = {"app": w.name}
    return {
        "kind": w.kind or PLURALS[w.kind_plural],
        "apiVersion": w.api_version,
        "metadata": {
            "name": w.name,
            "namespace": w.namespace,
            "uid": w.uid,
            "resourceVersion": str(w.version),
            "annotations": dict(w.annotations),
            "creationTimestamp": "2026-01-01T00:00:00Z",
        },
        "spec": {
            "replicas": w.replicas,
            "selector": {"matchLabels": labels},
            "serviceName": w.name,
            "template": {
                "metadata": {"labels": labels},
                "spec": {"containers": [{"name": "main", "image": "example/gpu:1"}]},
            },
        },
        "status": {"replicas": _running(w), "readyReplicas": _running(w)},
    }


def _running(w: Workload) -> int:
    return w.replicas if w.status_replicas is None else w.status_replicas
