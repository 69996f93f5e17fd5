"""simulate's replay loop in-process: each change (corrections included) is applied and recorded at once."""

from __future__ import annotations

from autoscaler.cli.simulate import replay, replay_trace
from autoscaler.config.rules import parse_rules
from autoscaler.planning.trace_csv import TraceRow, parse_trace
from autoscaler.planning.trace_replay import covers
from autoscaler.policy import MetricObservation, Reason

RULE = parse_rules(
    """\
rules:
  - name: r
    target: {kind: Deployment, namespace: ml, name: r}
    minReplicas: 1
    maxReplicas: 10
    metrics: [{name: load, query: q, type: Total, target: 1}]
    behavior:
      scaleDown: {stabilizationWindowSeconds: 0, policies: [{type: Pods, value: 1, periodSeconds: 60}]}
""",
    "r.yaml",
).rules[0]


def rows(*points: tuple[float, float | None]) -> list[TraceRow]:
    return [TraceRow(f"{t:g}", t, (MetricObservation("load", v),)) for t, v in points]


def test_min_max_correction_is_recorded_as_a_scale_event() -> None:
    results = list(replay(RULE, rows((0, 5), (15, 5), (59, 5), (60, 5), (75, 5)), replicas=14))
    assert [(d.replicas, d.reason) for _, d in results] == [
        (10, Reason.AboveMaxReplicas),  # 14 -> 10 is a scale-down event of 4 pods at t=0
        (10, Reason.ScaleDownLimit),  # period start 10 + 4 = 14, 1 pod per 60 s allows 13: no room
        (10, Reason.ScaleDownLimit),
        (9, Reason.ScaleDownLimit),  # the correction left the 60 s period (age 60 is not < 60)
        (9, Reason.ScaleDownLimit),  # 9 -> 8 at t=75 would be the second pod within 60 s
    ]


def test_each_result_is_the_next_current() -> None:
    results = list(replay(RULE, rows((0, 3), (15, 7), (30, None)), replicas=1))
    assert [d.current for _, d in results] == [1, 3, 7]
    assert results[-1][1].reason is Reason.MetricsFailed


def test_parse_trace_maps_columns_by_name_and_empty_cells_to_failures() -> None:
    parsed = parse_trace("t,load\n0,\n1.5,2e3\n", "t.csv", RULE)
    assert (parsed.t_text, parsed.times, parsed.values) == (["0", "1.5"], [0.0, 1.5], ([None, 2000.0],))
    rows = parsed.rows(RULE)
    assert rows[0].observations[0].value is None
    assert rows[0].observations[0].error
    assert rows[1].observations[0].value == 2000.0


def test_fallback_replays_as_the_controller_applies_it() -> None:
    rule = parse_rules(
        """\
rules:
  - name: r
    target: {kind: Deployment, namespace: ml, name: r}
    maxReplicas: 10
    metrics: [{name: load, query: q, type: Total, target: 1}]
    fallback: {failureThreshold: 1, replicas: 4}
""",
        "r.yaml",
    ).rules[0]
    results = list(replay(rule, rows((0, None), (15, None), (300, None)), replicas=10))
    # more than 1 all-failed sync: fallback 4, held by the default 300 s window (first sight recorded 10)
    assert [(p.replicas, p.reason, p.desired_raw) for _, p in results] == [
        (10, Reason.MetricsFailed, None),
        (10, Reason.Fallback, 4),
        (4, Reason.Fallback, 4),
    ]


def test_a_panic_rule_replays_row_by_row_with_its_reasons() -> None:
    """panic is out of the columnar replay's reach: `replay_trace` takes the engine's path for it."""
    panicky = parse_rules(
        """\
rules:
  - name: r
    target: {kind: Deployment, namespace: ml, name: r}
    maxReplicas: 40
    metrics: [{name: load, query: q, type: Total, target: 1}]
    behavior:
      scaleUp: {stabilizationWindowSeconds: 60, policies: [{type: Percent, value: 900, periodSeconds: 15}]}
      panic: {}
""",
        "r.yaml",
    ).rules[0]
    assert not covers(panicky)
    trace = parse_trace("t,load\n0,4\n15,4\n30,12\n45,3\n60,3\n", "t.csv", panicky)
    replayed = replay_trace(panicky, trace, replicas=4)
    assert list(zip(replayed.replicas, replayed.reasons, strict=True)) == [
        (4, Reason.WithinTolerance), (4, Reason.WithinTolerance),
        (12, Reason.PanicScaleUp),  # 12 / (1 x 4) = 300% of the target: no 60 s wait
        (12, Reason.PanicHold), (12, Reason.PanicHold),
    ]
