"""Strict validation of rendered Kubernetes objects (kustomize's and the Helm chart's) against the oldest and
the newest Kubernetes we support: built-in kinds with kubernetes-validate's strict schemas (an unknown field
is an error), the prometheus-operator kinds with crd_schemas.py.

kubernetes-validate reads its schema files again on every call, and the renderings share most objects, so an
object is validated once per process, keyed by its content.
"""

from __future__ import annotations

import functools
import json
from typing import Any

import jsonschema
import kubernetes_validate

from tests.unit.shipping.crd_schemas import SCHEMAS

OLDEST_KUBERNETES = "1.30"
"""The oldest Kubernetes minor we support (the chart's `kubeVersion` in charts/gpu-autoscaler/Chart.yaml)."""
K8S_VERSIONS = (OLDEST_KUBERNETES, ".".join(kubernetes_validate.latest_version().split(".")[:2]))


@functools.cache
def _validate(text: str) -> None:
    obj = json.loads(text)
    if obj["kind"] in SCHEMAS:
        jsonschema.validate(obj, SCHEMAS[obj["kind"]])
        return
    for version in K8S_VERSIONS:
        kubernetes_validate.validate(obj, version, strict=True)


def validate_strictly(objects: list[dict[str, Any]]) -> None:
    """Raises kubernetes_validate.ValidationError or jsonschema.ValidationError for the first invalid one."""
    for obj in objects:
        _validate(json.dumps(obj, sort_keys=True))
