"""What the Kubernetes API answered, checked before anything uses it: a Scale, a workload's annotations, the
Pending pods of a target.

The official client's models are lenient where a wrong number matters: they turn a string "5" into 5, a float
3.7 into 3, true into 1, and keep an object where an int belongs. So the scale and the workload are read as
raw JSON and checked here against the API's own types (autoscaling/v1 Scale: int32 replicas). Anything else
is a `MalformedAnswerError` for that target only: a failed read (FailedGetScale), never a number.
"""

from __future__ import annotations

import datetime as dt
import json
import re
from collections.abc import Mapping
from typing import Any

from autoscaler.errors import MalformedAnswerError

MAX_INT32 = 2**31 - 1
MAX_ANSWER_BYTES = 4 * 1024 * 1024
"""A Deployment with its annotations is a few KiB (annotations are limited to 256 KiB in total)."""
MAX_LIST_BYTES = 32 * 1024 * 1024
"""A page of pods (`limit` 500, a few KiB to some tens of KiB each)."""
MAX_SELECTOR_CHARS = 4096
"""A Scale's status.selector: a few label terms (a key is at most 316 characters, a value 63)."""
_MAX_VERSION_CHARS = 256
_RFC3339 = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{1,9})?(Z|[+-]\d{2}:\d{2})", re.ASCII)


def parse_json(raw: bytes, what: str, kind: str, max_bytes: int = MAX_ANSWER_BYTES) -> dict[str, Any]:
    """The JSON object of `kind` in `raw` (any object with a `kind`, lists and discovery documents too)."""
    if len(raw) > max_bytes:
        raise MalformedAnswerError(f"{what}: answer of {len(raw)} bytes is larger than {max_bytes}")
    try:
        body = json.loads(raw, parse_constant=_no_constant)
    except (ValueError, RecursionError) as e:  # bad JSON, NaN/Infinity, an int of thousands of digits
        raise MalformedAnswerError(f"{what}: the answer is not valid JSON ({_short(e)})") from e
    if not isinstance(body, dict):
        raise MalformedAnswerError(f"{what}: expected a {kind} object (got {_type(body)})")
    if body.get("kind") != kind:
        raise MalformedAnswerError(f"{what}: expected kind {kind} (got {_shown(body.get('kind'))})")
    return body


def parse_object(raw: bytes, what: str, kind: str) -> dict[str, Any]:
    """The JSON object of `kind` in `raw`, with its metadata; MalformedAnswerError naming `what` otherwise."""
    body = parse_json(raw, what, kind)
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


def scale_selector(body: Mapping[str, Any]) -> str | None:
    """status.selector of a checked Scale: the label selector of the target's pods, as a string.

    Optional: a custom resource without `labelSelectorPath` serves "" (no selector). Anything that is not a
    short printable string is None too, as only the capacity guard's Pending check uses it, and it is skipped
    without one rather than failing the read of the scale.
    """
    status = body.get("status")
    selector = status.get("selector") if isinstance(status, dict) else None
    if not isinstance(selector, str) or not selector or len(selector) > MAX_SELECTOR_CHARS:
        return None
    return selector if selector.isascii() and selector.isprintable() else None


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


def pod_page(body: Mapping[str, Any], what: str) -> tuple[list[Any], str | None]:
    """(items, metadata.continue) of a checked PodList; the items are checked one by one by the caller."""
    items, metadata = body.get("items"), body.get("metadata")
    if items is None:
        items = []  # an empty list may be omitted
    if not isinstance(items, list):
        raise MalformedAnswerError(f"{what}: PodList items is not a list (got {_type(items)})")
    if not isinstance(metadata, dict):
        raise MalformedAnswerError(f"{what}: PodList without a metadata object")
    token = metadata.get("continue")
    if token in (None, ""):
        return items, None
    if not isinstance(token, str) or len(token) > MAX_SELECTOR_CHARS or not token.isprintable():
        raise MalformedAnswerError(f"{what}: PodList metadata.continue is not a token (got {_shown(token)})")
    return items, token


def unschedulable_since(pod: object) -> float | None:
    """When `pod` became Pending unschedulable (its PodScheduled condition False with reason Unschedulable):
    the condition's lastTransitionTime as Unix seconds; None for any other pod, and for one too malformed to
    say (a pod is one among many: it is skipped, never the whole list)."""
    if not isinstance(pod, dict):
        return None
    status = pod.get("status")
    if not isinstance(status, dict) or status.get("phase") != "Pending":
        return None
    conditions = status.get("conditions")
    if not isinstance(conditions, list):
        return None
    for condition in conditions:
        if (isinstance(condition, dict) and condition.get("type") == "PodScheduled"
                and condition.get("status") == "False" and condition.get("reason") == "Unschedulable"):
            return rfc3339(condition.get("lastTransitionTime"))
    return None


def pod_name_and_annotations(pod: object) -> tuple[str, dict[str, str]] | None:
    """(name, annotations) of a listed pod that is not terminating; None for a terminating one, and for one
    too malformed to say (skipped: it is one pod among many). Annotations that are not strings are dropped."""
    metadata = pod.get("metadata") if isinstance(pod, dict) else None
    if not isinstance(metadata, dict) or metadata.get("deletionTimestamp") is not None:
        return None
    name, annotations = metadata.get("name"), metadata.get("annotations") or {}
    if not isinstance(name, str) or not name or len(name) > 253 or not isinstance(annotations, dict):
        return None
    return name, {k: v for k, v in annotations.items() if isinstance(k, str) and isinstance(v, str)}


def rfc3339(value: object) -> float | None:
    """Unix seconds of an RFC 3339 time with its offset (as metav1.Time is written), else None."""
    if not isinstance(value, str) or not _RFC3339.fullmatch(value):
        return None
    try:
        moment = dt.datetime.fromisoformat(value)
    except ValueError:  # 2026-02-30, 25:00
        return None
    return moment.timestamp()


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
