"""The controller around the new stages: the capacity query and Pending replicas gathered each sync, the
CapacityLimited Event and gauges, FailedGetCapacity, whenEmpty, scale to zero and the schedule gauges."""

from __future__ import annotations

from collections.abc import Callable

from autoscaler.controller.loop import Controller
from autoscaler.errors import KubeApiError
from plumbing.prometheus.runner import QueryResult
from tests.clock import T0, ManualClock
from tests.rules import ref, rule, ruleset
from tests.unit.autoscaler.controller.fakes import FakeBackend, FakeMetrics, sample

MakeController = Callable[..., Controller]
GUARDED = rule(max_replicas=20, extra="capacity: {query: 'free_gpus', gpusPerReplica: 2, "
                                      "pendingGraceSeconds: 120}")


def test_scale_up_limited_by_free_gpus_with_event_and_gauges(
    make_controller: MakeController, backend: FakeBackend, source: FakeMetrics
) -> None:
    backend.add(ref(), 4)
    source.values.update({"q_util": 160, "free_gpus": 5})  # the HPA wants 8; 5 free GPUs fit 2 more
    c = make_controller(ruleset(GUARDED))
    report = c.sync_once()
    assert backend.patches == [(ref(), 6)]
    assert report.outcomes[0].reason == "CapacityLimited"
    assert source.calls == [("free_gpus", "q_util")]  # the capacity query runs with the metrics
    warnings = [e for e in backend.events if e[2] == "CapacityLimited"]
    assert len(warnings) == 1 and warnings[0][1] == "Warning"
    assert "5 free GPU(s), 2 per replica: 2 more replica(s) fit: 4 -> 6 (not 8)" in warnings[0][3]
    assert sample(c, "gpu_autoscaler_capacity_limited", rule="svc") == 1
    assert sample(c, "gpu_autoscaler_capacity_withheld_replicas", rule="svc") == 2
    assert sample(c, "gpu_autoscaler_capacity_free_gpus", rule="svc") == 5
    assert sample(c, "gpu_autoscaler_unschedulable_replicas", rule="svc") == 0
    assert sample(c, "gpu_autoscaler_decision_reason", rule="svc", reason="CapacityLimited") == 1
    assert backend.pending_calls == [(ref(), "app=svc")]  # the scale's selector


def test_the_capacity_event_is_not_repeated_every_sync_while_the_cluster_stays_full(
    make_controller: MakeController, backend: FakeBackend, source: FakeMetrics, clock: ManualClock
) -> None:
    backend.add(ref(), 4)
    source.values.update({"q_util": 400, "free_gpus": 2})
    c = make_controller(ruleset(GUARDED))
    for free in (2, 2, 2, 0):  # each sync adds one replica, then none: different messages each time
        source.values["free_gpus"] = free
        c.sync_once()
        clock.advance(15)
    assert [e[2] for e in backend.events].count("CapacityLimited") == 1
    clock.advance(300)
    c.sync_once()
    assert [e[2] for e in backend.events].count("CapacityLimited") == 2


def test_replicas_stuck_pending_hold_the_scale_up(
    make_controller: MakeController, backend: FakeBackend, source: FakeMetrics
) -> None:
    backend.add(ref(), 4)
    backend.pending[ref()] = (T0 - 600, T0 - 30)  # one stuck beyond the 120 s grace, one just created
    source.values.update({"q_util": 160, "free_gpus": 100})
    c = make_controller(ruleset(GUARDED))
    report = c.sync_once()
    assert backend.patches == []
    assert report.outcomes[0].reason == "CapacityLimited"
    assert "1 replica(s) Pending as unschedulable for more than 120s" in report.outcomes[0].message
    assert sample(c, "gpu_autoscaler_unschedulable_replicas", rule="svc") == 2


def test_a_failed_capacity_query_is_reported_and_limits_nothing(
    make_controller: MakeController, backend: FakeBackend, source: FakeMetrics
) -> None:
    backend.add(ref(), 4)
    source.values.update({"q_util": 160, "free_gpus": QueryResult(None, "Timeout", "took too long")})
    c = make_controller(ruleset(GUARDED))
    report = c.sync_once()
    assert backend.patches == [(ref(), 8)]  # the HPA decision goes ahead
    assert report.outcomes[0].reason == "DesiredWithinRange"
    failed = [e for e in backend.events if e[2] == "FailedGetCapacity"]
    assert len(failed) == 1 and "capacity query failed: Timeout: took too long" in failed[0][3]
    errors = sample(c, "gpu_autoscaler_query_errors_total", rule="svc", metric="capacity", reason="Timeout")
    assert errors == 1
    assert sample(c, "gpu_autoscaler_capacity_free_gpus", rule="svc") is None
    assert sample(c, "gpu_autoscaler_capacity_limited", rule="svc") == 0


def test_pending_pods_that_cannot_be_listed_are_reported_and_limit_nothing(
    make_controller: MakeController, backend: FakeBackend, source: FakeMetrics
) -> None:
    backend.add(ref(), 4)
    backend.pending_errors[ref()] = KubeApiError("list pods: HTTP 403 Forbidden", status=403)
    source.values.update({"q_util": 160, "free_gpus": 100})
    c = make_controller(ruleset(GUARDED))
    c.sync_once()
    assert backend.patches == [(ref(), 8)]
    failed = [e for e in backend.events if e[2] == "FailedGetCapacity"]
    assert len(failed) == 1 and "cannot list the Pending pods of Deployment/ml/svc" in failed[0][3]
    assert "403 Forbidden" in failed[0][3]
    assert sample(c, "gpu_autoscaler_unschedulable_replicas", rule="svc") is None
    assert sample(c, "gpu_autoscaler_scale_errors_total", rule="svc", reason="ApiError") == 1


def test_rules_without_a_guard_never_list_pods_nor_show_capacity_gauges(
    make_controller: MakeController, backend: FakeBackend, source: FakeMetrics
) -> None:
    backend.add(ref(), 4)
    source.values["q_util"] = 160
    c = make_controller(ruleset(rule()))
    c.sync_once()
    assert backend.pending_calls == []
    assert sample(c, "gpu_autoscaler_capacity_limited", rule="svc") is None
    assert sample(c, "gpu_autoscaler_schedule_active", rule="svc") is None


def test_when_empty_zero_reads_no_series_as_zero_and_scales_to_zero(
    make_controller: MakeController, backend: FakeBackend, source: FakeMetrics, clock: ManualClock
) -> None:
    backend.add(ref(), 2)
    zero = rule(min_replicas=0, extra="cooldownSeconds: 60", metrics="""
    metrics:
      - {name: rps, query: 'q_rps', type: Total, target: 10, activationTarget: 0.5, whenEmpty: zero}""")
    c = make_controller(ruleset(zero))  # q_rps has no series: read as 0, so idle
    first = c.sync_once()
    assert first.outcomes[0].observations[0].value == 0.0
    assert sample(c, "gpu_autoscaler_metric_up", rule="svc", metric="rps") == 1
    assert sample(c, "gpu_autoscaler_query_errors_total", rule="svc", metric="rps", reason="NoSeries") is None
    clock.advance(60)
    report = c.sync_once()
    assert backend.patches[-1] == (ref(), 0) and report.outcomes[0].reason == "ScaledToZero"
    clock.advance(15)
    source.values["q_rps"] = 3
    report = c.sync_once()
    assert backend.patches[-1] == (ref(), 1) and report.outcomes[0].reason == "Activated"


def test_when_empty_fail_keeps_no_series_a_failed_metric(
    make_controller: MakeController, backend: FakeBackend, source: FakeMetrics
) -> None:
    backend.add(ref(), 2)
    c = make_controller(ruleset(rule()))
    report = c.sync_once()
    assert report.outcomes[0].reason == "MetricsFailed"
    assert sample(c, "gpu_autoscaler_query_errors_total", rule="svc", metric="util", reason="NoSeries") == 1


def test_schedule_gauges_show_the_window_and_the_bounds_in_effect(
    make_controller: MakeController, backend: FakeBackend, source: FakeMetrics, clock: ManualClock
) -> None:
    backend.add(ref(), 2)
    source.values["q_util"] = 80
    scheduled = rule(min_replicas=2, max_replicas=10, extra="""
    schedules:
      - {cron: '0 9 * * *', timezone: UTC, durationSeconds: 3600, minReplicas: 5, maxReplicas: 8}""")
    clock.t = 1_700_038_800.0 + 60  # 2023-11-15T09:01:00Z: the window is open
    c = make_controller(ruleset(scheduled))
    report = c.sync_once()
    assert backend.patches == [(ref(), 5)] and report.outcomes[0].reason == "BelowMinReplicas"
    assert sample(c, "gpu_autoscaler_schedule_active", rule="svc") == 1
    assert sample(c, "gpu_autoscaler_min_replicas", rule="svc") == 5
    assert sample(c, "gpu_autoscaler_max_replicas", rule="svc") == 8
    clock.t += 3600
    c.sync_once()
    assert sample(c, "gpu_autoscaler_schedule_active", rule="svc") == 0
    assert sample(c, "gpu_autoscaler_min_replicas", rule="svc") == 2
    assert sample(c, "gpu_autoscaler_max_replicas", rule="svc") == 10


PANICKY = rule(query="sum(rate(q[2m]))", target=10, max_replicas=40, extra="""
behavior:
  scaleUp: {stabilizationWindowSeconds: 60, policies: [{type: Percent, value: 900, periodSeconds: 15}]}
  panic: {windowSeconds: 30}""")


def test_panic_reads_the_short_window_with_the_metrics_and_scales_up_at_once(
    make_controller: MakeController, backend: FakeBackend, source: FakeMetrics, clock: ManualClock
) -> None:
    backend.add(ref(), 4)
    source.values.update({"sum(rate(q[2m]))": 10, "sum(rate(q[30s]))": 10})
    c = make_controller(ruleset(PANICKY))
    c.sync_once()  # steady: the scale-up window now holds 4
    clock.advance(15)
    source.values.update({"sum(rate(q[2m]))": 15, "sum(rate(q[30s]))": 45})
    report = c.sync_once()
    assert source.calls[-1] == ("sum(rate(q[2m]))", "sum(rate(q[30s]))")  # one batch
    assert backend.patches == [(ref(), 18)]  # ceil(4 x 45/10), not held by the 60 s window
    assert report.outcomes[0].reason == "PanicScaleUp"
    assert sample(c, "gpu_autoscaler_decision_reason", rule="svc", reason="PanicScaleUp") == 1
    clock.advance(15)
    source.values.update({"sum(rate(q[2m]))": 2, "sum(rate(q[30s]))": 2})
    assert c.sync_once().outcomes[0].reason == "PanicHold" and backend.patches == [(ref(), 18)]


def test_a_failed_panic_query_counts_an_error_and_panic_reads_the_metric(
    make_controller: MakeController, backend: FakeBackend, source: FakeMetrics
) -> None:
    backend.add(ref(), 4)
    source.values.update({"sum(rate(q[2m]))": 30})  # the short query has no series
    c = make_controller(ruleset(PANICKY))
    report = c.sync_once()
    assert report.outcomes[0].reason == "PanicScaleUp" and backend.patches == [(ref(), 12)]
    assert sample(c, "gpu_autoscaler_query_errors_total", rule="svc", metric="util:panic") == 1
    assert sample(c, "gpu_autoscaler_metric_up", rule="svc", metric="util") == 1


BUDGETED = rule(query="sum(rate(r[1m]))", target=10, max_replicas=40, metrics="""
    metrics:
      - {name: rate, query: 'sum(rate(r[1m]))', type: Total, target: 10}""",
                extra="overloadBudget: {percentOfMinutes: 5, startupSeconds: 60}")


def test_the_budget_sets_the_effective_target_gauge_and_tells_an_event_when_it_moves(
    make_controller: MakeController, backend: FakeBackend, source: FakeMetrics, clock: ManualClock
) -> None:
    backend.add(ref(), 4)
    c = make_controller(ruleset(BUDGETED))
    for minute in range(70):  # the load doubles one minute in four: headroom 2
        source.values["sum(rate(r[1m]))"] = 20.0 if minute % 4 == 0 else 10.0
        report = c.sync_once()
        if minute == 0:
            assert "under 60 min of history" in report.outcomes[0].message
        clock.advance(60)
    assert sample(c, "gpu_autoscaler_metric_effective_target", rule="svc", metric="rate") == 5.0
    assert sample(c, "gpu_autoscaler_metric_target", rule="svc", metric="rate") == 10.0
    told = [e for e in backend.events if e[2] == "EffectiveTargetChanged"]
    assert [e[1] for e in told] == ["Normal", "Normal"]  # the given target first, then the halved one
    assert "rate target 5 (given 10, headroom 2.00x)" in told[-1][3]
    c.sync_once()
    assert len([e for e in backend.events if e[2] == "EffectiveTargetChanged"]) == 2  # not repeated


def test_a_rule_without_budget_has_no_effective_target_series(
    make_controller: MakeController, backend: FakeBackend, source: FakeMetrics
) -> None:
    backend.add(ref(), 4)
    source.values["q_util"] = 80
    c = make_controller(ruleset(rule()))
    c.sync_once()
    assert sample(c, "gpu_autoscaler_metric_effective_target", rule="svc") is None


FORECAST = rule(max_replicas=40, metrics="""
    metrics:
      - {name: rate, query: 'sum(rate(r[1m]))', type: Total, target: 10}""",
                extra="forecast: {seasonSeconds: 3600, leadSeconds: 600, mode: MODE}")


def hourly_ramp(c: Controller, source: FakeMetrics, clock: ManualClock, minutes: range) -> None:
    for minute in minutes:  # a ramp from 10 to 69 every hour, one sync a minute
        source.values["sum(rate(r[1m]))"] = 10.0 + minute % 60
        c.sync_once()
        clock.advance(60)


def test_a_forecast_scales_for_the_load_a_lead_ahead_once_a_season_is_known(
    make_controller: MakeController, backend: FakeBackend, source: FakeMetrics, clock: ManualClock
) -> None:
    backend.add(ref(), 4)
    clock.now = (clock.now // 3_600) * 3_600  # on the hour
    c = make_controller(ruleset(FORECAST.replace("MODE", "scaleUp")))
    hourly_ramp(c, source, clock, range(30))
    assert sample(c, "gpu_autoscaler_forecast_replicas", rule="svc") is None  # no complete season yet
    hourly_ramp(c, source, clock, range(30, 90))
    # minute 29 of the second hour: 39 req/s now (4 replicas of 10 reactively); an hour ago the 5 minutes
    # to then averaged 37 and those around a lead later 49: 39 x 49/37 = 51.6, within the tolerance of the
    # 5 replicas the forecast already added
    replicas = backend.workloads[ref()].replicas
    assert replicas == sample(c, "gpu_autoscaler_forecast_replicas", rule="svc") == 5


def test_an_observing_forecast_publishes_and_changes_nothing(
    make_controller: MakeController, backend: FakeBackend, source: FakeMetrics, clock: ManualClock
) -> None:
    backend.add(ref(), 4)
    clock.now = (clock.now // 3_600) * 3_600
    c = make_controller(ruleset(FORECAST.replace("MODE", "observe")))
    hourly_ramp(c, source, clock, range(90))
    assert backend.workloads[ref()].replicas == 4  # 39 req/s: 4 replicas of 10
    assert sample(c, "gpu_autoscaler_forecast_replicas", rule="svc") == 6


def test_an_edited_budget_or_forecast_reads_the_past_again_and_other_edits_do_not(
    make_controller: MakeController, backend: FakeBackend, source: FakeMetrics
) -> None:
    backend.add(ref(), 4)
    source.values["sum(rate(r[1m]))"] = 10.0
    c = make_controller(ruleset(BUDGETED))
    c.sync_once()
    assert c.past("svc").done  # the fake source cannot read a past: nothing to wait for
    c.set_rules(ruleset(BUDGETED.replace("maxReplicas: 40", "maxReplicas: 30")))
    assert c.past("svc").done
    c.set_rules(ruleset(BUDGETED.replace("percentOfMinutes: 5", "percentOfMinutes: 10")))
    assert not c.past("svc").done and c.past("svc").tried is None
