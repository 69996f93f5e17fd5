"""A Lease whose leaseDurationSeconds the API would never hold (huge, negative) is taken over after our own
duration: never an OverflowError that ends the election thread, never a takeover at once."""

from __future__ import annotations

import threading
import time

import pytest

from autoscaler.kube.leader import LeaderElector
from tests.fake_kube.apiserver import FakeApiServer
from tests.integration.autoscaler.kube.test_leader import LEASE_DURATION, lease
from tests.support import wait_for

pytestmark = pytest.mark.integration


@pytest.mark.parametrize("duration", [10**400, -5, 0], ids=["huge", "negative", "zero"])
def test_malformed_lease_duration_is_ours(apiserver: FakeApiServer, duration: int) -> None:
    apiserver.leases[("gpu-autoscaler", "gpu-autoscaler")] = {
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": {"name": "gpu-autoscaler", "namespace": "gpu-autoscaler", "resourceVersion": "1",
                     "uid": "u", "creationTimestamp": "2026-01-01T00:00:00Z"},
        "spec": {"holderIdentity": "ghost", "leaseDurationSeconds": duration,
                 "renewTime": "2026-01-01T00:00:00.000000Z"},
    }
    elector = LeaderElector(apiserver.api_client(), lease("me"))
    stop = threading.Event()
    started = time.monotonic()
    thread = elector.start(stop)
    try:
        wait_for(elector.is_leader, timeout=LEASE_DURATION + 5, what="takeover of the malformed lease")
        assert time.monotonic() - started >= LEASE_DURATION - 0.2  # not at once: the ghost had its duration
        assert thread.is_alive()
        assert apiserver.lease_holder() == "me"
    finally:
        stop.set()
        thread.join(timeout=5)
