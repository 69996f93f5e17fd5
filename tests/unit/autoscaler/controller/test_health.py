"""/healthz and /readyz as the controller answers them: liveness is "the loop is alive", not "a rule synced".

A fake monotonic clock drives LoopProgress; the backend and metrics are the in-memory fakes.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from autoscaler.config.rules import RuleSet
from autoscaler.controller.loop import Controller, ControllerSettings
from autoscaler.kube.scale import ScaleState
from autoscaler.policy import TargetRef
from tests.clock import ManualClock
from tests.rules import ref, rule, ruleset
from tests.unit.autoscaler.controller.fakes import FakeBackend, FakeMetrics

INTERVAL = 10.0


class Monotonic:
    def __init__(self, t: float = 100.0) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t


MakeController = Callable[..., Controller]


@pytest.fixture
def mono() -> Monotonic:
    return Monotonic()


@pytest.fixture
def make(
    backend: FakeBackend, source: FakeMetrics, clock: ManualClock, mono: Monotonic
) -> Iterator[MakeController]:
    made: list[Controller] = []

    def build(rules: RuleSet, is_leader: Callable[[], bool] = lambda: True, workers: int = 16) -> Controller:
        c = Controller(
            backend,
            source,
            rules,
            clock,
            settings=ControllerSettings(workers=workers),
            is_leader=is_leader,
            monotonic=mono,
        )
        made.append(c)
        return c

    yield build
    for c in made:
        c.close()


def test_a_missing_target_for_many_intervals_keeps_liveness(make: MakeController, mono: Monotonic) -> None:
    """The audit's restart loop: the example rule's Deployment does not exist, every sync 404s."""
    c = make(ruleset(rule()))
    for _ in range(10):  # 100 s of failing syncs, 10 intervals
        assert not c.sync_once().ok
        mono.t += INTERVAL
        health = c.health(INTERVAL)
        assert health.alive and health.ready, health.message
    assert "no rule synced successfully for 100s" in health.message


def test_a_wedged_loop_fails_liveness_and_readiness(
    make: MakeController, backend: FakeBackend, mono: Monotonic
) -> None:
    backend.add(ref(), 2)
    c = make(ruleset(rule()))
    c.sync_once()
    mono.t += 3 * INTERVAL
    assert c.health(INTERVAL).alive  # exactly 3 intervals: still within the limit
    mono.t += 1
    health = c.health(INTERVAL)
    assert not health.alive and not health.ready
    assert health.message == "sync loop stuck: no progress for 31s (3 intervals = 30s)"
    c.sync_once()  # the loop comes back
    assert c.health(INTERVAL).alive


def test_ready_only_once_a_first_sync_completed(make: MakeController, mono: Monotonic) -> None:
    c = make(ruleset(rule()))
    health = c.health(INTERVAL)
    assert health.alive and not health.ready and "no sync completed yet" in health.message
    c.sync_once()  # the target is missing: the sync completes all the same
    assert c.health(INTERVAL).ready


class SlowBackend(FakeBackend):
    """Each scale read takes 2 intervals of the fake clock and looks at liveness before it returns."""

    def __init__(self, mono: Monotonic) -> None:
        super().__init__()
        self.mono = mono
        self.controller: Controller | None = None
        self.seen: list[bool] = []

    def read_scale(self, ref: TargetRef) -> ScaleState:
        assert self.controller is not None
        self.seen.append(self.controller.health(INTERVAL).alive)
        self.mono.t += 2 * INTERVAL
        return super().read_scale(ref)


def test_a_long_sync_that_makes_progress_is_alive(source: FakeMetrics, clock: ManualClock,
                                                   mono: Monotonic) -> None:
    backend = SlowBackend(mono)
    names = [f"r{i}" for i in range(5)]
    for name in names:
        backend.add(ref(name), 2)
    c = Controller(
        backend, source, ruleset(*(rule(n) for n in names)), clock,
        settings=ControllerSettings(workers=1), monotonic=mono,
    )
    backend.controller = c
    try:
        c.sync_once()  # 5 reads x 2 intervals: a sync of 10 intervals
    finally:
        c.close()
    assert backend.seen == [True] * 5
    assert c.health(INTERVAL).alive


def test_a_standby_is_alive_and_ready_while_its_loop_runs(make: MakeController, mono: Monotonic) -> None:
    c = make(ruleset(rule()), is_leader=lambda: False)
    for _ in range(5):
        c.sync_once()
        mono.t += INTERVAL
    health = c.health(INTERVAL)
    assert (health.alive, health.ready, health.message) == (True, True, "ok: standby (not the leader)")
    assert c.progress.seconds_without_success() is None
    mono.t += 3 * INTERVAL + 1  # ... but a standby whose loop is stuck is not alive
    assert not c.health(INTERVAL).alive


def test_the_success_clock_restarts_when_leadership_is_acquired(
    make: MakeController, backend: FakeBackend, mono: Monotonic
) -> None:
    leading = [True]
    backend.add(ref(), 2)
    c = make(ruleset(rule()), is_leader=lambda: leading[0])
    assert c.sync_once().ok  # a successful sync at t=100 in a first stint as leader
    leading[0] = False
    for _ in range(90):  # standby for 900 s
        mono.t += INTERVAL
        c.sync_once()
    leading[0] = True
    del backend.workloads[ref()]  # the new stint's syncs fail: no success since it began leading
    mono.t += INTERVAL
    c.sync_once()
    assert c.progress.seconds_without_success() == 0
    mono.t += 1
    assert c.health(INTERVAL).message == "ok"  # not "no successful sync for 911s"
    for _ in range(4):
        mono.t += INTERVAL
        c.sync_once()
    assert c.progress.seconds_without_success() == 41
    assert "no rule synced successfully for 41s as the leader" in c.health(INTERVAL).message
    backend.add(ref(), 2)
    c.sync_once()
    assert c.progress.seconds_without_success() == 0 and c.health(INTERVAL).message == "ok"


def test_a_first_time_leader_is_measured_from_its_first_sync_as_leader(
    make: MakeController, mono: Monotonic
) -> None:
    leading = [False]
    c = make(ruleset(rule()), is_leader=lambda: leading[0])
    for _ in range(50):  # 500 s as standby since the process started
        c.sync_once()
        mono.t += INTERVAL
    leading[0] = True
    c.sync_once()  # the target is missing
    mono.t += 2
    assert c.progress.seconds_without_success() == 2
    assert c.health(INTERVAL).message == "ok"
