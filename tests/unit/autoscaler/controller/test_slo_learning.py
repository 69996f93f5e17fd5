"""The controller's side of `slo`: the target learned from range queries at the first sync and used in scale
mode (only published in observe mode), refreshed at most hourly on the injected clock, a failed learning
query kept to its rule, the gauge and the Event when the target moves by more than 10 %."""

from __future__ import annotations

import logging
import math
from collections.abc import Callable
from dataclasses import dataclass, field

import pytest

from autoscaler.controller.loop import Controller
from autoscaler.controller.slo_learning import (
    MAX_POINTS,
    REFRESH_SECONDS,
    RETRY_SECONDS,
    learn,
    learning_step,
    read_samples,
)
from autoscaler.policy.slo import learn_target
from autoscaler.policy.spec import Slo
from plumbing.prometheus.range_query import RangeQueryError, RangeSeries
from tests.clock import ManualClock
from tests.rules import ref, rule, ruleset
from tests.unit.autoscaler.controller.fakes import FakeBackend, FakeMetrics, sample

MakeController = Callable[..., Controller]
RATE = "sum(rate(req[5m]))"
TTFT = "histogram_quantile(0.9, sum by (le) (rate(ttft_bucket[2m])))"
REPLICAS = 4


def per_replica(t: float) -> float:
    """A daily wave of requests per replica, 2 to 40."""
    return 21.0 - 19.0 * math.cos(2 * math.pi * t / 86_400)


def saturating(load: float, knee: float) -> float:
    """TTFT flat at 0.2 s up to the knee, then 0.05 s more per request/s: 0.5 s at knee + 6."""
    return 0.2 if load <= knee else 0.2 + 0.05 * (load - knee)


@dataclass
class HistoryMetrics(FakeMetrics):
    """FakeMetrics that also reads the past: the Total request rate, the recorded replicas, the TTFT of a
    server whose knee is `knee` requests/s per replica."""

    knee: float = 20.0
    fail: set[str] = field(default_factory=set)
    ranges: list[str] = field(default_factory=list)
    bursts: bool = False
    """Every 6 hours, a burst's aftermath: 16 replicas recorded for 20 minutes (the load per replica a quarter
    of what it was) while the burst's backlog keeps the TTFT at 30 s for the first 9 minutes."""

    def _burst_minute(self, t: float) -> float | None:
        into = t % 21_600
        return into / 60 if self.bursts and into < 1_200 else None

    def _replicas(self, t: float) -> float:
        return 16.0 if self._burst_minute(t) is not None else float(REPLICAS)

    def _ttft(self, t: float) -> float:
        minute = self._burst_minute(t)
        if minute is not None and minute < 9:
            return 30.0
        return saturating(per_replica(t) * REPLICAS / self._replicas(t), self.knee)

    def run_range(self, query: str, start: float, end: float, step: float) -> RangeSeries:
        self.ranges.append(query)
        if query in self.fail or "*" in self.fail:
            raise RangeQueryError(f"HTTP 503 from prometheus for {query!r}")
        points = [start + k * step for k in range(int((end - start) // step) + 1)]
        if query == RATE:
            return RangeSeries(query, {t: per_replica(t) * REPLICAS for t in points})
        if query == TTFT:
            return RangeSeries(query, {t: self._ttft(t) for t in points})
        if "gpu_autoscaler_current_replicas" in query:
            return RangeSeries(query, {t: self._replicas(t) for t in points})
        return RangeSeries(query, {})


@pytest.fixture
def source() -> HistoryMetrics:
    return HistoryMetrics()


def slo_rule(name: str = "svc", mode: str = "scale", lookback: str = "7d") -> str:
    return rule(name, max_replicas=40, metrics=f"""
    metrics:
      - {{name: rps, query: '{RATE}', type: Total, target: 10}}""",
                extra=f"slo: {{latency: '{TTFT}', objectiveSeconds: 0.5, learn: rps, lookback: {lookback}, "
                      f"bounds: {{min: 2, max: 40}}, mode: {mode}}}")


def test_the_first_sync_learns_the_knee_and_scales_on_it(
    make_controller: MakeController, backend: FakeBackend, source: HistoryMetrics
) -> None:
    backend.add(ref(), 6)
    source.values[RATE] = 200.0  # 9 replicas at the learned target; 20 at the given 10 (12 at most at once)
    c = make_controller(ruleset(slo_rule()))
    report = c.sync_once()
    learned = sample(c, "gpu_autoscaler_learned_target", rule="svc", metric="rps")
    assert learned is not None and 24 <= learned <= 28  # the objective is met up to 26/replica
    assert report.outcomes[0].desired == math.ceil(200.0 / learned) == 9
    assert "slo: rps target" in report.outcomes[0].message and "learned (used" in report.outcomes[0].message
    assert sample(c, "gpu_autoscaler_metric_target", rule="svc", metric="rps") == 10  # the given one
    [told] = [e for e in backend.events if e[2] == "LearnedTargetChanged"]
    assert told[1] == "Normal" and "rps target" in told[3]


def test_observe_mode_publishes_only(
    make_controller: MakeController, backend: FakeBackend, source: HistoryMetrics
) -> None:
    backend.add(ref(), 6)
    source.values[RATE] = 160.0
    c = make_controller(ruleset(slo_rule(mode="observe")))
    report = c.sync_once()
    assert sample(c, "gpu_autoscaler_learned_target", rule="svc", metric="rps") is not None
    assert report.outcomes[0].desired == 12  # 160 / 10, at most double at once
    assert "observed only" in report.outcomes[0].message


def test_learned_at_most_hourly_and_told_again_when_it_moves_by_more_than_ten_percent(
    make_controller: MakeController, backend: FakeBackend, source: HistoryMetrics, clock: ManualClock
) -> None:
    backend.add(ref(), 6)
    source.values[RATE] = 40.0
    c = make_controller(ruleset(slo_rule()))
    c.sync_once()
    first = len(source.ranges)
    assert first == 3  # latency, the metric, the recorded replicas
    source.knee = 10.0  # the server got slower
    for _ in range(int(REFRESH_SECONDS // 60) - 1):
        clock.advance(60)
        c.sync_once()
    assert len(source.ranges) == first  # within the hour: from memory
    before = sample(c, "gpu_autoscaler_learned_target", rule="svc", metric="rps")
    clock.advance(60)
    c.sync_once()
    assert len(source.ranges) == 2 * first
    after = sample(c, "gpu_autoscaler_learned_target", rule="svc", metric="rps")
    assert before is not None and after is not None and after < 0.9 * before
    assert len([e for e in backend.events if e[2] == "LearnedTargetChanged"]) == 2


def test_a_failed_learning_query_keeps_the_given_target_harms_no_other_rule_and_is_retried(
    make_controller: MakeController, backend: FakeBackend, source: HistoryMetrics, clock: ManualClock,
    caplog: pytest.LogCaptureFixture,
) -> None:
    backend.add(ref("a"), 6)
    backend.add(ref("b"), 4)
    source.values[RATE] = 160.0
    source.fail = {TTFT}
    c = make_controller(ruleset(slo_rule("a"), rule("b", query="q_b", max_replicas=40)))
    source.values["q_b"] = 160.0
    with caplog.at_level(logging.WARNING):
        report = c.sync_once()
    a, b = report.outcomes
    assert a.desired == 12 and "no learned target (history not read: HTTP 503" in a.message
    assert b.desired == 8 and b.ok
    assert sample(c, "gpu_autoscaler_learned_target", rule="a") is None
    assert any("cannot learn its slo target" in r.getMessage() for r in caplog.records)
    source.fail = set()
    clock.advance(RETRY_SECONDS - 1)
    c.sync_once()
    assert c.slo("a").target is None
    clock.advance(1)
    assert "learned (used" in c.sync_once().outcomes[0].message
    assert c.slo("a").target is not None


def test_a_source_that_cannot_read_the_past_keeps_the_given_target(backend: FakeBackend,
                                                                   clock: ManualClock) -> None:
    source = FakeMetrics({RATE: 160.0})  # a source that cannot read the past at all
    c = Controller(backend, source, ruleset(slo_rule()), clock)
    backend.add(ref(), 6)
    try:
        report = c.sync_once()
        assert report.outcomes[0].desired == 12
        assert "cannot answer range queries" in report.outcomes[0].message
    finally:
        c.close()


def test_an_empty_history_says_too_few_samples_once(
    make_controller: MakeController, backend: FakeBackend, source: HistoryMetrics, clock: ManualClock,
    caplog: pytest.LogCaptureFixture,
) -> None:
    backend.add(ref(), 6)
    source.values[RATE] = 160.0
    c = make_controller(ruleset(slo_rule()))
    source.run_range = lambda query, start, end, step: RangeSeries(query, {})  # type: ignore[method-assign]
    with caplog.at_level(logging.INFO):
        report = c.sync_once()
        clock.advance(REFRESH_SECONDS)
        c.sync_once()
    assert report.outcomes[0].desired == 12
    assert "no learned target (TooFewSamples" in report.outcomes[0].message
    said = [r for r in caplog.records if "no learned target" in r.getMessage()
            and r.name == "autoscaler.controller.slo_learning"]
    assert len(said) == 1


def test_an_edited_slo_learns_again_an_unchanged_one_keeps_it(
    make_controller: MakeController, backend: FakeBackend, source: HistoryMetrics
) -> None:
    backend.add(ref(), 6)
    source.values[RATE] = 160.0
    c = make_controller(ruleset(slo_rule()))
    c.sync_once()
    c.set_rules(ruleset(slo_rule()))
    assert c.slo("svc").target is not None
    c.set_rules(ruleset(slo_rule(lookback="3d")))
    assert c.slo("svc").target is None


def test_the_latency_while_replicas_change_is_not_learned_from() -> None:
    """A burst's aftermath (many replicas recorded, a low load per replica, the backlog's latency) would make
    the lowest load look overloaded; only the minutes after the replicas held for ten minutes count."""
    rule_ = ruleset(slo_rule()).rules[0]
    assert rule_.slo is not None
    now, step = 7 * 86_400.0, 60.0
    stormy = HistoryMetrics(bursts=True)
    kept = read_samples(rule_, rule_.slo, stormy, now)
    assert kept and all(latency < 30.0 for _, latency in kept)
    left_out = len(read_samples(rule_, rule_.slo, HistoryMetrics(), now)) - len(kept)
    assert 27 * 20 <= left_out <= 28 * 20  # per burst, 10 minutes after each change of the replicas
    for source in (stormy, HistoryMetrics()):
        learned = learn(rule_, rule_.slo, source, now).target
        assert learned is not None and 24 <= learned <= 28  # the objective is met up to 26/replica
    # Every sample, the aftermath's too: low loads miss the objective, the target falls far below the knee.
    end = now - 2 * step
    start = end - rule_.slo.lookback_seconds + step
    rates, latencies, replicas = (stormy.run_range(q, start, end, step).values
                                  for q in (RATE, TTFT, "gpu_autoscaler_current_replicas"))
    every = [(rate / (replicas[t] or 1), latencies[t] or 0.0)
             for t, rate in rates.items() if rate is not None]
    unsettled = learn_target(every, 0.5, 2, 40).target
    assert unsettled is not None and unsettled < 12


@pytest.mark.parametrize(("lookback", "step"), [(7 * 86_400, 60.0), (14 * 86_400, 120.0), (3600, 60.0)])
def test_the_step_keeps_the_points_bounded(lookback: int, step: float) -> None:
    slo = Slo("q", 0.5, "m", lookback, 1, 2)
    assert learning_step(slo) == step
    assert lookback / learning_step(slo) <= MAX_POINTS
