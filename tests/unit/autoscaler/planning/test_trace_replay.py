"""simulate's fast paths against its row-by-row paths: the incremental replay (`trace_replay`) gives every row
the count, desired count and reason the controller's own plan gives, and the columnar CSV reader accepts and
refuses exactly what the row-by-row reader does, with the same message."""

from __future__ import annotations

import random
from collections.abc import Sequence

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from autoscaler.cli.simulate import replay, replay_trace
from autoscaler.config.rules import parse_rules
from autoscaler.errors import TraceError
from autoscaler.planning.trace_csv import Trace, _data_columns, _parse_columns, _parse_rows, parse_trace
from autoscaler.planning.trace_replay import covers, replay_columns
from autoscaler.policy import MetricSpec, Reason, Rule
from autoscaler.policy.spec import Behavior, Fallback, ScalingPolicy, ScalingRules, Schedule
from tests.rules import RANDOM_TARGET, SHORT, rule_st

TARGET = RANDOM_TARGET

REPLAYED = SHORT._replace(
    policy_values=st.sampled_from([1, 2, 4, 10, 50, 100, 200]),
    windows=st.sampled_from([0, 0, 15, 30, 60, 300]),
    tolerances=st.sampled_from([0.0, 0.1, 0.25]),
    max_replicas=25,
    targets=st.sampled_from([0.5, 1.0, 3.0, 80.0]),
    when_empty=st.sampled_from(["fail", "zero"]),
    fallbacks=st.none() | st.builds(Fallback, st.integers(0, 3), st.integers(0, 30)),
)
"""Rules whose metrics may count an empty answer as 0, with or without a fallback."""


@st.composite
def columns_st(draw: st.DrawFn, rule: Rule) -> tuple[list[float], tuple[list[float | None], ...]]:
    """Times that never go backwards (equal times, decimals whose differences are inexact floats) and values
    around each target, exactly on the tolerance edges, huge or failed."""
    rows = draw(st.integers(1, 80))
    start = draw(st.sampled_from([0.0, 1.4, 1_700_000_000.0]))
    gaps = draw(st.lists(st.sampled_from([0.0, 0.1, 1.0, 14.9, 15.0, 15.0, 15.0, 16.4, 30.0, 60.0, 301.0]),
                         min_size=rows, max_size=rows))
    times, now = [], start
    for gap in gaps:
        now += gap
        times.append(round(now, 6))
    columns = []
    for metric in rule.metrics:
        edges = [metric.target * factor for factor in (0.75, 0.9, 1.0, 1.1, 1.25)]
        value_st = st.one_of(
            st.none(),
            st.sampled_from([0.0, *edges, 1e12, 1e308]),
            st.floats(0, metric.target * 40, allow_nan=False),
        )
        columns.append(draw(st.lists(value_st, min_size=rows, max_size=rows)))
    return times, tuple(columns)


def row_by_row(rule: Rule, times: list[float], values: Sequence[list[float | None]],
               replicas: int) -> list[tuple[int, int | None, Reason]]:
    trace = Trace([f"{t!r}" for t in times], times, tuple(values), None)
    return [(p.replicas, p.desired_raw, p.reason) for _, p in replay(rule, trace.rows(rule), replicas)]


@settings(max_examples=125, deadline=None)
@given(st.data())
def test_incremental_replay_equals_the_controllers_plan_row_by_row(data: st.DataObject) -> None:
    rule = data.draw(rule_st(REPLAYED))
    times, values = data.draw(columns_st(rule))
    replicas = data.draw(st.integers(0, 30))
    assert covers(rule)
    fast = replay_columns(rule, times, values, replicas)
    assert list(zip(fast.replicas, fast.desired, fast.reasons, strict=True)) == row_by_row(
        rule, times, values, replicas)


COVERED_REASONS = {
    Reason.AboveMaxReplicas, Reason.BelowMinReplicas, Reason.WithinTolerance, Reason.DesiredWithinRange,
    Reason.ScaleUpStabilized, Reason.ScaleDownStabilized, Reason.ScaleUpLimit, Reason.ScaleDownLimit,
    Reason.ScalingDisabled, Reason.TooManyReplicas, Reason.TooFewReplicas, Reason.MetricsFailed,
    Reason.MetricsPartiallyFailed, Reason.Fallback,
}


def random_case(rng: random.Random) -> tuple[Rule, list[float], tuple[list[float | None], ...], int]:
    def scaling() -> ScalingRules:
        policies = tuple(ScalingPolicy(rng.choice(["Pods", "Percent"]), rng.choice([1, 2, 4, 50, 100]),
                                       rng.choice([15, 30, 60])) for _ in range(rng.randint(1, 2)))
        return ScalingRules(rng.choice([0, 30, 60, 300]), rng.choice(["Max", "Max", "Min", "Disabled"]),
                            0.1, policies)

    low = rng.randint(1, 3)
    metrics = tuple(MetricSpec(f"m{i}", "q", rng.choice(["Average", "Total"]), rng.choice([1.0, 10.0]))
                    for i in range(rng.randint(1, 2)))
    fallback = rng.choice([None, Fallback(rng.randint(0, 2), rng.randint(0, 12))])
    rule = Rule("r", TARGET, low, rng.randint(low, 10), metrics, Behavior(scaling(), scaling()), fallback, 1)
    rows = rng.randint(5, 60)
    times = [15.0 * i for i in range(rows)]
    failing = rng.random() / 3
    values = tuple([None if rng.random() < failing else rng.uniform(0, m.target * 12) for _ in range(rows)]
                   for m in metrics)
    return rule, times, values, rng.randint(0, 14)


def test_every_reason_of_a_covered_rule_is_reached_and_agrees() -> None:
    """The property above is only as good as its traces: 400 seeded random cases reach every reason the
    incremental replay can give, so a path it never took could not pass by never being asked."""
    rng = random.Random(16)
    seen: set[Reason] = set()
    for _ in range(400):
        rule, times, values, replicas = random_case(rng)
        fast = replay_columns(rule, times, values, replicas)
        assert list(zip(fast.replicas, fast.desired, fast.reasons, strict=True)) == row_by_row(
            rule, times, values, replicas)
        seen |= set(fast.reasons)
    assert seen == COVERED_REASONS


def test_rules_beyond_the_incremental_replay_go_row_by_row() -> None:
    base = parse_rules(
        """\
rules:
  - name: r
    target: {kind: Deployment, namespace: ml, name: r}
    minReplicas: 0
    maxReplicas: 5
    metrics: [{name: load, query: q, type: Total, target: 1, activationTarget: 0.5}]
""",
        "r.yaml",
    ).rules[0]
    scheduled = Rule("s", TARGET, 1, 5, base.metrics, base.behavior, None, 1,
                     schedules=(Schedule("0 8 * * *", "UTC", 3600, 3, None),))
    assert not covers(base) and not covers(scheduled)
    with pytest.raises(ValueError, match="scale to zero"):
        replay_columns(base, [0.0], ([1.0],), 1)
    trace = parse_trace("t,load\n0,0\n15,2\n30,0\n", "t.csv", base)
    replayed = replay_trace(base, trace, 0)
    assert replayed.reasons[:2] == [Reason.Idle, Reason.Activated]
    assert replayed.replicas == [p.replicas for _, p in replay(base, trace.rows(base), 0)]


# --- reading ---------------------------------------------------------------------------------------------
READ_RULE = parse_rules(
    """\
rules:
  - name: r
    target: {kind: Deployment, namespace: ml, name: r}
    maxReplicas: 10
    metrics:
      - {name: a, query: q, type: Total, target: 1}
      - {name: b, query: q, type: Total, target: 1, whenEmpty: zero}
""",
    "r.yaml",
).rules[0]

cell_st = st.one_of(
    st.sampled_from(["", " ", "0", "1", "15", "15.5", " 7 ", "-3", "1e3", "1_0", "nan", "inf", "-inf", "x",
                     "1e400", '"4"', '"1,2"', "\u0661\u0662", "9" * 70, " " * 70 + "1", "\x0b5", "\x00"]),
    st.floats(-1e11, 1e11, allow_nan=False).map(repr),
)
separator_st = st.sampled_from(["\n", "\n", "\n", "\r\n", "\r", "\n\n"])


@st.composite
def csv_text_st(draw: st.DrawFn) -> str:
    header = draw(st.sampled_from(["t,a,b", "t,b,a", "t, a ,b", "t,a", "x,a,b", "t,a,b,a"]))
    lines = [header]
    moment = 0
    for _ in range(draw(st.integers(0, 12))):
        moment += draw(st.sampled_from([0, 1, 15, -1]))
        width = draw(st.sampled_from([3, 3, 3, 3, 2, 4]))
        cells = [draw(st.sampled_from([str(moment), str(moment), f" {moment}.0 ", ""])) if i == 0
                 else draw(cell_st) for i in range(width)]
        lines.append(",".join(cells))
    text = draw(separator_st).join(lines)
    return text + draw(st.sampled_from(["", "\n", "\r\n", "\n\n"]))


def outcome(read: object, text: str) -> Trace | str:
    try:
        return read(text, "t.csv", READ_RULE)  # type: ignore[operator]
    except TraceError as exc:
        return str(exc)


@settings(max_examples=200, deadline=None)
@given(csv_text_st())
@example("t,a,b\n0,1,\n15,,2\n")
@example("t,a,b\r\n0,1,2\r\n15,3,4\r\n")
@example('t,a,b\n0,"1",2\n')
@example("t,a,b\n0,1,2\n\n15,3,4\n")
@example("t,a,b\n15,1,2\n0,3,4\n")
@example("t,a,b\n0,1,2,3\n")
@example("t,a,b\n0,inf,2\n")
@example("t,a,b\n,1,2\n")
@example("t,a,b\n1e11,1,2\n")
@example("t,a,b\n0,1\x002,3\n")
def test_columnar_reading_accepts_and_refuses_what_row_by_row_reading_does(text: str) -> None:
    assert outcome(parse_trace, text) == outcome(_parse_rows, text)


@pytest.mark.parametrize("text", ["t,a,b\n0,1,\n15, 2 ,3\n", 't,a,b\r\n0,"1",\r\n15, 2 ,3'])
def test_columnar_reading_takes_whole_columns(text: str) -> None:
    """The columnar path is the one taken for what programs write (split at commas, or read by the csv
    module when quoted), not a fallback that always defers to the row-by-row reader."""
    expected = Trace(["0", "15"], [0.0, 15.0], ([1.0, 2.0], [0.0, 3.0]), None)
    columns = _data_columns(text, 3)
    assert columns is not None
    assert _parse_columns(columns, ["t", "a", "b"], READ_RULE) == expected
    assert parse_trace(text, "t.csv", READ_RULE) == expected


def test_too_many_rows_are_left_to_the_row_reader_before_any_split() -> None:
    """A 16 MiB trace of tiny rows would be millions of cells split at once: the columnar reader declines by
    counting line ends, and the row reader refuses it at row 200,001 as it streams."""
    text = "t,a,b\n" + "0,1,2\n" * 200_001
    assert _data_columns(text, 3) is None
    assert _data_columns(text.replace("\n", "\r\n"), 3) is None
    assert _data_columns("t,a,b\n" + "0,1,2\n" * 1_000, 3) is not None
    with pytest.raises(TraceError, match="more than 200,000 rows"):
        parse_trace(text, "t.csv", READ_RULE)
