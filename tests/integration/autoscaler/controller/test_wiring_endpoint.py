"""`run`'s HTTP endpoint as the wiring builds it: served over the controller until closed, and a busy port
closes the controller and runners built before it."""

from __future__ import annotations

import socket

import pytest
import requests

from autoscaler.config.rules import RuleSet
from autoscaler.controller.wiring import Endpoint, wire
from plumbing.prometheus.config import single_endpoint
from plumbing.prometheus.runner import PromQLRunner, PromQLSettings
from plumbing.web.server import ListenError
from tests.unit.autoscaler.controller.fakes import FakeBackend

pytestmark = pytest.mark.integration

NO_RULES = RuleSet("r.yaml", ())
PROMETHEUS = single_endpoint("http://127.0.0.1:1")


def test_the_endpoint_serves_the_controller_until_closed() -> None:
    with wire(rules=NO_RULES, backend=FakeBackend(), prometheus=PROMETHEUS, queries=PromQLSettings(""),
              endpoint=Endpoint(0, interval=1.0, host="127.0.0.1")) as wiring:
        assert wiring.server is not None
        base = f"http://127.0.0.1:{wiring.server.port}"
        assert requests.get(f"{base}/readyz", timeout=5).status_code == 503  # no sync completed yet
        wiring.controller.sync_once()
        assert requests.get(f"{base}/readyz", timeout=5).status_code == 200
        assert "gpu_autoscaler_rules_loaded 0.0" in requests.get(f"{base}/metrics", timeout=5).text
    with pytest.raises(requests.ConnectionError):
        requests.get(f"{base}/healthz", timeout=5)


def test_a_busy_port_closes_what_was_built(monkeypatch: pytest.MonkeyPatch) -> None:
    import autoscaler.controller.wiring as wiring_module

    built: list[PromQLRunner] = []
    real_runners = wiring_module.runners

    def recording(*args: object) -> dict[str, PromQLRunner]:
        made = real_runners(*args)  # type: ignore[arg-type]
        built.extend(made.values())
        return made

    monkeypatch.setattr(wiring_module, "runners", recording)
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        with pytest.raises(ListenError):
            wire(rules=NO_RULES, backend=FakeBackend(), prometheus=PROMETHEUS, queries=PromQLSettings(""),
                 endpoint=Endpoint(taken.getsockname()[1], interval=1.0, host="127.0.0.1"))
    assert len(built) == 1 and all(r._pool._shutdown for r in built)  # type: ignore[attr-defined]
