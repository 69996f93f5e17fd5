"""The replay in simulated time: what the metrics return, the sync cadence, the figures."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence

import pytest

from autoscaler.policy import Decision, MetricObservation, Reason, Rule, RuleHistory
from autoscaler.policy.capacity import CapacityObservation
from demo.cluster import ClusterSettings, SimulatedDeployment
from demo.replay import (
    ReplaySettings,
    Sample,
    SyncRecord,
    capacity_seen,
    observations,
    query_range_seconds,
    replay,
    score,
)
from demo.traces import Trace, sudden_burst
from tests.rules import parsed_rule

SVC = "{kind: Deployment, namespace: ns, name: svc}"


def scaled_on(metrics: str, min_replicas: int = 1, extra: str = "") -> Rule:
    """A rule of Deployment ns/svc (the simulated deployment) on `metrics`, a YAML flow list."""
    return parsed_rule("r", workload=SVC, metrics=f"metrics: {metrics}", min_replicas=min_replicas,
                       extra=extra)


UTIL = "[{name: gpu_utilization, query: q, type: Average, target: 50}]"
REQUESTS = "[{name: requests_per_second, query: q, type: Total, target: 5}]"


def constant(load: float, duration: float = 3_600.0) -> Trace:
    return Trace("constant", f"{load}", duration, lambda t: load)


def test_gpu_utilization_counts_loading_replicas_at_their_idle_utilization() -> None:
    clock = lambda: 0.0  # noqa: E731
    deployment = SimulatedDeployment("ns", "svc", 2, clock, ClusterSettings(startup_delay_seconds=60))
    deployment.scale_to(4)
    [obs] = observations(scaled_on(UTIL), deployment.snapshot(1.0), ReplaySettings())
    assert obs == MetricObservation("gpu_utilization", 25.0)  # (50 + 50 + 0 + 0) / 4


def test_requests_per_second_is_demand_and_does_not_saturate() -> None:
    deployment = SimulatedDeployment("ns", "svc", 2, lambda: 0.0)
    settings = ReplaySettings(requests_per_gpu_second=10.0)
    [obs] = observations(scaled_on(REQUESTS), deployment.snapshot(7.0), settings)
    assert obs == MetricObservation("requests_per_second", 70.0)


@pytest.mark.parametrize(("query", "seconds"), [
    ("sum(rate(service_requests_total{service=\"svc\"}[1m]))", 60.0),
    ("100 * avg(gpu_utilization_ratio)", 0.0),
    ("rate(a[1h30m]) + rate(b[5s])", 5_400.0),
    ("max_over_time(rate(a[1m])[30m:1m])", 1_800.0),
    ("rate(a[500ms])", 0.5),
])
def test_the_range_window_of_a_query_is_its_largest_range_selector(query: str, seconds: float) -> None:
    assert query_range_seconds(query) == seconds


def test_a_rate_over_a_window_reads_the_mean_demand_of_that_window_not_the_instant() -> None:
    deployment = SimulatedDeployment("ns", "svc", 2, lambda: 0.0)
    windowed = scaled_on("[{name: requests_per_second, query: 'sum(rate(r[2m]))', type: Total, target: 5}]")
    asked: list[float] = []

    def mean_load(window: float) -> float:
        asked.append(window)
        return 3.0

    [obs] = observations(windowed, deployment.snapshot(7.0), ReplaySettings(), mean_load)
    assert (obs.value, asked) == (30.0, [120.0])
    [instant] = observations(scaled_on(REQUESTS), deployment.snapshot(7.0), ReplaySettings(), mean_load)
    assert instant.value == 70.0 and asked == [120.0]  # no range: the rate of the instant


def test_after_a_step_in_demand_a_one_minute_rate_catches_up_over_one_minute() -> None:
    step_up = Trace("step", "2 -> 6 at t=600", 1_200.0, lambda t: 6.0 if t >= 600.0 else 2.0)
    rule = scaled_on("[{name: requests_per_second, query: 'sum(rate(r[1m]))', type: Total, target: 1000}]")
    seen: dict[float, float] = {}

    def spy(rule: Rule, current: int, obs: Sequence[MetricObservation], history: RuleHistory,
            now: float) -> Decision:
        seen[now] = obs[0].value or 0.0
        return Decision(
            current=current,
            desired_raw=current,
            replicas=current,
            reason=Reason.WithinTolerance,
            message="hold",
            proposals=(),
            history=history,
        )

    replay(rule, step_up, ReplaySettings(warmup_seconds=0.0, requests_per_gpu_second=10.0), decide_fn=spy)
    assert seen[585.0] == pytest.approx(20.0)
    assert 20.0 < seen[615.0] < seen[630.0] < seen[645.0] < 60.0
    assert seen[660.0] == pytest.approx(60.0)


def test_an_unknown_metric_name_is_refused_naming_the_known_ones() -> None:
    deployment = SimulatedDeployment("ns", "svc", 2, lambda: 0.0)
    rule = scaled_on("[{name: queue_depth, query: q, type: Total, target: 5}]")
    with pytest.raises(ValueError, match=r"queue_depth.*gpu_utilization, requests_per_second"):
        observations(rule, deployment.snapshot(1.0), ReplaySettings())


def test_with_no_replica_the_utilization_metric_fails() -> None:
    deployment = SimulatedDeployment("ns", "svc", 0, lambda: 0.0)
    [obs] = observations(scaled_on(UTIL, min_replicas=0), deployment.snapshot(1.0), ReplaySettings())
    assert obs.value is None and obs.error


def test_the_engine_is_asked_every_sync_period_with_the_virtual_time() -> None:
    calls: list[tuple[int, float]] = []

    def fake_decide(rule: Rule, current: int, obs: Sequence[MetricObservation], history: RuleHistory,
                    now: float) -> Decision:
        calls.append((current, now))
        return Decision(
            current=current,
            desired_raw=current,
            replicas=current,
            reason=Reason.WithinTolerance,
            message="hold",
            proposals=(),
            history=history,
        )

    settings = ReplaySettings(warmup_seconds=60.0)
    result = replay(scaled_on(UTIL), constant(1.0, 300.0), settings, decide_fn=fake_decide)
    assert [now for _, now in calls] == [float(t) for t in range(-60, 301, 15)]
    assert len(result.syncs) == 21  # scored syncs: t = 0 .. 300
    assert result.samples[0].t == 0.0 and result.samples[-1].t == 300.0


def test_a_constant_load_settles_where_the_engine_puts_it() -> None:
    result = replay(scaled_on(UTIL), constant(3.0))  # 3 GPUs of work at a 50 % target: 6 replicas
    assert {s.replicas for s in result.samples} == {6}
    assert result.figures.gpu_hours == pytest.approx(6.0, rel=0.01)
    assert result.figures.overloaded_minutes == 0.0
    assert result.figures.scale_changes == 0


def test_a_burst_is_overloaded_until_the_new_replicas_have_loaded() -> None:
    trace = sudden_burst(base=1.0, peak=4.0, start_seconds=600.0, length_seconds=1_200.0,
                         duration_seconds=3_600.0)
    fast = replay(scaled_on(REQUESTS), trace,
                  ReplaySettings(cluster=ClusterSettings(startup_delay_seconds=0)))
    slow = replay(scaled_on(REQUESTS), trace,
                  ReplaySettings(cluster=ClusterSettings(startup_delay_seconds=300)))
    assert max(s.replicas for s in slow.samples) == 8  # 40 req/s at 5 per replica
    assert slow.figures.overloaded_minutes >= 5.0  # at least the start-up delay
    assert fast.figures.overloaded_minutes < slow.figures.overloaded_minutes
    assert slow.figures.not_ready_minutes >= 5.0
    changes = [(s.current, s.replicas) for s in slow.syncs if s.replicas != s.current]
    assert changes == [(2, 6), (6, 8), (8, 2)]  # HPA default rate: +4 pods or +100 % per 15 s
    assert slow.figures.scale_changes == 3 and slow.figures.reversals == 1


def test_score_counts_gpu_hours_overload_not_ready_changes_and_reversals() -> None:
    samples = [Sample(t * 60.0, 1.0, replicas, held, ready, None, demand)
               for t, (replicas, held, ready, demand) in enumerate(
                   [(2, 2, 2, 0.5), (4, 4, 2, 1.0), (4, 4, 4, 0.5), (3, 3, 3, math.inf)])]
    syncs = [SyncRecord(0, 2, 4, "x", ""), SyncRecord(60, 4, 4, "x", ""), SyncRecord(120, 4, 3, "x", ""),
             SyncRecord(180, 3, 2, "x", ""), SyncRecord(240, 2, 5, "x", "")]
    figures = score(samples, syncs, 60.0, 0.95)
    assert figures.gpu_hours == pytest.approx(13 / 60)
    assert figures.overloaded_minutes == 2.0
    assert figures.not_ready_minutes == 1.0
    assert (figures.scale_changes, figures.reversals) == (4, 2)


@pytest.mark.parametrize("changes", [{"step_seconds": 4.0}, {"step_seconds": 0.0}, {"overload_line": 0.0},
                                     {"warmup_seconds": -1.0}], ids=lambda c: next(iter(c)))
def test_bad_settings_are_refused(changes: dict[str, float]) -> None:
    with pytest.raises(ValueError):
        dataclasses.replace(ReplaySettings(), **changes)


def guarded_rule(grace: int = 300, min_replicas: int = 1) -> Rule:
    return scaled_on(REQUESTS, min_replicas, extra=f"""\
capacity: {{query: 'cluster:gpus_unallocated:sum', gpusPerReplica: 1,
            pendingGraceSeconds: {grace}}}""")


def shared_pool(load: float, others: int, duration: float = 3_600.0) -> Trace:
    """A constant load on a pool another tenant holds `others` GPUs of."""
    return Trace("shared", f"{load}", duration, lambda t: load, lambda t: others)


def pool_of(gpus: int, delay: float = 0.0) -> ReplaySettings:
    return ReplaySettings(warmup_seconds=0.0,
                          cluster=ClusterSettings(nodes=1, gpus_per_node=gpus, startup_delay_seconds=delay))


def test_capacity_seen_is_the_free_gpus_and_the_pending_replicas_since_times() -> None:
    clock = lambda: 50.0  # noqa: E731
    deployment = SimulatedDeployment("ns", "svc", 2, clock, ClusterSettings(nodes=1, gpus_per_node=4))
    deployment.set_others(1)
    assert capacity_seen(deployment, deployment.snapshot(1.0)) == CapacityObservation(1.0, ())
    deployment.scale_to(5)
    assert capacity_seen(deployment, deployment.snapshot(1.0)) == CapacityObservation(0.0, (50.0, 50.0))


def test_without_the_guard_the_replicas_the_pool_cannot_hold_sit_pending() -> None:
    """40 req/s at 5 per replica asks for 8 replicas; the tenant leaves 6 of 8 GPUs: 2 sit Pending for the
    whole hour, holding nothing."""
    result = replay(scaled_on(REQUESTS), shared_pool(4.0, others=2), pool_of(8))
    assert max(s.replicas for s in result.samples) == 8
    assert result.figures.peak_pending == 2
    assert result.figures.pending_replica_minutes == pytest.approx(2 * 60.0, abs=1.0)
    assert max(s.gpus_held for s in result.samples) == 6
    assert result.figures.capacity_limited_syncs == 0


def test_with_the_guard_a_scale_up_stops_at_what_fits() -> None:
    result = replay(guarded_rule(), shared_pool(4.0, others=2), pool_of(8))
    assert max(s.replicas for s in result.samples) == 6
    assert result.figures.peak_pending == 0 and result.figures.pending_replica_minutes == 0.0
    limited = [s for s in result.syncs if s.reason == "CapacityLimited"]
    assert result.figures.capacity_limited_syncs == len(limited) > 100  # every sync while it wants 8
    assert limited[0].message.endswith("1 free GPU(s), 1 per replica: 1 more replica(s) fit: 5 -> 6 (not 8)")
    assert all("0 free GPU(s)" in s.message and s.replicas == s.current == 6 for s in limited[1:])


def test_the_guard_reads_the_pending_replicas_since_times_from_the_pool() -> None:
    """minReplicas 3 on a pool of 2 GPUs: one replica is Pending from the start. Past the grace period the
    guard holds every scale-up because of it, not merely because no GPU is free."""
    result = replay(guarded_rule(grace=60, min_replicas=3), constant(4.0), pool_of(2))
    early = [s for s in result.syncs if s.t <= 60]
    late = [s for s in result.syncs if s.t > 75]
    assert {s.replicas for s in result.syncs} == {3}
    assert all("0 free GPU(s)" in s.message for s in early), early[0]
    assert all("1 replica(s) Pending as unschedulable for more than 60s" in s.message for s in late), late[0]
    assert result.figures.peak_pending == 1


def test_the_other_tenant_waits_when_the_pool_is_full() -> None:
    trace = Trace("late tenant", "", 600.0, lambda t: 2.0, lambda t: 3 if t >= 300 else 0)
    result = replay(scaled_on(REQUESTS, min_replicas=4), trace, pool_of(6))
    assert result.figures.others_waiting_gpu_minutes == pytest.approx(1 * 5.0, abs=0.1)  # 1 of 3, 5 min


def test_score_counts_pending_replica_minutes_and_their_peak() -> None:
    samples = [Sample(t * 60.0, 1.0, 4, 2, 2, None, 0.5, pending)
               for t, pending in enumerate([2, 2, 0, 1])]
    figures = score(samples, [], 60.0, 0.95)
    assert (figures.pending_replica_minutes, figures.peak_pending) == (5.0, 2)
