"""The target learned from a latency objective: the knee of a saturating server, each guard by its reason,
the clamp to the bounds, and properties (a stricter objective never learns a higher target; the target stays
within the bounds; too little history learns nothing)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from autoscaler.policy.slo import (
    BINS,
    MIN_BIN_SAMPLES,
    MIN_SAMPLES,
    SETTLE_SECONDS,
    LearnReason,
    learn_target,
    settled_times,
    with_learned_target,
)
from autoscaler.policy.spec import Slo
from tests.rules import parsed_rule


def saturating(load: float, knee: float = 20.0) -> float:
    """TTFT of a server flat at 0.2 s until `knee` requests/s per replica, then rising steeply."""
    return 0.2 if load <= knee else 0.2 + 0.3 * (load - knee)


def sweep(top: float = 40.0, per_step: int = 1, steps: int = 400) -> list[tuple[float, float]]:
    loads = [top * i / (steps - 1) for i in range(steps) for _ in range(per_step)]
    return [(load, saturating(load)) for load in loads]


def test_learns_the_knee_of_a_saturating_server() -> None:
    learned = learn_target(sweep(), objective=0.5, bound_min=1, bound_max=100)
    assert learned.reason is LearnReason.Learned
    assert learned.target is not None
    assert 20 <= learned.target <= 22  # the knee (20) plus the rise to 0.5 s (1/s), to one bin's width (2)
    assert learned.samples == 400


@pytest.mark.parametrize(("bounds", "expected"), [
    ((1, 10), 10.0),   # clamped down to the upper bound
    ((30, 40), 30.0),  # clamped up to the lower bound
])
def test_clamped_to_the_bounds(bounds: tuple[float, float], expected: float) -> None:
    learned = learn_target(sweep(), 0.5, *bounds)
    assert (learned.target, learned.reason) == (expected, LearnReason.Learned)
    assert "clamped" in learned.message


def test_too_few_samples_learn_nothing() -> None:
    learned = learn_target(sweep(steps=MIN_SAMPLES - 1), 0.5, 1, 100)
    assert (learned.target, learned.reason) == (None, LearnReason.TooFewSamples)


def test_non_finite_and_negative_samples_are_left_out() -> None:
    bad = [(float("nan"), 0.1), (1.0, float("inf")), (-1.0, 0.1), (1.0, -0.5)] * 100
    learned = learn_target(bad + sweep(steps=MIN_SAMPLES - 1), 0.5, 1, 100)
    assert (learned.reason, learned.samples) == (LearnReason.TooFewSamples, MIN_SAMPLES - 1)


def test_a_service_that_never_got_close_keeps_its_target() -> None:
    calm = [(load, 0.1) for load, _ in sweep()]
    learned = learn_target(calm, 0.5, 1, 100)
    assert (learned.target, learned.reason) == (None, LearnReason.NeverNearObjective)


def test_missed_even_at_the_lowest_load_is_the_lower_bound() -> None:
    slow = [(load, 2.0) for load, _ in sweep()]
    learned = learn_target(slow, 0.5, 3, 100)
    assert (learned.target, learned.reason) == (3, LearnReason.MissedAtLowestLoad)


def test_a_sparse_bin_is_ignored() -> None:
    """A few outliers alone in a bin (a latency spike at a load seen twice) neither stop nor extend it."""
    samples = sweep(top=20.0, steps=MIN_SAMPLES * 2)  # all within: 0.2 s
    samples = [(load, 0.45) for load, _ in samples]  # near the objective, within it
    samples += [(40.0, 9.0)] * (MIN_BIN_SAMPLES - 1)  # the top bin, sparse, far beyond the objective
    learned = learn_target(samples, 0.5, 1, 100)
    assert learned.reason is LearnReason.Learned
    assert learned.target == pytest.approx(20.0, abs=40 / BINS)


def test_contiguous_from_the_bottom() -> None:
    """A bin within the objective above one that missed it does not count: the load between was not held."""
    samples = [(load, 0.9 if 10 <= load < 12 else 0.45) for load, _ in sweep()]
    learned = learn_target(samples, 0.5, 1, 100)
    assert learned.target is not None
    assert learned.target <= 10


def test_one_load_only() -> None:
    learned = learn_target([(5.0, 0.45)] * MIN_SAMPLES, 0.5, 1, 100)
    assert (learned.target, learned.reason) == (5.0, LearnReason.Learned)


def test_the_learned_target_replaces_its_metric_in_scale_mode_only() -> None:
    rule = parsed_rule()
    scale = Slo("q", 0.5, "util", 3600, 1, 100)
    assert with_learned_target(rule, scale, 33.0).metrics[0].target == 33.0
    assert with_learned_target(rule, scale, None) is rule
    observe = Slo("q", 0.5, "util", 3600, 1, 100, mode="observe")
    assert with_learned_target(rule, observe, 33.0) is rule


loads = st.floats(min_value=0, max_value=1000, allow_nan=False)
latencies = st.floats(min_value=0, max_value=10, allow_nan=False)
histories = st.lists(st.tuples(loads, latencies), min_size=0, max_size=600)
objectives = st.floats(min_value=0.01, max_value=5, allow_nan=False)


@given(histories, objectives, objectives)
def test_a_stricter_objective_never_learns_a_higher_target(samples: list[tuple[float, float]], a: float,
                                                          b: float) -> None:
    strict, loose = sorted((a, b))
    tight = learn_target(samples, strict, 1e-9, 1e9)
    wide = learn_target(samples, loose, 1e-9, 1e9)
    if tight.target is not None and wide.target is not None:
        assert tight.target <= wide.target


@given(histories, objectives, st.floats(min_value=0.1, max_value=50), st.floats(min_value=0, max_value=50))
def test_the_target_stays_within_the_bounds(samples: list[tuple[float, float]], objective: float, low: float,
                                            span: float) -> None:
    learned = learn_target(samples, objective, low, low + span)
    if learned.target is not None:
        assert low <= learned.target <= low + span


@given(st.lists(st.tuples(loads, latencies), max_size=MIN_SAMPLES - 1), objectives)
def test_too_little_history_learns_nothing(samples: list[tuple[float, float]], objective: float) -> None:
    learned = learn_target(samples, objective, 1, 100)
    assert (learned.target, learned.reason) == (None, LearnReason.TooFewSamples)


def minutes(*counts: float | None) -> dict[float, float | None]:
    return {60.0 * k: count for k, count in enumerate(counts)}


@pytest.mark.parametrize(("counts", "settled"), [
    ([4.0] * 12, {600.0, 660.0}),                         # held 10 minutes from the first point
    ([4.0] * 6 + [5.0] * 12, {960.0, 1020.0}),             # a change starts the ten minutes again
    ([4.0] * 5 + [None] + [4.0] * 11, {960.0}),            # so does a minute not recorded
    ([4.0] * 11 + [4.0000001], {600.0, 660.0}),            # counts are whole: 4.0000001 is 4
    ([4.0] * 9, set()),                                    # never held ten minutes
])
def test_settled_times_are_those_after_ten_minutes_of_one_count(counts: list[float | None],
                                                                settled: set[float]) -> None:
    assert settled_times(minutes(*counts), 60.0) == settled


def test_a_gap_in_the_recording_starts_the_ten_minutes_again() -> None:
    replicas = {60.0 * k: 4.0 for k in range(12) if k != 5}
    assert settled_times(replicas, 60.0) == frozenset()  # minutes 6..11 follow a missing minute 5


@given(st.lists(st.one_of(st.none(), st.integers(1, 3).map(float)), max_size=60))
def test_every_settled_time_follows_ten_minutes_of_one_known_count(counts: list[float | None]) -> None:
    replicas = minutes(*counts)
    for t in settled_times(replicas, 60.0):
        window = [replicas[u] for u in replicas if t - SETTLE_SECONDS <= u <= t]
        assert len(window) == SETTLE_SECONDS / 60 + 1 and None not in window and len(set(window)) == 1
