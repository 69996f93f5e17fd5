"""What the Kubernetes API answered, checked before anything uses it: a Scale, a workload's annotations.

The official client's models are lenient where a wrong number matters: they turn a string "5" into 5, a float
3.7 into 3, true into 1, and keep an object where an int belongs. So the scale and the workload are read as
raw JSON and checked here against the API's own types (autoscaling/v1 Scale: int32 replicas). Anything else
is a `MalformedAnswerError` for that target only: a failed read (FailedGetScale), never a number.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from autoscaler.errors import MalformedAnswerError

MAX_INT32 = 2**31 - 1
MAX_ANSWER_BYTES = 4 * 1024 * 1024
"""A Deployment with its annotations is a few KiB (annotations are limited to 256 KiB in total)."""
_MAX_VERSION_CHARS = 256


def parse_object(raw: bytes, what: str, kind: str) -> dict[str, Any]:
    """The JSON object of `kind` in `raw`; MalformedAnswerError naming `what` otherwise."""
    if len(raw) > MAX_ANSWER_BYTES:
        raise MalformedAnswerError(f"{what}: answer of {len(raw)} bytes is larger than {MAX_ANSWER_BYTES}")
    try:
        body = json.loads(raw, parse_constant=_no_constant)
    except (ValueError, RecursionError) as e:  # bad JSON, NaN/Infinity, an int of thousands of digits
        raise MalformedAnswerError(f"{what}: the answer is not valid JSON ({_short(e)})") from e
    if not isinstance(body, dict):
        raise MalformedAnswerError(f"{what}: expected a {kind} object (got {_type(body)})")
    if body.get("kind") != kind:
        raise MalformedAnswerError(f"{what}: expected kind {kind} (got {_shown(body.get('kind'))})")
    if not isinstance(body.get("metadata"), dict):
        raise MalformedAnswerError(f"{what}: {kind} without a metadata object")
    return body


def scale_fields(body: Mapping[str, Any], what: str) -> tuple[int, int, str]:
    """(spec.replicas, status.replicas, metadata.resourceVersion) of a checked Scale.

    spec.replicas may be absent: the API omits it when it is 0 (`omitempty`); status.replicas may not.
    """
    spec, status = body.get("spec"), body.get("status")
    if not isinstance(spec, dict):
        raise MalformedAnswerError(f"{what}: Scale without a spec object (got {_type(spec)})")
    if not isinstance(status, dict):
        raise MalformedAnswerError(f"{what}: Scale without a status object (got {_type(status)})")
    spec_replicas = _replicas(spec.get("replicas", 0), "spec.replicas", what)
    if "replicas" not in status:
        raise MalformedAnswerError(f"{what}: Scale without status.replicas")
    status_replicas = _replicas(status["replicas"], "status.replicas", what)
    return spec_replicas, status_replicas, resource_version(body["metadata"], what)


def resource_version(metadata: Mapping[str, Any], what: str) -> str:
    """metadata.resourceVersion: an opaque non-empty string, sent back as is with the patch."""
    version = metadata.get("resourceVersion")
    if not isinstance(version, str) or not version or len(version) > _MAX_VERSION_CHARS:
        raise MalformedAnswerError(
            f"{what}: metadata.resourceVersion is not a version (got {_shown(version)})"
        )
    if not version.isascii() or not version.isprintable():
        raise MalformedAnswerError(f"{what}: metadata.resourceVersion has non-printable characters")
    return version


def annotations_of(body: Mapping[str, Any], what: str) -> dict[str, str]:
    """metadata.annotations of a checked object: a mapping of strings to strings (absent: none)."""
    annotations = body["metadata"].get("annotations")
    if annotations is None:
        return {}
    if not isinstance(annotations, dict):
        raise MalformedAnswerError(
            f"{what}: metadata.annotations is not a mapping (got {_type(annotations)})"
        )
    for name, value in annotations.items():
        if not isinstance(value, str):
            raise MalformedAnswerError(
                f"{what}: annotation {_shown(name)} is not a string (got {_type(value)})"
            )
    return dict(annotations)


def _replicas(value: object, field: str, what: str) -> int:
    # bool is an int in Python; JSON true is not a count
    if type(value) is not int or not 0 <= value <= MAX_INT32:
        raise MalformedAnswerError(
            f"{what}: {field} is not a replica count (an integer from 0 to {MAX_INT32}; got {_shown(value)})"
        )
    return value


def _no_constant(name: str) -> float:
    raise ValueError(f"{name} is not JSON")


def _type(value: object) -> str:
    return {dict: "an object", list: "a list", str: "a string", bool: "a boolean", type(None): "null",
            int: "an integer", float: "a number"}.get(type(value), type(value).__name__)


def _shown(value: object) -> str:
    """A value for a message, cut short: an answer can hold megabytes."""
    text = json.dumps(value) if isinstance(value, str | int | float | bool | None) else _type(value)
    return text if len(text) <= 40 else f"{text[:40]}... ({_type(value)} of {len(text)} characters)"


def _short(e: BaseException) -> str:
    text = str(e)
    return text if len(text) <= 120 else text[:120] + "..."
