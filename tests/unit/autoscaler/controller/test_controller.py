"""The controller's gather/decide/act loop against in-memory fakes: patches, events, metrics, faults."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from autoscaler.controller.loop import Controller
from autoscaler.errors import KubeTimeoutError, NotFoundError
from autoscaler.policy import RuleHistory
from plumbing.prometheus.runner import QueryResult
from tests.clock import ManualClock
from tests.rules import ref, rule, ruleset
from tests.unit.autoscaler.controller.fakes import FakeBackend, FakeMetrics, api_error, sample

MakeController = Callable[..., Controller]


def test_scales_up_once_with_event_and_metrics(
    make_controller: MakeController, backend: FakeBackend, source: FakeMetrics
) -> None:
    backend.add(ref(), 2)
    source.values["q_util"] = 160
    c = make_controller(ruleset(rule()))
    report = c.sync_once()
    assert backend.patches == [(ref(), 4)]
    assert [(e[1], e[2]) for e in backend.events] == [("Normal", "ScaledUp")]
    assert "New size: 4 (2 -> 4)" in backend.events[0][3] and "util=160 (target 80)" in backend.events[0][3]
    assert report.outcomes[0].patched and report.ok
    assert sample(c, "gpu_autoscaler_scale_events_total", rule="svc", direction="up") == 1
    assert sample(c, "gpu_autoscaler_desired_replicas", rule="svc") == 4
    assert sample(c, "gpu_autoscaler_metric_value", rule="svc", metric="util") == 160
    # same instant: 4 replicas at 160/80 want 8, but the recorded scale event (2 -> 4) counts in the 15 s
    # period, so the policies allow max(2 + 4 Pods, 2 * 200%) = 6
    outcome = c.sync_once().outcomes[0]
    assert backend.patches[-1] == (ref(), 6) and outcome.reason == "ScaleUpLimit"


def test_within_tolerance_changes_nothing(
    make_controller: MakeController, backend: FakeBackend, source: FakeMetrics
) -> None:
    backend.add(ref(), 3)
    source.values["q_util"] = 84  # ratio 1.05, inside the 0.1 band
    c = make_controller(ruleset(rule()))
    outcome = c.sync_once().outcomes[0]
    assert backend.patches == [] and backend.events == []
    assert (outcome.current, outcome.desired, outcome.reason) == (3, 3, "WithinTolerance")
    assert sample(c, "gpu_autoscaler_decision_reason", rule="svc", reason="WithinTolerance") == 1
    assert sample(c, "gpu_autoscaler_decision_reason", rule="svc", reason="ScaleUpLimit") == 0


def test_dry_run_decides_but_never_patches(
    make_controller: MakeController, backend: FakeBackend, source: FakeMetrics
) -> None:
    backend.add(ref(), 2)
    source.values["q_util"] = 160
    c = make_controller(ruleset(rule()), dry_run=True)
    outcome = c.sync_once().outcomes[0]
    assert backend.patches == []
    assert (outcome.desired, outcome.patched) == (4, False)
    assert sample(c, "gpu_autoscaler_dry_run") == 1
    assert sample(c, "gpu_autoscaler_desired_replicas", rule="svc") == 4


def test_one_clock_read_per_sync(
    make_controller: MakeController, backend: FakeBackend, source: FakeMetrics, clock: ManualClock
) -> None:
    for name in ("a", "b", "c"):
        backend.add(ref(name), 2)
    source.values["q_util"] = 160
    c = make_controller(ruleset(rule("a"), rule("b"), rule("c")))
    before = clock.reads
    c.sync_once()
    assert clock.reads - before == 1


def test_identical_queries_are_sent_once_per_sync(
    make_controller: MakeController, backend: FakeBackend, source: FakeMetrics
) -> None:
    backend.add(ref("a"), 2)
    backend.add(ref("b"), 2)
    source.values.update({"shared": 80, "own": 10})
    metrics_b = """
    metrics:
      - {name: util, query: 'shared', type: Average, target: 80}
      - {name: queue, query: 'own', type: Total, target: 50}"""
    c = make_controller(ruleset(rule("a", query="shared"), rule("b", metrics=metrics_b)))
    c.sync_once()
    assert source.calls == [("own", "shared")]


def test_paused_annotation_freezes(
    make_controller: MakeController, backend: FakeBackend, source: FakeMetrics
) -> None:
    backend.add(ref(), 2, **{"gpu-autoscaler.io/paused": "true"})
    source.values["q_util"] = 400
    c = make_controller(ruleset(rule()))
    outcome = c.sync_once().outcomes[0]
    assert backend.patches == []
    assert (outcome.desired, outcome.reason) == (2, "Paused")


def test_paused_replicas_sets_and_holds(
    make_controller: MakeController, backend: FakeBackend, source: FakeMetrics
) -> None:
    backend.add(ref(), 2, **{"gpu-autoscaler.io/paused-replicas": "7"})
    source.values["q_util"] = 10
    c = make_controller(ruleset(rule()))
    c.sync_once()
    c.sync_once()
    assert backend.patches == [(ref(), 7)]
    assert c.sync_once().outcomes[0].reason == "PausedReplicas"


def test_bad_paused_replicas_is_reported_and_ignored(
    make_controller: MakeController, backend: FakeBackend, source: FakeMetrics
) -> None:
    backend.add(ref(), 2, **{"gpu-autoscaler.io/paused-replicas": "many"})
    source.values["q_util"] = 160
    make_controller(ruleset(rule())).sync_once()
    assert "InvalidAnnotation" in backend.reasons()
    assert backend.patches == [(ref(), 4)]


FALLBACK = "fallback: {failureThreshold: 2, replicas: 6}"


def test_fallback_goes_through_the_scale_down_window(
    make_controller: MakeController, backend: FakeBackend, source: FakeMetrics, clock: ManualClock
) -> None:
    backend.add(ref(), 10)
    source.values["q_util"] = QueryResult(None, "Unreachable", "connection refused")
    c = make_controller(ruleset(rule(extra="fallback: {failureThreshold: 1, replicas: 4}")))
    outcomes = []
    for _ in range(4):
        outcomes.append(c.sync_once().outcomes[0])
        clock.advance(15)
    assert [o.reason for o in outcomes] == ["MetricsFailed", "Fallback", "Fallback", "Fallback"]
    # first sight recorded 10: the default 300 s scale-down window holds the fallback's 4 at 10
    assert backend.patches == [] and all(o.desired == 10 for o in outcomes)
    assert "fallback to 4 replicas" in outcomes[1].message and "300s" in outcomes[1].message
    clock.advance(300 - 4 * 15)  # the first-sight recommendation leaves the window
    outcome = c.sync_once().outcomes[0]
    assert (outcome.reason, outcome.desired, backend.patches) == ("Fallback", 4, [(ref(), 4)])


def test_fallback_after_more_than_threshold_all_failed_syncs(
    make_controller: MakeController, backend: FakeBackend, source: FakeMetrics
) -> None:
    backend.add(ref(), 2)
    source.values["q_util"] = QueryResult(None, "Unreachable", "connection refused")
    c = make_controller(ruleset(rule(extra=FALLBACK)))
    reasons = [c.sync_once().outcomes[0].reason for _ in range(3)]
    assert reasons == ["MetricsFailed", "MetricsFailed", "Fallback"]
    assert backend.patches == [(ref(), 6)]
    # FailedGetMetrics posted once for the identical message, not on every sync
    assert backend.reasons().count("FailedGetMetrics") == 1
    assert (
        sample(c, "gpu_autoscaler_query_errors_total", rule="svc", metric="util", reason="Unreachable") == 3
    )
    assert sample(c, "gpu_autoscaler_metric_up", rule="svc", metric="util") == 0
    assert sample(c, "gpu_autoscaler_metric_value", rule="svc", metric="util") is None
    # metrics come back: the count resets and the engine decides again
    source.values["q_util"] = 80
    assert c.sync_once().outcomes[0].reason != "Fallback"


def test_without_fallback_the_count_is_held(
    make_controller: MakeController, backend: FakeBackend, source: FakeMetrics
) -> None:
    backend.add(ref(), 3)
    c = make_controller(ruleset(rule()))  # q_util unknown: NoSeries
    for _ in range(6):
        assert c.sync_once().outcomes[0].reason == "MetricsFailed"
    assert backend.patches == []


def test_conflict_rereads_and_redecides_with_the_new_count(
    make_controller: MakeController, backend: FakeBackend, source: FakeMetrics
) -> None:
    backend.add(ref(), 2)
    backend.concurrent_writer[ref()] = 3  # someone scales to 3 between our read and our patch
    source.values["q_util"] = 160
    c = make_controller(ruleset(rule()))
    outcome = c.sync_once().outcomes[0]
    assert backend.patches == [(ref(), 6)]  # decided again from 3: 3 * 160/80
    assert (outcome.current, outcome.desired, outcome.patched) == (3, 6, True)
    assert sample(c, "gpu_autoscaler_scale_errors_total", rule="svc", reason="Conflict") == 1


def test_endless_conflicts_give_failed_scale(
    make_controller: MakeController, backend: FakeBackend, source: FakeMetrics
) -> None:
    backend.add(ref(), 2)
    backend.conflicts[ref()] = 100
    source.values["q_util"] = 160
    c = make_controller(ruleset(rule()), conflict_retries=2)
    outcome = c.sync_once().outcomes[0]
    assert backend.patches == [] and not outcome.ok
    assert backend.reasons() == ["FailedScale"]
    assert sample(c, "gpu_autoscaler_scale_errors_total", rule="svc", reason="Conflict") == 3


def test_api_error_is_reported_and_retried_next_sync(
    make_controller: MakeController, backend: FakeBackend, source: FakeMetrics, clock: ManualClock
) -> None:
    backend.add(ref(), 2)
    backend.patch_errors[ref()] = api_error(500)
    source.values["q_util"] = 160
    c = make_controller(ruleset(rule()))
    assert not c.sync_once().outcomes[0].ok
    assert backend.reasons() == ["FailedScale"]
    assert sample(c, "gpu_autoscaler_scale_errors_total", rule="svc", reason="ApiError") == 1
    del backend.patch_errors[ref()]
    clock.advance(15)
    assert c.sync_once().outcomes[0].patched
    assert backend.patches == [(ref(), 4)]


@pytest.mark.parametrize(
    ("error", "label"),
    [
        (NotFoundError("gone", 404), "NotFound"),
        (KubeTimeoutError("slow"), "Timeout"),
        (api_error(503), "ApiError"),
    ],
    ids=["404", "timeout", "503"],
)
def test_failed_read_of_one_target_never_stops_the_others(
    make_controller: MakeController, backend: FakeBackend, source: FakeMetrics, error: Exception, label: str
) -> None:
    backend.add(ref("good"), 2)
    backend.add(ref("bad"), 2)
    backend.read_errors[ref("bad")] = error
    source.values["q_util"] = 160
    c = make_controller(ruleset(rule("bad"), rule("good")))
    outcomes = {o.rule.name: o for o in c.sync_once().outcomes}
    assert backend.patches == [(ref("good"), 4)]
    assert outcomes["bad"].reason == "FailedGetScale" and not outcomes["bad"].ok
    assert sample(c, "gpu_autoscaler_scale_errors_total", rule="bad", reason=label) == 1
    assert ("Warning", "FailedGetScale") in [(e[1], e[2]) for e in backend.events]


def test_an_unexpected_exception_in_one_rule_is_contained(
    make_controller: MakeController, backend: FakeBackend, source: FakeMetrics
) -> None:
    backend.add(ref("good"), 2)
    backend.add(ref("buggy"), 2)
    backend.read_errors[ref("buggy")] = RuntimeError("bug in a backend")
    source.values["q_util"] = 160
    report = make_controller(ruleset(rule("buggy"), rule("good"))).sync_once()
    assert backend.patches == [(ref("good"), 4)]
    assert report.ok


def test_bad_query_among_good_ones(
    make_controller: MakeController, backend: FakeBackend, source: FakeMetrics
) -> None:
    backend.add(ref("a"), 2)
    backend.add(ref("b"), 2)
    source.values.update({"good": 160, "bad(": QueryResult(None, "BadQuery", "HTTP 400: parse error")})
    c = make_controller(ruleset(rule("a", query="bad("), rule("b", query="good")))
    c.sync_once()
    assert backend.patches == [(ref("b"), 4)]
    assert sample(c, "gpu_autoscaler_query_errors_total", rule="a", metric="util", reason="BadQuery") == 1
    failed = [e for e in backend.events if e[2] == "FailedGetMetrics"]
    assert failed and failed[0][0] == ref("a") and "BadQuery" in failed[0][3]


def test_not_leader_does_nothing(
    make_controller: MakeController, backend: FakeBackend, source: FakeMetrics
) -> None:
    backend.add(ref(), 2)
    source.values["q_util"] = 160
    c = make_controller(ruleset(rule()), is_leader=lambda: False)
    report = c.sync_once()
    assert not report.acted and backend.reads == 0 and backend.patches == [] and source.calls == []
    assert sample(c, "gpu_autoscaler_leader") == 0


def test_leadership_lost_before_the_patch_abandons_it(
    make_controller: MakeController, backend: FakeBackend, source: FakeMetrics
) -> None:
    backend.add(ref(), 2)
    source.values["q_util"] = 160
    answers = iter([True])  # leader at the start of the sync, not any more when about to patch
    c = make_controller(ruleset(rule()), is_leader=lambda: next(answers, False))
    c.sync_once()
    assert backend.patches == []


def test_set_rules_keeps_history_while_the_target_is_unchanged(
    make_controller: MakeController, backend: FakeBackend, source: FakeMetrics
) -> None:
    for name in ("a", "b", "d"):
        backend.add(ref(name), 2)
    source.values["q_util"] = 160
    c = make_controller(ruleset(rule("a"), rule("b"), rule("d")))
    c.sync_once()
    history_a, history_b = c.history("a"), c.history("b")
    assert history_a.scale_up_events and history_b.scale_up_events
    # 'a' only moves in the file; 'b' gets a new metric target and bounds (same workload: as the HPA, the
    # recommendations and scale events survive a spec edit); 'd' now points at a StatefulSet: a new target
    c.set_rules(
        ruleset(rule("b", target=70, max_replicas=12), rule("c"), rule("a"), rule("d", kind="StatefulSet"))
    )
    assert c.history("a") == history_a
    assert c.history("b") == history_b
    assert c.history("d") == RuleHistory()
    assert c.history("c") == RuleHistory()
    assert sample(c, "gpu_autoscaler_rules_loaded") == 4


def test_edited_rule_keeps_its_scale_events_for_the_rate_policies(
    make_controller: MakeController, backend: FakeBackend, source: FakeMetrics
) -> None:
    backend.add(ref(), 2)
    source.values["q_util"] = 160
    c = make_controller(ruleset(rule()))
    c.sync_once()  # 2 -> 4, a scale-up event of 2 pods in the 15 s period
    c.set_rules(ruleset(rule(target=40)))  # an edit: 4 replicas at 160/40 want 16
    outcome = c.sync_once().outcomes[0]
    # without the kept event the policies would allow max(4 + 4, 4 * 2) = 8; with it, from the period's
    # start (2): max(2 + 4, 2 * 2) = 6
    assert (outcome.desired, outcome.reason) == (6, "ScaleUpLimit")


def test_prometheus_down_is_a_successful_sync_reported_by_metrics(
    make_controller: MakeController, backend: FakeBackend, source: FakeMetrics, clock: ManualClock
) -> None:
    backend.add(ref(), 3)
    source.values["q_util"] = QueryResult(None, "Unreachable", "connection refused")
    c = make_controller(ruleset(rule()))
    report = c.sync_once()
    outcome = report.outcomes[0]
    # the Kubernetes side answered: liveness holds (a restart would not bring Prometheus back)
    assert report.ok and outcome.ok and outcome.reason == "MetricsFailed"
    assert not outcome.metrics_ok and not outcome.complete  # `run --once` and `status` still exit 1
    assert c.last_success_monotonic is not None
    assert sample(c, "gpu_autoscaler_last_successful_sync_timestamp_seconds") == clock.t
    assert sample(c, "gpu_autoscaler_rule_last_successful_sync_timestamp_seconds", rule="svc") == clock.t
    assert sample(c, "gpu_autoscaler_metric_up", rule="svc", metric="util") == 0
    assert "FailedGetMetrics" in backend.reasons()
