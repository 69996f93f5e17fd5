"""Leader election on a Lease through the official client: one leader, no overlap, step-down before expiry."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pytest

from autoscaler.kube.leader import LeaderElector, LeaseSettings
from tests.fake_kube.apiserver import FakeApiServer
from tests.support import wait_for

pytestmark = pytest.mark.integration

LEASE_DURATION = 2
RENEW_DEADLINE = 1.0


def lease(identity: str) -> LeaseSettings:
    return LeaseSettings(
        namespace="gpu-autoscaler",
        name="gpu-autoscaler",
        identity=identity,
        lease_duration=LEASE_DURATION,
        renew_deadline=RENEW_DEADLINE,
        retry_period=0.15,
        request_timeout=0.5,
    )


class Candidate:
    def __init__(self, api: FakeApiServer, identity: str) -> None:
        self.identity = identity
        self.elector = LeaderElector(api.api_client(token=identity), lease(identity))
        self.stop = threading.Event()
        self.thread = self.elector.start(self.stop)

    def close(self) -> None:
        self.stop.set()
        self.thread.join(timeout=5)


@pytest.fixture
def pair(apiserver: FakeApiServer) -> Iterator[tuple[Candidate, Candidate]]:
    a, b = Candidate(apiserver, "a"), Candidate(apiserver, "b")
    yield a, b
    a.close()
    b.close()


class OverlapWatch:
    """Samples both candidates every few ms and records any moment both believed they lead."""

    def __init__(self, a: Candidate, b: Candidate) -> None:
        self.overlaps = 0
        self.samples = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(a, b), daemon=True)
        self._thread.start()

    def _run(self, a: Candidate, b: Candidate) -> None:
        while not self._stop.is_set():
            self.samples += 1
            if a.elector.is_leader() and b.elector.is_leader():
                self.overlaps += 1
            self._stop.wait(0.005)

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=2)


def leader_of(a: Candidate, b: Candidate) -> Candidate | None:
    leaders = [c for c in (a, b) if c.elector.is_leader()]
    return leaders[0] if len(leaders) == 1 else None


def test_exactly_one_leader_and_it_holds_the_lease(
    pair: tuple[Candidate, Candidate], apiserver: FakeApiServer
) -> None:
    a, b = pair
    watch = OverlapWatch(a, b)
    leader = wait_for(lambda: leader_of(a, b), 5, "a leader")
    assert isinstance(leader, Candidate)
    assert apiserver.lease_holder() == leader.identity
    deadline = time.monotonic() + 1.0  # several renewals: leadership stays put
    while time.monotonic() < deadline:
        assert leader_of(a, b) is leader
        time.sleep(0.05)
    watch.close()
    assert watch.overlaps == 0 and watch.samples > 50


def test_partitioned_leader_stops_acting_before_the_lease_expires(
    pair: tuple[Candidate, Candidate], apiserver: FakeApiServer
) -> None:
    a, b = pair
    leader = wait_for(lambda: leader_of(a, b), 5, "a leader")
    assert isinstance(leader, Candidate)
    other = b if leader is a else a
    watch = OverlapWatch(a, b)
    cut = time.monotonic()
    apiserver.fail("*", "/leases", 503, times=None, token=leader.identity)  # the leader can't reach the API
    wait_for(lambda: not leader.elector.is_leader(), 3, "the partitioned leader to step down")
    stepped_down = time.monotonic() - cut
    wait_for(other.elector.is_leader, 6, "the other replica to take over")
    took_over = time.monotonic() - cut
    watch.close()
    assert stepped_down < LEASE_DURATION  # the 1 s renew deadline ends it; the rest is for a loaded machine
    assert stepped_down < took_over  # the old leader stopped before the new one started
    assert watch.overlaps == 0
    assert apiserver.lease_holder() == other.identity


def test_stopping_releases_the_lease_for_a_fast_handover(
    pair: tuple[Candidate, Candidate], apiserver: FakeApiServer
) -> None:
    a, b = pair
    leader = wait_for(lambda: leader_of(a, b), 5, "a leader")
    assert isinstance(leader, Candidate)
    other = b if leader is a else a
    released = time.monotonic()
    leader.close()
    assert not leader.elector.is_leader()
    wait_for(other.elector.is_leader, 3, "the other replica to take over")
    # a released lease is taken without waiting for the 2 s lease duration to run out
    assert time.monotonic() - released < LEASE_DURATION


def test_settings_are_validated() -> None:
    with pytest.raises(ValueError, match="renew_deadline < lease_duration"):
        LeaseSettings(lease_duration=2, renew_deadline=3, retry_period=1)
