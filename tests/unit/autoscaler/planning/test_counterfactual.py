"""tune's counterfactual replay (autoscaler.planning.counterfactual): ready replicas lag by the start-up time,
an Average metric follows the candidate's own replicas, and overload is counted on ready replicas."""

from __future__ import annotations

from autoscaler.config.rules import parse_rules
from autoscaler.planning.counterfactual import HistoryStep, ReplaySetup, ready_counts, replay, score
from autoscaler.policy import MetricObservation, Rule


def one_rule(metric: str) -> Rule:
    return parse_rules(f"""\
rules:
  - name: web
    target: {{kind: Deployment, namespace: ml, name: web}}
    maxReplicas: 10
    metrics: [{metric}]
    behavior:
      scaleUp: {{stabilizationWindowSeconds: 0, policies: [{{type: Pods, value: 10, periodSeconds: 15}}]}}
      scaleDown: {{stabilizationWindowSeconds: 0}}
""", "rules.yaml").rules[0]


def test_a_count_is_ready_once_it_held_for_a_whole_start_up() -> None:
    assert ready_counts([2, 4, 4, 4, 2, 5], start=2, startup_steps=2) == [2, 2, 2, 4, 2, 2]
    assert ready_counts([2, 4, 4], start=2, startup_steps=0) == [2, 4, 4]


def test_an_average_metric_follows_the_candidates_own_replicas() -> None:
    """Recorded: 50 % on 4 replicas. A candidate on 2 would see 100 % and scale to 4; replayed as recorded
    it would have seen 50 % and stayed on 2, as if the load had halved with the replicas."""
    rule = one_rule("{name: util, query: 'avg(u)', type: Average, target: 60}")
    history = [HistoryStep(60.0 * m, (MetricObservation("util", 50.0),), recorded_replicas=4)
               for m in range(5)]
    assert replay(rule, history, ReplaySetup(60.0, start_replicas=2)) == [4, 4, 4, 4, 4]
    as_recorded = [HistoryStep(s.t, s.observations) for s in history]  # no recorded count: fed unchanged
    assert replay(rule, as_recorded, ReplaySetup(60.0, start_replicas=2)) == [2, 2, 2, 2, 2]


def test_replicas_still_starting_leave_the_service_overloaded() -> None:
    rule = one_rule("{name: rps, query: 'sum(rate(r[1m]))', type: Total, target: 100}")
    history = [HistoryStep(60.0 * m, (MetricObservation("rps", 300.0),)) for m in range(10)]
    at_once = score(rule, rule, history, ReplaySetup(60.0, start_replicas=1))
    loading = score(rule, rule, history, ReplaySetup(60.0, start_replicas=1, startup_seconds=120))
    assert (at_once.overloaded_minutes, loading.overloaded_minutes) == (0.0, 2.0)
    assert at_once.gpu_hours == loading.gpu_hours  # loading replicas hold their GPU all the same


def test_a_score_over_some_steps_counts_only_those() -> None:
    rule = one_rule("{name: rps, query: 'sum(rate(r[1m]))', type: Total, target: 100}")
    history = [HistoryStep(60.0 * m, (MetricObservation("rps", 300.0),)) for m in range(10)]
    part = score(rule, rule, history, ReplaySetup(60.0, 1, 120), range(5, 10))
    assert (part.gpu_hours, part.overloaded_minutes, part.scale_changes) == (0.25, 0.0, 0)


def test_panic_reads_the_short_window_rescaled_like_the_value() -> None:
    """A panic rule whose minute value is calm but whose 30 s value is a burst panics at once; an Average
    metric's short value follows the candidate's replicas like its value (recorded on 4, replayed on 2)."""
    rule = parse_rules("""\
rules:
  - name: web
    target: {kind: Deployment, namespace: ml, name: web}
    minReplicas: 2
    maxReplicas: 10
    metrics: [{name: util, query: 'avg(rate(u[1m]))', type: Average, target: 60}]
    behavior:
      scaleUp: {stabilizationWindowSeconds: 300}
      panic: {windowSeconds: 30, thresholdPercent: 150}
""", "rules.yaml").rules[0]
    calm = HistoryStep(0.0, (MetricObservation("util", 30.0),), recorded_replicas=2)
    burst = HistoryStep(15.0, (MetricObservation("util", 30.0, panic_value=50.0),), recorded_replicas=4)
    # short value 50 % on 4 recorded replicas is 100 % on the candidate's 2: 167 % of the target, a panic
    assert replay(rule, [calm, burst], ReplaySetup(15.0, start_replicas=2)) == [2, 4]
    # without the short value the 30 % (60 % on 2) neither panics nor passes the 300 s window
    unseen = HistoryStep(15.0, (MetricObservation("util", 30.0),), recorded_replicas=4)
    assert replay(rule, [calm, unseen], ReplaySetup(15.0, start_replicas=2)) == [2, 2]
