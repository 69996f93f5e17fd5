"""Leader election on a coordination.k8s.io/v1 Lease, with the official client, as client-go's does it.

Only the holder of the Lease acts. The holder renews every `retry_period`; a renewal is a replace carrying the
Lease's resourceVersion, so two candidates racing for it get one success and one 409. A replica counts itself
the leader only until `renew_deadline` after the start of its last successful renewal, and `renew_deadline` is
shorter than `lease_duration`, so a replica that cannot renew stops acting before any other can take over.
Others see the Lease expired `lease_duration` after they observed its last change (their own clock).

Own logic rather than `kubernetes.leaderelection`: that module builds its own API client from the global
configuration, cannot be stopped, and exits the process on bad settings; tests need all three.
"""

from __future__ import annotations

import datetime as dt
import logging
import os
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from plumbing.deadline import MIN_EXCHANGE_SECONDS, Deadline

log = logging.getLogger(__name__)
T = TypeVar("T")


def _default_identity() -> str:
    return f"{os.environ.get('HOSTNAME', 'gpu-autoscaler')}_{uuid.uuid4().hex[:8]}"


@dataclass(frozen=True)
class LeaseSettings:
    """Where the Lease lives and its timing, in seconds (client-go defaults: 15 / 10 / 2)."""

    namespace: str = field(default_factory=lambda: os.environ.get("POD_NAMESPACE", "gpu-autoscaler"))
    name: str = "gpu-autoscaler"
    identity: str = field(default_factory=_default_identity)
    lease_duration: int = 15
    """How long others wait after the last renewal they saw before taking over (whole seconds, as the API)."""
    renew_deadline: float = 10.0
    """How long the leader keeps acting without a successful renewal; must be < lease_duration."""
    retry_period: float = 2.0
    """Time between attempts to acquire or renew."""
    request_timeout: float = 2.0

    def __post_init__(self) -> None:
        if not 0 < self.retry_period < self.renew_deadline < self.lease_duration:
            raise ValueError(
                "leader election needs 0 < retry_period < renew_deadline < lease_duration "
                f"(got {self.retry_period}, {self.renew_deadline}, {self.lease_duration})"
            )


class LeaderElector:
    """Acquires and renews the Lease in a background thread; `is_leader()` is what the controller asks."""

    def __init__(
        self,
        api_client: client.ApiClient,
        settings: LeaseSettings,
        monotonic: Callable[[], float] = time.monotonic,
        wall_clock: Callable[[], float] = time.time,
        on_change: Callable[[bool], None] | None = None,
    ) -> None:
        self._api = client.CoordinationV1Api(api_client)
        self.settings = settings
        self._monotonic = monotonic
        self._wall = wall_clock
        self._on_change = on_change
        self._renewed_at: float | None = None
        self._observed: tuple[object, ...] | None = None
        self._observed_at = 0.0
        self._was_leader = False
        self._thread: threading.Thread | None = None

    @property
    def identity(self) -> str:
        return self.settings.identity

    def is_leader(self) -> bool:
        renewed = self._renewed_at
        return renewed is not None and self._monotonic() < renewed + self.settings.renew_deadline

    def start(self, stop: threading.Event) -> threading.Thread:
        self._thread = threading.Thread(target=self.run, args=(stop,), name="leader-election", daemon=True)
        self._thread.start()
        return self._thread

    def run(self, stop: threading.Event) -> None:
        while not stop.is_set():
            self.try_acquire_or_renew()
            self._notify()
            stop.wait(self.settings.retry_period)
        self.release()
        self._notify()

    def _notify(self) -> None:
        leader = self.is_leader()
        if leader != self._was_leader:
            self._was_leader = leader
            log.info(
                "%s %s the lease %s/%s",
                self.identity,
                "acquired" if leader else "lost",
                self.settings.namespace,
                self.settings.name,
            )
            if self._on_change is not None:
                self._on_change(leader)

    def _now(self) -> dt.datetime:
        return dt.datetime.fromtimestamp(self._wall(), dt.UTC)

    def _bounded(self, call: Callable[..., T], *args: Any) -> T:
        """One API call with a deadline on the whole exchange (plumbing/deadline.py)."""
        timeout = self.settings.request_timeout
        with Deadline(max(timeout, MIN_EXCHANGE_SECONDS)):
            return call(*args, _request_timeout=timeout)

    def try_acquire_or_renew(self) -> bool:
        """One attempt; True when this replica holds the Lease afterwards."""
        s = self.settings
        attempt_started = self._monotonic()
        try:
            lease = self._bounded(self._api.read_namespaced_lease, s.name, s.namespace)
        except ApiException as e:
            if e.status == 404:
                return self._create(attempt_started)
            log.warning("cannot read lease %s/%s: HTTP %s %s", s.namespace, s.name, e.status, e.reason)
            return False
        except Exception as e:  # transport errors: retried next period; leadership lapses by itself
            log.warning("cannot read lease %s/%s: %s", s.namespace, s.name, e)
            return False
        spec = lease.spec or client.V1LeaseSpec()
        holder = spec.holder_identity or ""
        if holder and holder != s.identity:
            record = (holder, spec.renew_time, spec.lease_duration_seconds)
            if record != self._observed:
                self._observed, self._observed_at = record, attempt_started
            if attempt_started < self._observed_at + _duration(spec.lease_duration_seconds, s.lease_duration):
                self._renewed_at = None
                return False
        now = self._now()
        if holder != s.identity:
            spec.lease_transitions = (spec.lease_transitions or 0) + (1 if holder else 0)
            spec.acquire_time = now
        spec.holder_identity = s.identity
        spec.lease_duration_seconds = s.lease_duration
        spec.renew_time = now
        lease.spec = spec
        try:
            self._bounded(self._api.replace_namespaced_lease, s.name, s.namespace, lease)
        except Exception as e:  # 409: another replica won the race; anything else: retried next period
            log.info("cannot update lease %s/%s: %s", s.namespace, s.name, _short(e))
            return False
        self._renewed_at = attempt_started
        return True

    def _create(self, attempt_started: float) -> bool:
        s = self.settings
        now = self._now()
        body = client.V1Lease(
            metadata=client.V1ObjectMeta(name=s.name, namespace=s.namespace),
            spec=client.V1LeaseSpec(
                holder_identity=s.identity,
                lease_duration_seconds=s.lease_duration,
                acquire_time=now,
                renew_time=now,
                lease_transitions=0,
            ),
        )
        try:
            self._bounded(self._api.create_namespaced_lease, s.namespace, body)
        except Exception as e:  # 409: created by another replica meanwhile
            log.info("cannot create lease %s/%s: %s", s.namespace, s.name, _short(e))
            return False
        self._renewed_at = attempt_started
        return True

    def release(self) -> None:
        """On shutdown: stop acting now, and let another replica take over without waiting for expiry."""
        if self._renewed_at is None:
            return
        self._renewed_at = None
        s = self.settings
        try:
            lease = self._bounded(self._api.read_namespaced_lease, s.name, s.namespace)
            if lease.spec is None or lease.spec.holder_identity != s.identity:
                return
            lease.spec.holder_identity = None
            lease.spec.lease_duration_seconds = 1
            lease.spec.renew_time = self._now()
            self._bounded(self._api.replace_namespaced_lease, s.name, s.namespace, lease)
        except Exception as e:  # best effort: the lease expires by itself
            log.info("cannot release lease %s/%s: %s", s.namespace, s.name, _short(e))


def _duration(seconds: object, default: int) -> int:
    """The holder's leaseDurationSeconds, or ours when it is not one the API allows (an int32 above 0): a
    malformed Lease is taken over after our own duration rather than never, or an OverflowError that would
    end the election thread."""
    return seconds if type(seconds) is int and 0 < seconds <= 2**31 - 1 else default


def _short(e: Exception) -> str:
    if isinstance(e, ApiException):
        return f"HTTP {e.status} {e.reason}"
    return f"{type(e).__name__}: {e}"
