"""Fixtures of the controller unit tests: an in-memory backend and metrics, a clock at T0, controllers."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from autoscaler.config.rules import RuleSet
from autoscaler.controller.loop import Controller, ControllerSettings
from tests.clock import T0, ManualClock
from tests.unit.autoscaler.controller.fakes import FakeBackend, FakeMetrics


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(T0)


@pytest.fixture
def backend() -> FakeBackend:
    return FakeBackend()


@pytest.fixture
def source() -> FakeMetrics:
    return FakeMetrics()


@pytest.fixture
def make_controller(
    backend: FakeBackend, source: FakeMetrics, clock: ManualClock
) -> Iterator[Callable[..., Controller]]:
    made: list[Controller] = []

    def make(rules: RuleSet, is_leader: Callable[[], bool] = lambda: True, **settings: Any) -> Controller:
        c = Controller(
            backend, source, rules, clock, settings=ControllerSettings(**settings), is_leader=is_leader
        )
        made.append(c)
        return c

    yield make
    for c in made:
        c.close()
