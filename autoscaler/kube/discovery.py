"""Which resource serves a target's kind, found through API discovery and cached per apiVersion.

A rule names its target by apiVersion and kind (a Deployment, an Argo Rollout, a LeaderWorkerSet, a user's
custom resource); the API's paths name the resource by its plural. The APIResourceList of the apiVersion
(GET /apis/{group}/{version}, or /api/v1 for the core group) says which plural serves the kind, whether it is
namespaced and whether it has a `<plural>/scale` subresource, as `kubectl scale` finds out. One list per
apiVersion is fetched once and kept: a kind that was found stays found until a read of its scale answers 404,
and an apiVersion that is not served, or lacks the kind, is asked again only once `refresh_after` seconds have
passed, so a CRD installed later is picked up and a missing one costs one request per apiVersion per period.
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

from autoscaler.errors import KindNotFoundError, MalformedAnswerError, NotFoundError, NotScalableError
from autoscaler.kube.answers import parse_json
from autoscaler.policy import TargetRef

__all__ = ["Discovery", "ScalableResource", "api_path", "parse_resource_list"]

MAX_RESOURCES = 4096
"""Entries of one APIResourceList (apps/v1 has 15, a large CRD group some tens)."""
_RESOURCE_RE = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")


@dataclass(frozen=True)
class ScalableResource:
    """A namespaced resource with a scale subresource: where a target of its kind is read and patched."""

    api_version: str
    plural: str
    kind: str

    def path(self, namespace: str, name: str, subresource: str = "") -> str:
        """The object's path (or its subresource's), every part quoted: names come from files and answers."""
        parts = [api_path(self.api_version), "namespaces", quote(namespace, safe=""), self.plural,
                 quote(name, safe="")]
        return "/".join(parts + ([subresource] if subresource else []))


@dataclass(frozen=True)
class _Resource:
    plural: str
    namespaced: bool
    scale_verbs: frozenset[str] | None  # None: no <plural>/scale entry


@dataclass(frozen=True)
class _Entry:
    fetched_at: float
    kinds: Mapping[str, _Resource] | None  # None: the apiVersion is not served (404)


def api_path(api_version: str) -> str:
    """/api/v1 for the core group, /apis/{group}/{version} for every other."""
    group, _, version = api_version.rpartition("/")
    version = quote(version, safe="")
    return f"/apis/{quote(group, safe='')}/{version}" if group else f"/api/{version}"


def parse_resource_list(raw: bytes, what: str, api_version: str) -> dict[str, _Resource]:
    """kind -> resource of an APIResourceList, checked: a hostile list is a failed read, never a path."""
    body = parse_json(raw, what, "APIResourceList")
    if body.get("groupVersion") not in (None, api_version):
        raise MalformedAnswerError(f"{what}: the APIResourceList is for {str(body['groupVersion'])[:80]!r}")
    entries = body.get("resources", [])
    if not isinstance(entries, list) or len(entries) > MAX_RESOURCES:
        raise MalformedAnswerError(f"{what}: APIResourceList resources is not a list of at most "
                                   f"{MAX_RESOURCES}")
    top: dict[str, tuple[str, bool]] = {}  # kind -> (plural, namespaced), the first of each kind
    scales: dict[str, frozenset[str]] = {}  # plural -> verbs of <plural>/scale
    for entry in entries:
        name, kind, namespaced, verbs = _entry(entry, what)
        plural, _, sub = name.partition("/")
        if not _RESOURCE_RE.fullmatch(plural) or len(plural) > 63:
            raise MalformedAnswerError(f"{what}: resource name {name[:80]!r} is not a resource name")
        if sub == "scale":
            scales[plural] = verbs
        elif not sub:
            top.setdefault(kind, (plural, namespaced))
    return {kind: _Resource(plural, namespaced, scales.get(plural))
            for kind, (plural, namespaced) in top.items()}


def _entry(entry: Any, what: str) -> tuple[str, str, bool, frozenset[str]]:
    if not isinstance(entry, dict):
        raise MalformedAnswerError(f"{what}: an APIResourceList entry is not an object")
    name, kind, namespaced, verbs = (entry.get(k) for k in ("name", "kind", "namespaced", "verbs"))
    if not isinstance(name, str) or not isinstance(kind, str) or not isinstance(namespaced, bool):
        raise MalformedAnswerError(f"{what}: an APIResourceList entry lacks a string name and kind or a "
                                   "boolean namespaced")
    if not isinstance(verbs, list) or not all(isinstance(v, str) for v in verbs):
        raise MalformedAnswerError(f"{what}: the verbs of {name[:80]!r} are not a list of strings")
    return name, kind, namespaced, frozenset(verbs)


class Discovery:
    """kind -> `ScalableResource` through the APIResourceList of the target's apiVersion, cached.

    `fetch(path, what)` returns the raw body of a 2xx answer and raises our KubeError types (NotFoundError on
    404). A failed fetch (5xx, timeout, 403, a malformed list) is not cached: the next read asks again.
    """

    def __init__(
        self,
        fetch: Callable[[str, str], bytes],
        clock: Callable[[], float] = time.monotonic,
        refresh_after: float = 30.0,
    ) -> None:
        self._fetch = fetch
        self._clock = clock
        self.refresh_after = refresh_after
        self._entries: dict[str, _Entry] = {}
        self._locks: dict[str, threading.Lock] = {}
        self._lock = threading.Lock()

    def resolve(self, ref: TargetRef, what: str) -> ScalableResource:
        """The resource of `ref`'s kind; KindNotFoundError, NotScalableError or the fetch's error else."""
        entry = self._entry(ref.api_version, what, refresh=False)
        if (entry.kinds is None or ref.kind not in entry.kinds) and self._stale(entry):
            entry = self._entry(ref.api_version, what, refresh=True)  # a CRD installed since
        return self._check(entry, ref, what)

    def refresh(self, ref: TargetRef, what: str, current: ScalableResource) -> ScalableResource | None:
        """After a 404 of `current`: the kind's resource as discovery says now, when it moved (the CRD was
        reinstalled with another plural) or vanished (raises); None when the 404 stands, or when the list is
        too fresh to ask again (at most one request per apiVersion per `refresh_after`)."""
        with self._lock:
            entry = self._entries.get(ref.api_version)
        if entry is None or not self._stale(entry):
            return None
        fresh = self._check(self._entry(ref.api_version, what, refresh=True), ref, what)
        return None if fresh == current else fresh

    def _stale(self, entry: _Entry) -> bool:
        return self._clock() - entry.fetched_at >= self.refresh_after

    def _entry(self, api_version: str, what: str, refresh: bool) -> _Entry:
        with self._lock:
            lock = self._locks.setdefault(api_version, threading.Lock())
            seen = self._entries.get(api_version)
        with lock:  # one request per apiVersion at a time; the others wait and take its answer
            with self._lock:
                entry = self._entries.get(api_version)
            if entry is not None and (not refresh or entry is not seen):
                return entry
            path = api_path(api_version)
            try:
                kinds: dict[str, _Resource] | None = parse_resource_list(
                    self._fetch(path, f"{what}: discovery GET {path}"), f"{what}: discovery GET {path}",
                    api_version)
            except NotFoundError:  # the apiVersion is not served: an answer too, kept as the lists are
                kinds = None
            entry = _Entry(self._clock(), kinds)
            with self._lock:
                self._entries[api_version] = entry
            return entry

    @staticmethod
    def _check(entry: _Entry, ref: TargetRef, what: str) -> ScalableResource:
        if entry.kinds is None:
            version = ref.api_version.rpartition("/")[2]
            raise KindNotFoundError(f"{what}: the API server does not serve apiVersion {ref.api_version} "
                                    f"(is the CRD of {ref.kind} installed, and does it serve {version}?)")
        resource = entry.kinds.get(ref.kind)
        if resource is None:
            raise KindNotFoundError(f"{what}: the API has no kind {ref.kind} in {ref.api_version} "
                                    "(is the CRD installed?)")
        named = f"kind {ref.kind} ({resource.plural}{'.' + ref.group if ref.group else ''})"
        if resource.scale_verbs is None:
            raise NotScalableError(f"{what}: {named} has no scale subresource, so it cannot be scaled "
                                   "(a CRD serves one with spec.versions[].subresources.scale)")
        if not {"get", "patch"} <= resource.scale_verbs:
            raise NotScalableError(f"{what}: the scale subresource of {named} does not allow get and patch "
                                   f"(verbs: {', '.join(sorted(resource.scale_verbs))[:120]})")
        if not resource.namespaced:
            raise NotScalableError(f"{what}: {named} is cluster-scoped; a rule scales a namespaced resource")
        return ScalableResource(ref.api_version, resource.plural, ref.kind)
