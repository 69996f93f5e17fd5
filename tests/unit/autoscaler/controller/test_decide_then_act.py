"""Where a sync's work happens: rules are decided on the syncing thread, and the pool makes the Kubernetes
calls (scale reads and Pending pods before the decision, held Events and patches after it), so a slow or
failing call for one rule still never holds up or fails another, and nothing is written once stopping."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from typing import Literal

import pytest

from autoscaler.controller.loop import Controller, ControllerSettings
from autoscaler.controller.self_metrics import ControllerMetrics, Guards
from autoscaler.policy import Rule, TargetRef
from autoscaler.reasons import DECISION_REASONS
from tests.clock import ManualClock
from tests.rules import ref, rule, ruleset
from tests.unit.autoscaler.controller.fakes import FakeBackend, FakeMetrics, sample

TWO_METRICS = """
    metrics:
      - {name: util, query: 'q_util', type: Average, target: 80}
      - {name: queue, query: 'q_missing', type: Average, target: 10}"""
"""A second metric without series: a FailedGetMetrics Warning every sync; the first metric still decides."""


class ThreadsSeen(ControllerMetrics):
    """Records the thread of each decision's guard gauges (set while the rule is planned)."""

    def __init__(self) -> None:
        super().__init__(reasons=DECISION_REASONS)
        self.planned_on: set[str] = set()

    def record_guards(self, rule: Rule, guards: Guards) -> None:
        self.planned_on.add(threading.current_thread().name)
        super().record_guards(rule, guards)


class ThreadedBackend(FakeBackend):
    """Records the threads of the Kubernetes calls; `on_event` runs (outside the lock) before each Event."""

    def __init__(self) -> None:
        super().__init__()
        self.called_on: set[str] = set()
        self.on_event: Callable[[TargetRef], None] = lambda ref: None
        self.on_patch: Callable[[TargetRef], None] = lambda ref: None

    def read_scale(self, ref: TargetRef):  # type: ignore[no-untyped-def]
        self.called_on.add(threading.current_thread().name)
        return super().read_scale(ref)

    def patch_scale(self, ref: TargetRef, replicas: int) -> None:
        self.called_on.add(threading.current_thread().name)
        self.on_patch(ref)
        super().patch_scale(ref, replicas)

    def emit_event(self, ref: TargetRef, type_: Literal["Normal", "Warning"], reason: str, message: str,
                   ) -> None:
        self.called_on.add(threading.current_thread().name)
        self.on_event(ref)
        super().emit_event(ref, type_, reason, message)


@pytest.fixture
def threaded() -> ThreadedBackend:
    return ThreadedBackend()


@pytest.fixture
def build(
    threaded: ThreadedBackend, source: FakeMetrics, clock: ManualClock
) -> Iterator[Callable[..., Controller]]:
    made: list[Controller] = []

    def make(*rules: str, workers: int = 16, metrics: ControllerMetrics | None = None) -> Controller:
        c = Controller(threaded, source, ruleset(*rules), clock, settings=ControllerSettings(workers=workers),
                       metrics=metrics)
        made.append(c)
        return c

    yield make
    for c in made:
        c.close()


def test_rules_are_decided_on_the_syncing_thread_and_the_pool_calls_kubernetes(
    build: Callable[..., Controller], threaded: ThreadedBackend, source: FakeMetrics
) -> None:
    names = [f"r{i}" for i in range(40)]
    for name in names:
        threaded.add(ref(name), 2)
    source.values["q_util"] = 160
    seen = ThreadsSeen()
    c = build(*(rule(n, metrics=TWO_METRICS) for n in names), workers=4, metrics=seen)
    report = c.sync_once()
    assert seen.planned_on == {threading.current_thread().name}
    assert threaded.called_on and all(name.startswith("kube") for name in threaded.called_on)
    assert sorted(threaded.patches, key=str) == sorted(((ref(n), 4) for n in names), key=str)
    for name in names:  # each rule's Events in the order they were decided: the held Warning first
        assert [e[2] for e in threaded.events if e[0] == ref(name)] == ["FailedGetMetrics", "ScaledUp"]
    assert [o.rule.name for o in report.outcomes] == names and all(o.patched for o in report.outcomes)


def test_a_slow_patch_never_holds_up_another_rules_patch(
    build: Callable[..., Controller], threaded: ThreadedBackend, source: FakeMetrics
) -> None:
    threaded.add(ref("slow"), 2)
    threaded.add(ref("fast"), 2)
    source.values["q_util"] = 160
    fast_patched = threading.Event()
    waited: list[bool] = []

    def on_patch(target: TargetRef) -> None:
        if target == ref("slow"):  # an API server that answers this one only after the other's patch
            waited.append(fast_patched.wait(timeout=10))

    def on_event(target: TargetRef) -> None:
        if target == ref("fast"):
            fast_patched.set()

    threaded.on_patch, threaded.on_event = on_patch, on_event
    c = build(rule("slow"), rule("fast"), workers=2)
    report = c.sync_once()
    assert waited == [True]
    assert set(threaded.patches) == {(ref("fast"), 4), (ref("slow"), 4)} and report.ok


def test_once_stopping_no_held_event_is_posted_and_no_patch_starts(
    build: Callable[..., Controller], threaded: ThreadedBackend, source: FakeMetrics
) -> None:
    """Eight rules on one worker go in runs of two, decided before the pool posts anything: the first Event
    (the first rule's) stops the controller, so the second rule of the run must write nothing."""
    names = [f"r{i}" for i in range(8)]
    for name in names:
        threaded.add(ref(name), 2)
    source.values["q_util"] = 160
    c = build(*(rule(n, metrics=TWO_METRICS) for n in names), workers=1)

    def stop(target: TargetRef) -> None:
        c.stopping.set()

    threaded.on_event = stop
    report = c.sync_once()
    assert threaded.patches == []
    assert [(e[0], e[2]) for e in threaded.events] == [(ref("r0"), "FailedGetMetrics")]
    outcomes = {o.rule.name: o for o in report.outcomes}
    assert (outcomes["r0"].message, outcomes["r1"].message) == ("abandoned", "abandoned")
    assert sample(c, "gpu_autoscaler_desired_replicas", rule="r1") == 4  # decided, recorded, not applied


GUARDED = rule(max_replicas=20, extra="capacity: {query: 'free_gpus', gpusPerReplica: 2}")


def test_a_backend_bug_while_listing_pending_pods_is_a_failed_sync_of_that_rule_alone(
    build: Callable[..., Controller], threaded: ThreadedBackend, source: FakeMetrics
) -> None:
    threaded.add(ref(), 2)
    threaded.add(ref("other"), 2)
    threaded.pending_errors[ref()] = KeyError("status")  # not a KubeError: a bug, not an API answer
    source.values.update({"q_util": 160, "free_gpus": 100})
    c = build(GUARDED, rule("other"))
    outcomes = {o.rule.name: o for o in c.sync_once().outcomes}
    assert outcomes["svc"].reason == "Error" and "KeyError" in outcomes["svc"].message
    assert threaded.patches == [(ref("other"), 4)]
    assert [e[2] for e in threaded.events if e[0] == ref()] == ["FailedSync"]
    assert threaded.pending_calls == [(ref(), "app=svc")]
