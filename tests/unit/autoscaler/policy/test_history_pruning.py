"""The recommendations kept between syncs (`history.deciding`): stabilization over them gives, at every later
sync, what it gives over every recommendation ever recorded (the straightforward reference below), and a
trace of syncs far denser than the windows keeps a few entries, not the whole window."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from autoscaler.policy import Recommendation
from autoscaler.policy.decision import Stage
from autoscaler.policy.history import deciding
from autoscaler.policy.stabilization import stabilize

from .support import T0


def reference(current: int, desired: int, every: list[Recommendation], up: float, down: float,
              now: float) -> Stage:
    """The HPA's stabilization over every recommendation ever recorded, none dropped."""
    return stabilize(current, desired, every, up, down, now)


sync_st = st.tuples(
    st.sampled_from([0.0, 0.0, 0.001, 0.01, 0.5, 1.0, 15.0, 61.0]),  # time since the last sync
    st.integers(0, 12),  # the desired count recorded
    st.integers(0, 12),  # the current count
)


@settings(max_examples=300, deadline=None)
@given(syncs=st.lists(sync_st, min_size=1, max_size=60), up=st.sampled_from([0, 1, 15, 60, 300]),
       down=st.sampled_from([0, 1, 15, 60, 300]))
def test_stabilization_over_the_kept_entries_is_that_over_every_entry(
        syncs: list[tuple[float, int, int]], up: int, down: int) -> None:
    """Sync by sync, as the engine does: stabilize over what was kept, record the desired count, prune."""
    kept: tuple[Recommendation, ...] = ()
    every: list[Recommendation] = []
    now = T0
    latest = T0
    for step, desired, current in syncs:
        now += step
        now = max(now, latest)  # pruning by age assumes time goes on (the test below: any order)
        latest = now
        assert stabilize(current, desired, kept, up, down, now) == reference(current, desired, every, up,
                                                                              down, now)
        every.append(Recommendation(now, desired))
        kept = deciding((*kept, Recommendation(now, desired)), now, up, down)
        assert kept[-1] == every[-1]  # the newest is always kept: the rule has been seen


@settings(max_examples=200, deadline=None)
@given(entries=st.lists(st.tuples(st.floats(-400, 0), st.integers(0, 12)), min_size=1, max_size=30),
       later=st.lists(st.floats(0, 400), min_size=1, max_size=5), up=st.sampled_from([0, 15, 60, 300]),
       down=st.sampled_from([0, 15, 60, 300]), desired=st.integers(0, 12), current=st.integers(0, 12))
def test_entries_out_of_time_order_are_kept_while_they_may_count(
        entries: list[tuple[float, int]], later: list[float], up: int, down: int, desired: int,
        current: int) -> None:
    """Recorded in any order (a clock that went back and forth): at any later `now`, the same result."""
    every = [Recommendation(T0 + offset, replicas) for offset, replicas in entries]
    kept = deciding(tuple(every), T0, up, down)
    for offset in sorted(later):
        now = T0 + offset
        assert stabilize(current, desired, kept, up, down, now) == reference(current, desired, every, up,
                                                                              down, now)


def test_a_dense_trace_keeps_the_monotonic_runs_not_the_window() -> None:
    """10,000 syncs 10 ms apart, inside one 300 s window, the counts going round 2..9: a handful kept."""
    kept: tuple[Recommendation, ...] = ()
    longest = 0
    for i in range(10_000):
        now = T0 + i / 100
        kept = deciding((*kept, Recommendation(now, 2 + (i * 7) % 8)), now, 60, 300)
        longest = max(longest, len(kept))
    assert longest <= 16
