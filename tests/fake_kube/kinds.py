"""The fake API server's kinds, discovery documents and pods: what `FakeApiServer` adds to serve any kind with
a scale subresource (installed by a test as a CRD would be), the pod lists and the pods' merge patches (the
deletion costs), 404 for a pod that is not there and 409 for a patch carrying an outdated resourceVersion, as
the API server answers."""

from __future__ import annotations

import re
import threading
from collections.abc import Mapping
from typing import Any

from tests.fake_kube.objects import Workload, status
from tests.fake_kube.resources import (
    Resource,
    SelectorError,
    discovery_document,
    merge_patch,
    pod_json,
    pod_list,
)

_DISCOVERY_PATHS = re.compile(r"^/(api|apis)(/v1|/[^/]+/[^/]+)?$")


class KindsAndPods:
    """State and answers of the kinds and pods; the server's lock guards them as everything else."""

    lock: threading.RLock
    resources: list[Resource]
    workloads: dict[tuple[str, str, str], Workload]
    pods: dict[tuple[str, str], dict[str, Any]]
    requests: list[Any]
    _version: int

    @property
    def url(self) -> str:
        raise NotImplementedError

    def install(self, *resources: Resource) -> None:
        """Serve these kinds (a CRD installed): in discovery and on their paths."""
        with self.lock:
            self.resources.extend(r for r in resources if r not in self.resources)

    def uninstall(self, *resources: Resource) -> None:
        """Stop serving these kinds (a CRD deleted); their objects go with them, as the API server's do."""
        with self.lock:
            self.resources = [r for r in self.resources if r not in resources]
            plurals = {r.plural for r in resources}
            self.workloads = {k: w for k, w in self.workloads.items() if k[0] not in plurals}

    def add_pod(
        self,
        name: str,
        labels: Mapping[str, str],
        namespace: str = "ml",
        phase: str = "Pending",
        unschedulable_since: str | None = None,
        annotations: Mapping[str, str] | None = None,
    ) -> dict[str, Any]:
        pod = pod_json(name, namespace, labels, phase, unschedulable_since)
        if annotations:
            pod["metadata"]["annotations"] = dict(annotations)
        with self.lock:
            self.pods[(namespace, name)] = pod
        return pod

    def pod_annotations(self, name: str, namespace: str = "ml") -> dict[str, str]:
        with self.lock:
            return dict(self.pods[(namespace, name)]["metadata"].get("annotations") or {})

    def _patch_pod(self, ns: str, name: str, body: Any) -> tuple[int, dict[str, Any]]:
        """A merge patch of the pod (RFC 7386: null removes a key); 409 when it names an older
        resourceVersion, as the API server's optimistic concurrency answers."""
        with self.lock:
            pod = self.pods.get((ns, name))
            if pod is None:
                return status(404, f'pods "{name}" not found', name=name, kind="pods")
            if not isinstance(body, dict):
                return status(400, "the body of a merge patch must be a JSON object")
            wanted = (body.get("metadata") or {}).get("resourceVersion")
            if wanted is not None and wanted != pod["metadata"]["resourceVersion"]:
                return status(409, f'Operation cannot be fulfilled on pods "{name}": the object has been '
                              "modified; please apply your changes to the latest version and try again",
                              name=name, kind="pods")
            patched = merge_patch(pod, body)
            self._version += 1
            patched["metadata"]["resourceVersion"] = str(self._version)
            self.pods[(ns, name)] = patched
            return 200, patched

    def discovery_requests(self, group_version: str | None = None) -> list[str]:
        """Paths of the discovery documents requested (of `group_version` only, when given)."""
        with self.lock:
            return [r.path for r in self.requests if r.method == "GET" and _DISCOVERY_PATHS.match(r.path)
                    and (group_version is None or r.path.endswith(f"/{group_version}"))]

    def _resource(self, group_version: str, plural: str) -> Resource | None:
        with self.lock:
            return next((r for r in self.resources if (r.group_version, r.plural) == (group_version, plural)
                         and r.kind not in ("Event", "Lease", "Pod")), None)

    def _discovery(self, path: str) -> tuple[int, dict[str, Any]] | None:
        with self.lock:
            found = discovery_document(path, self.resources, self.url.removeprefix("http://"))
        return None if found is None else (200, found)  # None: 404 below, as the API server answers

    def _list_pods(self, ns: str, query: Mapping[str, str]) -> tuple[int, dict[str, Any]]:
        with self.lock:
            pods = [p for (namespace, _), p in self.pods.items() if namespace == ns]
            self._version += 1
            version = self._version
        try:
            return 200, pod_list(pods, query, str(version))
        except (SelectorError, ValueError) as e:
            return status(400, str(e))
