"""A small HTTP server that answers like the Kubernetes API server for what the controller calls.

Same paths, JSON shapes (autoscaling/v1 Scale, apps/v1 Deployment/StatefulSet, any registered kind with or
without /scale (`install`), core/v1 Event, Pod lists and Pod merge patches, coordination.k8s.io/v1 Lease,
discovery documents, v1 Status on errors; kinds, discovery and pods live in kinds.py and resources.py) and
status codes, including resourceVersion conflicts.
As the real API server: a Scale's status.replicas is the workload's, not its spec (it follows spec only when a
test sets `Workload.status_replicas`, as the Deployment controller would); a created object gets uid,
resourceVersion and creationTimestamp; creating an existing name is 409 AlreadyExists; an object whose
namespace differs from the path's is 400; a Lease update (PUT) must carry a resourceVersion (422 Invalid,
leases allow no unconditional update) and creates a missing Lease (leases allow create on update); a PATCH
whose Content-Type is not a patch type is 415. JSON patch and server-side apply are real patch types the fake
does not model: it answers 501 rather than pretend.
Faults on demand: `fail(method, path_regex, status, times)`, `delay(method, path_regex, seconds)` and
`answer(method, path_regex, body)`: a body (JSON or raw bytes) served as a broken or hostile server would.
Every request is recorded, so tests assert on what was sent (e.g. nothing patched twice).
"""

from __future__ import annotations

import json
import re
import threading
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qsl, urlsplit

from kubernetes import client

from tests.fake_kube.kinds import KindsAndPods
from tests.fake_kube.objects import (
    ACCEPTED_PATCHES,
    MERGE_PATCHES,
    UNMODELLED_PATCHES,
    Workload,
    patch_scale,
    scale_json,
    status,
    workload_json,
)
from tests.fake_kube.resources import BUILTIN, Resource

__all__ = ["FakeApiServer", "Request", "Resource", "Workload", "scale_json", "status", "workload_json"]

_WORKLOAD = re.compile(r"^/(?:api/(v1)|apis/([^/]+/[^/]+))/namespaces/([^/]+)/([^/]+)/([^/]+)(/scale)?$")
_PODS = re.compile(r"^/api/v1/namespaces/([^/]+)/pods$")
_POD = re.compile(r"^/api/v1/namespaces/([^/]+)/pods/([^/]+)$")
_EVENTS = re.compile(r"^/api/v1/namespaces/([^/]+)/events$")
_LEASES = re.compile(r"^/apis/coordination.k8s.io/v1/namespaces/([^/]+)/leases(?:/([^/]+))?$")
_NAMESPACED = re.compile(r"^/apis?/.*?/namespaces/([^/]+)/")
ANSWER_TIMEOUT = 15.0
"""A client's request timeout for answers this server gives at once: a hang guard, not a speed bound (a
busy 2-core machine has kept a 2 s one waiting). Tests of timeouts set their own, with a delayed answer."""
_WRONG_NAMESPACE = "the namespace of the provided object does not match the namespace sent on the request"


@dataclass
class Fault:
    method: str
    pattern: re.Pattern[str]
    status: int | None
    times: int | None  # None: until cleared
    delay: float = 0.0
    token: str | None = None  # only requests with this bearer token (one client among several)
    body: bytes | None = None  # served instead of the real answer (status: `status`, else 200)


@dataclass
class Request:
    method: str
    path: str
    body: Any
    content_type: str
    query: dict[str, str] = field(default_factory=dict)


class FakeApiServer(KindsAndPods):
    def __init__(self) -> None:
        self.lock = threading.RLock()
        self.workloads: dict[tuple[str, str, str], Workload] = {}
        self.resources: list[Resource] = list(BUILTIN)
        self.pods: dict[tuple[str, str], dict[str, Any]] = {}
        self.events: list[dict[str, Any]] = []
        self.leases: dict[tuple[str, str], dict[str, Any]] = {}
        self.requests: list[Request] = []
        self.faults: list[Fault] = []
        self.before_patch: Callable[[Workload], None] | None = None
        self._version = 0
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, args=(0.05,), daemon=True)
        self._clients: list[client.ApiClient] = []

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def start(self) -> FakeApiServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        for api_client in self._clients:
            api_client.close()  # closes its pooled connections, so the handler threads see EOF and end
        if self._thread.is_alive():
            self._server.shutdown()
        self._server.server_close()

    def api_client(self, retries: int = 0, token: str | None = None) -> client.ApiClient:
        configuration = client.Configuration(host=self.url)
        configuration.retries = retries
        if token is not None:
            configuration.api_key = {"authorization": token}
            configuration.api_key_prefix = {"authorization": "Bearer"}
        api_client = client.ApiClient(configuration)
        self._clients.append(api_client)
        return api_client

    def kubeconfig(self) -> str:
        return json.dumps(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "current-context": "fake",
                "clusters": [{"name": "fake", "cluster": {"server": self.url}}],
                "users": [{"name": "fake", "user": {"token": "test-token"}}],
                "contexts": [{"name": "fake", "context": {"cluster": "fake", "user": "fake"}}],
            }
        )

    # --- state and faults ----------------------------------------------------------------------------------
    def add(
        self, name: str, replicas: int, namespace: str = "ml", kind: str = "deployments", **annotations: str
    ) -> Workload:
        """A workload of the installed resource whose plural is `kind` (with a scale if it has one)."""
        with self.lock:
            resource = next(r for r in self.resources if r.plural == kind)
            w = Workload(kind, namespace, name, replicas, dict(annotations), status_replicas=replicas,
                         selector=f"app={name}", kind=resource.kind, api_version=resource.group_version)
            self.workloads[(kind, namespace, name)] = w
        return w

    def replicas(self, name: str, namespace: str = "ml", kind: str = "deployments") -> int:
        with self.lock:
            return self.workloads[(kind, namespace, name)].replicas

    def fail(
        self, method: str, path: str, status: int, times: int | None = 1, token: str | None = None
    ) -> Fault:
        fault = Fault(method, re.compile(path), status, times, token=token)
        with self.lock:
            self.faults.append(fault)
        return fault

    def delay(self, method: str, path: str, seconds: float, times: int | None = None) -> Fault:
        fault = Fault(method, re.compile(path), None, times, seconds)
        with self.lock:
            self.faults.append(fault)
        return fault

    def answer(
        self, method: str, path: str, body: object, status: int = 200, times: int | None = None
    ) -> Fault:
        """Serve `body` (bytes as they are, anything else as JSON) for matching requests, on the same path
        and with the same headers the real answer would have."""
        raw = body if isinstance(body, bytes) else json.dumps(body).encode()
        fault = Fault(method, re.compile(path), status, times, body=raw)
        with self.lock:
            self.faults.append(fault)
        return fault

    def clear_faults(self) -> None:
        with self.lock:
            self.faults.clear()

    def patches(self, name: str | None = None) -> list[int]:
        with self.lock:
            return [
                r.body["spec"]["replicas"]
                for r in self.requests
                if r.method == "PATCH"
                and r.path.endswith("/scale")
                and r.body.get("_applied")
                and (name is None or f"/{name}/scale" in r.path)
            ]

    def pod_patches(self) -> list[tuple[int, str, dict[str, Any]]]:
        """(index among all requests, pod name, annotations sent) of every pod PATCH, in order."""
        with self.lock:
            return [(i, r.path.rsplit("/", 1)[1], (r.body.get("metadata") or {}).get("annotations") or {})
                    for i, r in enumerate(self.requests) if r.method == "PATCH" and _POD.match(r.path)]

    def scale_patch_indices(self, name: str) -> list[int]:
        """Index among all requests of every PATCH of `name`'s scale, in order."""
        with self.lock:
            return [i for i, r in enumerate(self.requests)
                    if r.method == "PATCH" and r.path.endswith(f"/{name}/scale")]

    def event_reasons(self, name: str | None = None) -> list[str]:
        with self.lock:
            return [
                e["reason"]
                for e in self.events
                if name is None or e.get("involvedObject", {}).get("name") == name
            ]

    def _take_fault(self, method: str, path: str, token: str | None) -> Fault | None:
        with self.lock:
            for fault in self.faults:
                if fault.token is not None and fault.token != token:
                    continue
                if fault.method in (method, "*") and fault.pattern.search(path):
                    if fault.times is not None:
                        fault.times -= 1
                        if fault.times <= 0:
                            self.faults.remove(fault)
                    return fault
        return None

    # --- API ------------------------------------------------------------------------------------------------
    def handle(
        self,
        method: str,
        path: str,
        body: Any,
        content_type: str = "application/json",
        query: Mapping[str, str] | None = None,
    ) -> tuple[int, dict[str, Any]]:
        if method == "PATCH":
            media = content_type.split(";", 1)[0].strip()
            if media in UNMODELLED_PATCHES:
                return status(501, f"the fake API server does not model {media} patches")
            if media not in MERGE_PATCHES:
                return status(
                    415,
                    "the body of the request was in an unknown format - accepted media types include: "
                    f"{ACCEPTED_PATCHES}, application/strategic-merge-patch+json",
                )
        if isinstance(body, dict) and method in ("POST", "PUT"):
            namespace = _NAMESPACED.match(path)
            given = (body.get("metadata") or {}).get("namespace")
            if namespace is not None and given not in (None, "", namespace.group(1)):
                return status(400, _WRONG_NAMESPACE)
        if method == "GET" and (answer := self._discovery(path)) is not None:
            return answer
        if (m := _PODS.match(path)) and method == "GET":
            return self._list_pods(m.group(1), query or {})
        if (m := _POD.match(path)) and method == "PATCH":
            return self._patch_pod(m.group(1), m.group(2), body)
        if (m := _WORKLOAD.match(path)) and (resource := self._resource(m[1] or m[2], m[4])) is not None:
            return self._workload(method, resource, m[3], m[5], bool(m[6]), body)
        if (m := _EVENTS.match(path)) and method == "POST":
            with self.lock:
                name = body["metadata"]["name"]
                if any(e["metadata"]["name"] == name and e["metadata"]["namespace"] == m.group(1)
                       for e in self.events):
                    return status(409, f'events "{name}" already exists', name=name, kind="events",
                                  reason="AlreadyExists")
                event = {**body, "metadata": self._created_metadata(body, m.group(1), name)}
                self.events.append(event)
            return 201, event
        if m := _LEASES.match(path):
            return self._lease(method, m.group(1), m.group(2), body)
        return status(404, f"the server could not find the requested resource ({method} {path})")

    def _workload(
        self, method: str, resource: Resource, ns: str, name: str, scale: bool, body: Any
    ) -> tuple[int, dict[str, Any]]:
        plural = resource.plural
        qualified = f"{plural}.{resource.group}" if resource.group else plural
        if scale and not resource.scale:
            return status(404, f"the server could not find the requested resource ({method} .../scale)")
        with self.lock:
            w = self.workloads.get((plural, ns, name))
            if w is None:
                return status(404, f'{qualified} "{name}" not found', name=name, kind=plural)
            if method == "GET":
                return 200, scale_json(w) if scale else workload_json(w)
            if method == "PATCH" and scale:
                if self.before_patch is not None:
                    hook, self.before_patch = self.before_patch, None
                    hook(w)
                return patch_scale(w, body, qualified)
        return status(405, "method not allowed")

    def _lease(self, method: str, ns: str, name: str | None, body: Any) -> tuple[int, dict[str, Any]]:
        resource = "leases.coordination.k8s.io"
        with self.lock:
            if method == "POST":
                name = body["metadata"]["name"]
                if (ns, name) in self.leases:
                    return status(409, f'{resource} "{name}" already exists', name=name, kind="leases",
                                  reason="AlreadyExists")
                return 201, self._store_lease(ns, name, body, None)
            current = self.leases.get((ns, name or ""))
            if method == "PUT" and current is None:  # leases allow create on update
                return 201, self._store_lease(ns, name or "", body, None)
            if current is None:
                return status(404, f'{resource} "{name}" not found', name=name or "", kind="leases")
            if method == "GET":
                return 200, current
            if method == "PUT":
                wanted = (body.get("metadata") or {}).get("resourceVersion")
                if not wanted:  # leases allow no unconditional update
                    return status(
                        422,
                        f'{resource} "{name}" is invalid: metadata.resourceVersion: Invalid value: 0x0: '
                        "must be specified for an update",
                        name=name or "",
                        kind="leases",
                    )
                if wanted != current["metadata"]["resourceVersion"]:
                    return status(
                        409,
                        f'Operation cannot be fulfilled on {resource} "{name}": '
                        "the object has been modified; please apply your changes to the latest version and "
                        "try again",
                        name=name or "",
                        kind="leases",
                    )
                return 200, self._store_lease(ns, name or "", body, current)
        return status(405, "method not allowed")

    def _created_metadata(
        self, body: dict[str, Any], ns: str, name: str, current: dict[str, Any] | None = None
    ) -> dict[str, Any]:
        """Set by the API server on a write: uid and creationTimestamp once, a resourceVersion each time."""
        self._version += 1
        kept = current["metadata"] if current is not None else {
            "uid": str(uuid.uuid4()),
            "creationTimestamp": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        }
        return {
            **(body.get("metadata") or {}),
            "name": name,
            "namespace": ns,
            "uid": kept["uid"],
            "creationTimestamp": kept["creationTimestamp"],
            "resourceVersion": str(self._version),
        }

    def _store_lease(
        self, ns: str, name: str, body: dict[str, Any], current: dict[str, Any] | None
    ) -> dict[str, Any]:
        lease = {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": self._created_metadata(body, ns, name, current),
            "spec": body.get("spec", {}),
        }
        self.leases[(ns, name)] = lease
        return lease

    def lease_holder(self, ns: str = "gpu-autoscaler", name: str = "gpu-autoscaler") -> str | None:
        with self.lock:
            lease = self.leases.get((ns, name))
            return None if lease is None else lease["spec"].get("holderIdentity")


def _handler(api: FakeApiServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def _serve(self) -> None:
            url = urlsplit(self.path)
            path, query = url.path, dict(parse_qsl(url.query, keep_blank_values=True))
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b""
            body = json.loads(raw) if raw else None
            request = Request(self.command, path, body, self.headers.get("Content-Type", ""), query)
            with api.lock:
                api.requests.append(request)
            auth = self.headers.get("Authorization") or ""
            fault = api._take_fault(self.command, path, auth.removeprefix("Bearer ") or None)
            if fault is not None and fault.delay:
                time.sleep(fault.delay)
            if fault is not None and fault.body is not None:
                code, data = fault.status or 200, fault.body
            else:
                if fault is not None and fault.status is not None:
                    code, payload = status(fault.status, f"injected fault {fault.status}")
                else:
                    code, payload = api.handle(self.command, path, body, request.content_type, query)
                data = json.dumps(payload).encode()
            try:
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client gave up (its timeout): as with a real server, the work may still be done

        do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _serve

        def log_message(self, format: str, *args: object) -> None:
            pass

    return Handler
