"""Fixtures of the controller unit tests: rules from YAML text, in-memory backend and metrics, a clock."""

from __future__ import annotations

import textwrap
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from autoscaler.config.rules import RuleSet, parse_rules
from autoscaler.controller.loop import Controller, ControllerSettings
from autoscaler.policy import TargetRef
from tests.clock import ManualClock
from tests.unit.controller.fakes import FakeBackend, FakeMetrics

T0 = 1_700_000_000.0


def rules_yaml(*rules: str) -> str:
    return "rules:\n" + "".join(textwrap.indent(textwrap.dedent(r).strip() + "\n", "  ") for r in rules)


def rule(
    name: str = "svc",
    query: str = "q_util",
    target: float = 80,
    *,
    min_replicas: int = 1,
    max_replicas: int = 10,
    extra: str = "",
    metrics: str | None = None,
    kind: str = "Deployment",
) -> str:
    metrics_block = (
        metrics
        or f"""
    metrics:
      - {{name: util, query: '{query}', type: Average, target: {target}}}"""
    )
    return f"""
- name: {name}
  target: {{kind: {kind}, namespace: ml, name: {name}}}
  minReplicas: {min_replicas}
  maxReplicas: {max_replicas}{textwrap.indent(textwrap.dedent(metrics_block), "  ")}
{textwrap.indent(textwrap.dedent(extra).strip(), "  ")}
"""


def ruleset(*rules: str) -> RuleSet:
    return parse_rules(rules_yaml(*rules), "rules.yaml")


def ref(name: str = "svc", kind: str = "Deployment") -> TargetRef:
    return TargetRef(kind, "ml", name)  # type: ignore[arg-type]


class Clock(ManualClock):
    """The shared clock, started where the controller's tests start: T0."""

    def __init__(self, t: float = T0) -> None:
        super().__init__(t)


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def backend() -> FakeBackend:
    return FakeBackend()


@pytest.fixture
def source() -> FakeMetrics:
    return FakeMetrics()


@pytest.fixture
def make_controller(
    backend: FakeBackend, source: FakeMetrics, clock: Clock
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
