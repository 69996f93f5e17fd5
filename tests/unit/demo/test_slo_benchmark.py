"""The SLO benchmark on tiny traces: its table has a row per configuration and trace, attainment is a share,
nobody spends fewer GPU-hours than the clairvoyant bound at its own overload; the emulated history answers the
controller's learning exactly the queries it asks and refuses others; a scale-down with deletion costs
removes the idlest replica, and a drain cuts nothing that finishes within its grace period (the full
benchmark is run by hand: docs/benchmarks.md)."""

from __future__ import annotations

import dataclasses

import pytest

from autoscaler.config.rules import load_rules
from autoscaler.controller.past import recorded_query
from autoscaler.controller.slo_learning import learn
from autoscaler.policy.slo import LearnReason
from benchmarks.slo_quality import (
    BUCKETS,
    SLO_RULES,
    TTFT,
    ServiceHistory,
    UnaskedQuery,
    capacity_at_objective,
    configurations,
    dominates,
    histogram_quantile,
    markdown_table,
    rule_scaler,
    run,
    verdict,
)
from demo.batching import BatchingReplica, Request
from demo.cluster import ClusterSettings, SimulatedDeployment
from demo.serving_profile import load_profile
from demo.slo_replay import FleetView, ScaleDown, SloFigures, SloSettings, serve, set_costs_before_scale_down
from demo.traces import Trace
from plumbing.prometheus.range_query import RangeSeries

TINY = Trace("tiny", "2 -> 5 over 15 min", 900.0, lambda t: 2.0 + 3.0 * t / 900.0)
FLAT = Trace("flat", "1.5 for 10 min", 600.0, lambda t: 1.5)
BUSY = Trace("busy", "2.5 for 10 min: some 50 requests in flight per replica of three", 600.0, lambda t: 2.5)
SHORT = SloSettings(warmup_seconds=0.0, drain_seconds=120.0,
                    cluster=ClusterSettings(startup_delay_seconds=30.0))


def test_the_benchmark_on_a_tiny_trace_keeps_its_invariants() -> None:
    profile = load_profile()
    settings = SloSettings(warmup_seconds=60.0, drain_seconds=120.0,
                           cluster=ClusterSettings(startup_delay_seconds=30.0))
    capacity = capacity_at_objective(profile, settings, seconds=240.0)
    assert 0.0 < capacity < settings.requests_per_load * 2
    configs = configurations(settings, capacity, load_rules(SLO_RULES).rules[0])
    outcomes = run([TINY], profile, settings, configs, capacity)
    assert [o.key for o in outcomes] == [*(c.key for c in configs), "clairvoyant"]
    for outcome in outcomes:
        figures = outcome.figures
        assert 0.0 <= figures.attainment <= 1.0 and figures.requests > 0
        assert 0 <= figures.cut <= figures.requests - figures.met
        assert figures.gpu_hours >= outcome.bound_gpu_hours - 1e-9
    table = markdown_table(outcomes, {c.key: c.label for c in configs}).splitlines()
    assert len(table) == 2 + len(outcomes) and all(line.count("|") == 9 for line in table)
    assert [line.split(":")[0] for line in verdict(outcomes).splitlines()] == ["- tiny"] * 3


def test_the_history_answers_the_learnings_three_queries_and_refuses_any_other() -> None:
    rule = load_rules(SLO_RULES).rules[0]
    assert rule.slo is not None
    history = ServiceHistory(rule)
    serve(FLAT, history.record(rule_scaler(rule)), 2, load_profile(), SHORT, observe=history.observe)
    asked: list[str] = []

    class Asking:
        def run_range(self, query: str, start: float, end: float, step: float) -> RangeSeries:
            asked.append(query)
            return history.run_range(query, start, end, step)

    learned = learn(rule, rule.slo, Asking(), now=(history.last_minute + 2) * 60.0)
    metric = rule.metrics[0]
    assert sorted(asked) == sorted([rule.slo.latency, metric.query, recorded_query(rule)])
    # ten minutes, fewer still once the replicas have held ten minutes: too few
    assert learned.reason == LearnReason.TooFewSamples and 0 < learned.samples < 120
    rates = history.run_range(metric.query, 0.0, 600.0, 60.0).values
    assert rates[600.0] == pytest.approx(1.5 * SHORT.requests_per_load, rel=0.15)  # the arrivals' 5m rate
    replicas = history.run_range(recorded_query(rule), 0.0, 600.0, 60.0).values
    assert set(replicas.values()) <= {2.0, 3.0, 4.0}
    with pytest.raises(UnaskedQuery):
        history.run_range("sum(vllm:num_requests_running)", 0.0, 600.0, 60.0)
    with pytest.raises(UnaskedQuery):
        history.run_range(metric.query, 0.0, 600.0, 15.0)  # not a minute apart


def test_histogram_quantile_interpolates_within_the_bucket_as_prometheus_does() -> None:
    bounds = BUCKETS[TTFT]
    counts = [0] * (len(bounds) + 1)
    counts[bounds.index(0.25)] = 50  # (0.1, 0.25]
    counts[bounds.index(0.5)] = 50  # (0.25, 0.5]
    assert histogram_quantile(0.5, bounds, counts) == pytest.approx(0.25)
    assert histogram_quantile(0.9, bounds, counts) == pytest.approx(0.25 + 0.25 * 40 / 50)
    counts[-1] = 100  # +Inf
    assert histogram_quantile(0.99, bounds, counts) == bounds[-1]
    assert histogram_quantile(0.9, bounds, [0] * len(counts)) is None


def _fleet(in_flight: tuple[int, ...]) -> tuple[SimulatedDeployment, dict[str, BatchingReplica]]:
    """Ready replicas (oldest first) each serving `in_flight[i]` requests."""
    deployment = SimulatedDeployment("ml", "llm", len(in_flight), lambda: 0.0)
    profile = load_profile()
    servers = {}
    for replica, count in zip(deployment.replicas(), in_flight, strict=True):
        server = BatchingReplica(profile, 0.0)
        for _ in range(count):
            server.submit(Request(0.0, 128, 512))
        server.advance(0.5)  # admitted: running
        servers[replica.name] = server
    return deployment, servers


@pytest.mark.parametrize(("in_flight", "removed"), [
    pytest.param((9, 0, 5), "llm-0002", id="the-idle-middle-one"),
    pytest.param((0, 7, 5), "llm-0001", id="the-idle-oldest-one"),
    pytest.param((4, 7, 5), "llm-0001", id="the-least-busy"),
])
def test_deletion_costs_make_the_idlest_replica_go(in_flight: tuple[int, ...], removed: str) -> None:
    deployment, servers = _fleet(in_flight)
    annotations: dict[str, dict[str, str]] = {}
    set_costs_before_scale_down(deployment, servers, annotations,
                                "sum by (pod) (vllm:num_requests_running)", now=0.0)
    deployment.scale_to(2)
    assert {r.name for r in deployment.replicas()} == set(servers) - {removed}


def test_without_deletion_costs_the_newest_replica_goes() -> None:
    deployment, _ = _fleet((9, 0, 5))
    deployment.scale_to(2)
    assert {r.name for r in deployment.replicas()} == {"llm-0001", "llm-0002"}


def _three_then_two(view: FleetView) -> int:
    return 3 if view.t < 300.0 else 2


@pytest.mark.parametrize(("grace", "cuts"), [
    pytest.param(None, True, id="aborted-at-once"),
    pytest.param(1.0, True, id="grace-shorter-than-the-generations"),
    pytest.param(60.0, False, id="grace-longer-than-every-generation"),
])
def test_a_drain_cuts_nothing_that_finishes_within_its_grace_period(grace: float | None, cuts: bool) -> None:
    scale_down = ScaleDown(grace_seconds=grace)  # the newest goes, with its share of the requests
    figures = serve(BUSY, _three_then_two, 3, load_profile(), SHORT, scale_down=scale_down)
    assert (figures.cut > 0) is cuts
    assert figures.requests > 0


def test_a_draining_replica_keeps_its_gpu() -> None:
    profile = load_profile()
    at_once = serve(BUSY, _three_then_two, 3, profile, SHORT)
    drained = serve(BUSY, _three_then_two, 3, profile, SHORT, scale_down=ScaleDown(grace_seconds=60.0))
    assert drained.gpu_hours > at_once.gpu_hours
    assert drained.met > at_once.met


def test_a_scale_down_refuses_what_the_emulated_server_cannot_answer() -> None:
    with pytest.raises(ValueError, match="podDeletionCost"):
        ScaleDown("sum by (pod) (vllm:kv_cache_usage_perc)")
    with pytest.raises(ValueError, match="grace_seconds"):
        ScaleDown(grace_seconds=-1.0)
    rule = load_rules(SLO_RULES).rules[0]
    assert rule.slo is not None
    with pytest.raises(ValueError, match="latency query"):
        ServiceHistory(dataclasses.replace(rule, slo=dataclasses.replace(rule.slo, latency="vllm:x")))


def test_a_better_point_has_no_lower_attainment_and_no_more_gpu_hours() -> None:
    def point(met: int, gpu_hours: float) -> SloFigures:
        return SloFigures(requests=100, met=met, cut=0, gpu_hours=gpu_hours, preemptions=0,
                          overloaded_minutes=0)

    assert dominates(point(99, 5.0), point(98, 5.0)) and dominates(point(99, 4.0), point(99, 5.0))
    assert not dominates(point(99, 5.0), point(99, 5.0)) and not dominates(point(100, 6.0), point(99, 5.0))
