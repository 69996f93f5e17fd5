"""The controller as `run` builds it, for this package's tests: a real PromQLRunner, the official client's
scale backend against the fake Kubernetes API, closed (runner too) when the test ends."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator

import pytest

from autoscaler.config.rules import RuleSet
from autoscaler.controller.loop import Controller, ControllerSettings
from autoscaler.kube.scale import KubernetesScaleBackend
from plumbing.prometheus.config import Endpoint
from plumbing.prometheus.runner import PromQLRunner, PromQLSettings
from tests.fake_kube.apiserver import ANSWER_TIMEOUT, FakeApiServer

RealController = Callable[..., Controller]
"""(ruleset, runner settings, *, endpoint=None, request_timeout=ANSWER_TIMEOUT) -> a Controller."""


@pytest.fixture
def real_controller(apiserver: FakeApiServer) -> Iterator[RealController]:
    made: list[tuple[Controller, PromQLRunner]] = []

    def build(ruleset: RuleSet, settings: PromQLSettings, *, endpoint: Endpoint | None = None,
              request_timeout: float = ANSWER_TIMEOUT) -> Controller:
        runner = PromQLRunner(settings, endpoint)
        backend = KubernetesScaleBackend(apiserver.api_client(), request_timeout=request_timeout)
        controller = Controller(backend, runner, ruleset, time.time, settings=ControllerSettings())
        made.append((controller, runner))
        return controller

    yield build
    for controller, runner in made:
        controller.close()
        runner.close()
