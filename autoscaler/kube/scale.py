"""The Kubernetes implementation of the scale interface (`autoscaler.kube.backend`), on the official client.

`KubernetesScaleBackend` does what the controller asks of a `ScaleBackend` with the scale subresource of any
kind that has one (Deployment, StatefulSet, an Argo Rollout, a LeaderWorkerSet, a custom resource), found
through API discovery (`discovery`). Every `ApiException` and transport error becomes one of our `KubeError`
types, chained `from` the original, so nothing from the client leaks. Answers are read as raw JSON and checked
(`answers`): a malformed answer is a failed read of that target, never a replica count. The interface's
types and `NamespaceScope` live in `autoscaler.kube.backend` (no client import) and are exported here too.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import os
import threading
import time
import uuid
from collections.abc import Callable, Mapping
from typing import Any, Literal, TypeVar

import urllib3
import yaml
from kubernetes import client, config
from kubernetes.client.exceptions import ApiException
from kubernetes.config.config_exception import ConfigException

from autoscaler.errors import (
    ConflictError,
    KindNotFoundError,
    KubeApiError,
    KubeConfigError,
    KubeError,
    KubeTimeoutError,
    MalformedAnswerError,
    NamespaceNotAllowedError,
    NotFoundError,
    NotScalableError,
)
from autoscaler.kube.annotations import PAUSED_ANNOTATION, PAUSED_REPLICAS_ANNOTATION
from autoscaler.kube.answers import (
    MAX_LIST_BYTES,
    annotations_of,
    parse_json,
    parse_object,
    pod_name_and_annotations,
    pod_page,
    scale_fields,
    scale_selector,
    unschedulable_since,
)
from autoscaler.kube.backend import NamespaceScope, PodMeta, ScaleBackend, ScaleState
from autoscaler.kube.discovery import Discovery, ScalableResource
from autoscaler.policy import TargetRef
from plumbing import deadline, yamlsafe
from plumbing.deadline import MIN_EXCHANGE_SECONDS, Deadline

log = logging.getLogger(__name__)

__all__ = [
    "PAUSED_ANNOTATION",
    "PAUSED_REPLICAS_ANNOTATION",
    "ConflictError",
    "KindNotFoundError",
    "KubeApiError",
    "KubeError",
    "KubeTimeoutError",
    "KubernetesScaleBackend",
    "MalformedAnswerError",
    "NamespaceNotAllowedError",
    "NamespaceScope",
    "NotFoundError",
    "NotScalableError",
    "ScaleBackend",
    "ScaleState",
    "load_api_client",
]

COMPONENT = "gpu-autoscaler"
POD_PAGE = 500
"""Pods per list request of the Pending check and the deletion costs (`limit`)."""
MAX_POD_PAGES = 20
"""At most this many pages (10,000 pods of one target): a server repeating its continue token cannot keep a
sync listing forever."""

T = TypeVar("T")


def load_api_client(kubeconfig: str | None = None, request_retries: int = 0) -> client.ApiClient:
    """In a pod (no --kubeconfig), the in-cluster service account; otherwise the kubeconfig file.

    `request_retries` is urllib3's retry count: 0 by default because the controller retries on its next sync
    and a retried GET would multiply the time a slow API server costs.
    """
    configuration = client.Configuration()
    if not (kubeconfig is None and os.environ.get("KUBERNETES_SERVICE_HOST")):
        _check_kubeconfig_files(kubeconfig)
    try:
        if kubeconfig is None and os.environ.get("KUBERNETES_SERVICE_HOST"):
            config.load_incluster_config(client_configuration=configuration)
        else:
            config.load_kube_config(
                config_file=kubeconfig, client_configuration=configuration
            )
    except (ConfigException, OSError, ValueError, TypeError, KeyError, yaml.YAMLError) as e:
        where = kubeconfig or os.environ.get("KUBECONFIG", "~/.kube/config")
        raise KubeConfigError(f"cannot load Kubernetes configuration from {where}: {e}") from e
    configuration.retries = request_retries
    configuration.connection_pool_maxsize = 32  # the controller's 16 concurrent calls, with room
    api_client = client.ApiClient(configuration)
    deadline.install(api_client.rest_client.pool_manager)  # `_call` and `_send` bound each whole exchange
    return api_client


KUBECONFIG_LIMITS = yamlsafe.YamlLimits(max_bytes=1024 * 1024)
"""A kubeconfig of a few hundred contexts with embedded certificates fits in 1 MiB."""


def _check_kubeconfig_files(kubeconfig: str | None) -> None:
    """Read each kubeconfig file the client would read (--kubeconfig, else every path of $KUBECONFIG, else
    ~/.kube/config) through the bounded reader first: a FIFO, a bomb or 10,000 nested brackets is one
    KubeConfigError naming the file, never a hang or a traceback inside the client's own YAML loading."""
    listed = kubeconfig or os.environ.get("KUBECONFIG") or os.path.expanduser("~/.kube/config")
    for path in filter(None, listed.split(os.pathsep) if kubeconfig is None else [listed]):
        if not os.path.lexists(path):
            continue  # the client says it is missing, in its words and with its fallbacks
        try:
            yamlsafe.compose_file(path, KUBECONFIG_LIMITS, "kubeconfig")
        except yamlsafe.YamlFileError as exc:
            raise KubeConfigError(f"cannot load Kubernetes configuration from {exc}") from exc


def _status_message(e: ApiException) -> tuple[str, str]:
    """(reason, message) from the Status body the API server sends with an error."""
    try:
        body = json.loads(e.body or "")
        return str(body.get("reason") or e.reason or ""), str(body.get("message") or e.reason or "")
    except (ValueError, TypeError, AttributeError):
        return str(e.reason or ""), str(e.body or e.reason or "")


def translate(e: Exception, what: str) -> KubeError:
    """Map an ApiException or transport error to our types; `what` names the call for the message."""
    if isinstance(e, ApiException):
        reason, message = _status_message(e)
        status = int(e.status or 0)
        text = f"{what}: HTTP {status} {reason}: {message}".rstrip(": ")
        if status == 404:
            return NotFoundError(text, status=status)
        if status == 409:
            return ConflictError(text, status=status)
        if status == 504 or reason == "Timeout":
            return KubeTimeoutError(text, status=status)
        return KubeApiError(text, status=status)
    if isinstance(e, urllib3.exceptions.MaxRetryError) and isinstance(e.reason, Exception):
        e = e.reason  # urllib3 wraps the last failure of its retries
    if isinstance(e, urllib3.exceptions.TimeoutError | TimeoutError):
        return KubeTimeoutError(f"{what}: no answer in time ({e})")
    return KubeApiError(f"{what}: {type(e).__name__}: {e}")


_TRANSPORT_ERRORS = (ApiException, urllib3.exceptions.HTTPError, OSError, ValueError)


def _timed_out(what: str, seconds: float | None) -> KubeTimeoutError:
    return KubeTimeoutError(f"{what}: no complete answer within {seconds:g} s" if seconds else
                            f"{what}: no complete answer in time")


class KubernetesScaleBackend:
    """`ScaleBackend` on the official client: the scale subresource of any namespaced kind that has one.

    The resource serving a target's kind comes from API discovery, cached per apiVersion (`Discovery`). A
    patch carries the resourceVersion of the last read of that target, so a concurrent change (a user's
    `kubectl scale`, a rollout) answers 409 Conflict instead of being overwritten blindly, as in the HPA.
    """

    def __init__(
        self,
        api_client: client.ApiClient,
        request_timeout: float = 5.0,
        clock: Callable[[], float] | None = None,
        instance: str | None = None,
        discovery_refresh: float = 30.0,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self._api = api_client
        self._core = client.CoreV1Api(api_client)
        self._timeout = request_timeout
        self._exchange_seconds = max(request_timeout, MIN_EXCHANGE_SECONDS)
        self._clock = clock
        self._instance = instance or os.environ.get("HOSTNAME", COMPONENT)
        self._versions: dict[TargetRef, str | None] = {}
        self._lock = threading.Lock()
        self.discovery = Discovery(self._discover, monotonic, discovery_refresh)

    def _call(self, what: str, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        watch = Deadline(self._exchange_seconds)  # the whole exchange: dripped bytes cannot outlast it
        try:
            with watch:
                return fn(*args, _request_timeout=self._timeout, **kwargs)
        except _TRANSPORT_ERRORS as e:  # cut by this deadline or by one around it (`_send`'s)
            cut = watch.expired or deadline.expired()
            raise _timed_out(what, self._exchange_seconds) if cut else translate(e, what) from e

    def _send(self, what: str, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> bytes:
        """The raw body of a 2xx answer, read whole so the connection goes back to the pool clean."""
        watch = Deadline(self._exchange_seconds)  # the call and its body together
        with watch:
            response = self._call(what, fn, *args, _preload_content=False, **kwargs)
            try:
                raw = response.data
            except _TRANSPORT_ERRORS as e:  # the body broke off after the headers
                raise _timed_out(what, self._exchange_seconds) if watch.expired else translate(e, what) from e
            finally:
                response.release_conn()
        if watch.expired:  # cut in its headers, an answer can look complete and empty
            raise _timed_out(what, self._exchange_seconds)
        return raw if isinstance(raw, bytes) else b""

    def _get(self, what: str, kind: str, fn: Callable[..., Any], *args: Any) -> dict[str, Any]:
        """A read's JSON answer, checked to be an object of `kind` (the client's models are too lenient)."""
        return parse_object(self._send(what, fn, *args), what, kind)

    def _request(
        self,
        method: str,
        path: str,
        body: object = None,
        content_type: str | None = None,
        query: list[tuple[str, str]] | None = None,
        _request_timeout: float | None = None,
        _preload_content: bool = False,
    ) -> Any:
        """`method path` through the client (its auth, TLS, proxy, timeouts), for the paths discovery finds,
        which no generated method has: the urllib3 response of a 2xx, else raises ApiException."""
        headers = {"Accept": "application/json"}
        if content_type is not None:
            headers["Content-Type"] = content_type
        request = self._api.param_serialize(method=method, resource_path=path, query_params=query or [],
                                            header_params=headers, body=body, auth_settings=["BearerToken"])
        response = self._api.call_api(*request, _request_timeout=_request_timeout)
        if not 200 <= response.status <= 299:
            response.read()
            raise ApiException.from_response(http_resp=response, body=None, data=None)
        return response.response

    def _discover(self, path: str, what: str) -> bytes:
        return self._send(what, self._request, "GET", path)

    def read_scale(self, ref: TargetRef) -> ScaleState:
        what = f"get {ref.kind} {ref.namespace}/{ref.name}"
        resource = self.discovery.resolve(ref, what)
        try:
            scale = self._get_scale(ref, resource, what)
        except NotFoundError:
            moved = self.discovery.refresh(ref, what, resource)  # raises when the kind is gone
            if moved is None:
                raise
            resource, scale = moved, self._get_scale(ref, moved, what)
        spec, status, version = scale_fields(scale, what + " scale")
        with self._lock:
            self._versions[ref] = version
        workload = self._get(what, ref.kind, self._request, "GET", resource.path(ref.namespace, ref.name))
        return ScaleState(
            spec_replicas=spec,
            status_replicas=status,
            annotations=annotations_of(workload, what),
            resource_version=version,
            selector=scale_selector(scale),
        )

    def _get_scale(self, ref: TargetRef, resource: ScalableResource, what: str) -> dict[str, Any]:
        path = resource.path(ref.namespace, ref.name, "scale")
        return self._get(what + " scale", "Scale", self._request, "GET", path)

    def patch_scale(self, ref: TargetRef, replicas: int) -> None:
        with self._lock:
            version = self._versions.pop(ref, None)
        body: dict[str, Any] = {"spec": {"replicas": int(replicas)}}
        if version:
            body["metadata"] = {"resourceVersion": version}
        what = f"patch {ref.kind} {ref.namespace}/{ref.name} scale to {replicas}"
        resource = self.discovery.resolve(ref, what)
        self._send(  # the answer is not used: a 2xx is the success, whatever its body
            what,
            self._request,
            "PATCH",
            resource.path(ref.namespace, ref.name, "scale"),
            body,
            "application/merge-patch+json",
            [("fieldManager", COMPONENT)],
        )

    def emit_event(
        self, ref: TargetRef, type_: Literal["Normal", "Warning"], reason: str, message: str
    ) -> None:
        now = (
            dt.datetime.now(dt.UTC)
            if self._clock is None
            else dt.datetime.fromtimestamp(self._clock(), dt.UTC)
        )
        event = client.CoreV1Event(
            metadata=client.V1ObjectMeta(name=f"{ref.name}.{uuid.uuid4().hex[:16]}", namespace=ref.namespace),
            involved_object=client.V1ObjectReference(
                api_version=ref.api_version, kind=ref.kind, name=ref.name, namespace=ref.namespace
            ),
            reason=reason,
            message=message[:1024],
            type=type_,
            source=client.V1EventSource(component=COMPONENT),
            reporting_component=COMPONENT,
            reporting_instance=self._instance,
            first_timestamp=now,
            last_timestamp=now,
            count=1,
        )
        self._send(
            f"create event {reason} on {ref.kind} {ref.namespace}/{ref.name}",
            self._core.create_namespaced_event,
            ref.namespace,
            event,
        )

    def unschedulable_since(self, ref: TargetRef, selector: str | None) -> tuple[float, ...]:
        if selector is None:
            return ()
        what = f"list Pending pods of {ref.kind} {ref.namespace}/{ref.name}"
        items = self._list_pods(ref, what, selector, "status.phase=Pending")
        return tuple(t for t in map(unschedulable_since, items) if t is not None)

    def list_pods(self, ref: TargetRef, selector: str) -> tuple[PodMeta, ...]:
        what = f"list pods of {ref.kind} {ref.namespace}/{ref.name}"
        listed = (pod_name_and_annotations(item) for item in self._list_pods(ref, what, selector, None))
        return tuple(PodMeta(name, annotations) for name, annotations in filter(None, listed))

    def annotate_pod(self, namespace: str, name: str, annotations: Mapping[str, str | None]) -> None:
        what = f"annotate pod {namespace}/{name}"
        body = {"metadata": {"annotations": dict(annotations)}}
        self._send(what, self._core.patch_namespaced_pod, name, namespace, body, field_manager=COMPONENT,
                   _content_type="application/merge-patch+json")

    def _list_pods(self, ref: TargetRef, what: str, selector: str, fields: str | None) -> list[Any]:
        """The target's pods matching `selector` (and the field selector `fields`), page by page: unchecked
        items, each judged by the caller."""
        items: list[Any] = []
        token: str | None = None
        for _ in range(MAX_POD_PAGES):
            page: dict[str, Any] = {"label_selector": selector, "limit": POD_PAGE}
            if fields is not None:
                page["field_selector"] = fields
            if token is not None:
                page["_continue"] = token
            raw = self._send(what, self._core.list_namespaced_pod, ref.namespace, **page)
            listed, token = pod_page(parse_json(raw, what, "PodList", MAX_LIST_BYTES), what)
            items.extend(listed)
            if token is None:
                return items
        log.warning("%s: more than %d pages of %d pods; using the first %d pages", what, MAX_POD_PAGES,
                    POD_PAGE, MAX_POD_PAGES)
        return items
