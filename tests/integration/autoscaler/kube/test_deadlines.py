"""The Kubernetes calls have a deadline on the whole exchange: an API server that sends its answer one byte
at a time (tests/drip.py), in its headers or its body, fails the read of a target at the request timeout,
through the client `run` and `status` build from a kubeconfig, and leaves no thread behind."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings

from autoscaler.errors import KubeError
from autoscaler.kube.scale import KubernetesScaleBackend, load_api_client
from autoscaler.policy import TargetRef
from tests.drip import dripping, drips

pytestmark = pytest.mark.integration

TIMEOUT = 0.6
HANG_GUARD = 8.0
DISCOVERY = json.dumps({"kind": "APIResourceList", "groupVersion": "apps/v1", "resources": []}).encode()
ANSWER = (b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: "
          + str(len(DISCOVERY)).encode() + b"\r\n\r\n" + DISCOVERY)


@settings(max_examples=5, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(drips(TIMEOUT, ANSWER))
def test_reading_a_target_fails_at_the_request_timeout(tmp_path: Path, drip: tuple[int, float]) -> None:
    start_at, pace = drip
    before = set(threading.enumerate())
    with dripping(start_at, pace, ANSWER) as url:
        kubeconfig = tmp_path / "kubeconfig"
        kubeconfig.write_text(json.dumps({
            "apiVersion": "v1", "kind": "Config", "current-context": "drip",
            "clusters": [{"name": "drip", "cluster": {"server": url}}],
            "users": [{"name": "drip", "user": {"token": "t"}}],
            "contexts": [{"name": "drip", "context": {"cluster": "drip", "user": "drip"}}]}))
        api_client = load_api_client(str(kubeconfig))
        try:
            backend = KubernetesScaleBackend(api_client, request_timeout=TIMEOUT)
            began = time.monotonic()
            with pytest.raises(KubeError) as failed:
                backend.read_scale(TargetRef("Deployment", "ml", "web"))  # type: ignore[arg-type]
            assert time.monotonic() - began < HANG_GUARD
        finally:
            api_client.close()
    assert "within" in str(failed.value) or "in time" in str(failed.value), failed.value
    lasting = [t for t in threading.enumerate() if t not in before and not t.daemon and t.is_alive()]
    assert lasting == [], lasting
