"""`gpu-autoscaler simulate` end to end through its entry point: output and every error."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest

from tests.measure import Run

HEADER = "t,gpu_utilization,queue\n"


def write(tmp_path: Path, name: str, text: str) -> str:
    (tmp_path / name).write_text(text)
    return name


def output_rows(stdout: str) -> list[dict[str, str]]:
    return list(csv.DictReader(io.StringIO(stdout)))


def test_replays_and_applies_each_sync(cli: Run, rules_file: Path, tmp_path: Path) -> None:
    trace = write(tmp_path, "trace.csv", HEADER + "0,90,100\n15,160,\n30,,\n45,20,10\n345.5,20,10\n")
    result = cli("simulate", str(rules_file), trace)
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    rows = output_rows(result.stdout)
    assert result.stdout.splitlines()[0] == "t,desired,proposed,reason"
    assert [(r["t"], r["desired"], r["proposed"], r["reason"]) for r in rows] == [
        ("0", "3", "3", "DesiredWithinRange"),  # starts at minReplicas 2; util 90/80 -> ceil(2.25)
        ("15", "6", "6", "DesiredWithinRange"),  # util 2 * 3 = 6 (queue failed, but this is a scale-up)
        ("30", "6", "", "MetricsFailed"),
        ("45", "6", "2", "ScaleDownStabilized"),  # 300 s scale-down window
        ("345.5", "2", "2", "DesiredWithinRange"),  # window passed; t echoed as given
    ]


def test_start_replicas_flag_and_out_of_bounds_correction(cli: Run, rules_file: Path, tmp_path: Path) -> None:
    trace = write(tmp_path, "trace.csv", HEADER + "0,80,\n15,80,\n")
    result = cli("simulate", str(rules_file), trace, "--replicas", "14")
    assert result.returncode == 0, result.stderr
    assert [(r["desired"], r["reason"]) for r in output_rows(result.stdout)] == [
        ("10", "AboveMaxReplicas"),
        ("10", "WithinTolerance"),
    ]


def test_target_at_zero_is_held_as_the_controller_does(cli: Run, rules_file: Path, tmp_path: Path) -> None:
    trace = write(tmp_path, "trace.csv", HEADER + "0,160,500\n15,160,500\n")
    result = cli("simulate", str(rules_file), trace, "--replicas", "0")
    assert result.returncode == 0, result.stderr
    # minReplicas 2 > 0: the controller (as the HPA) leaves a target scaled to zero alone, so simulate does
    assert [(r["desired"], r["proposed"], r["reason"]) for r in output_rows(result.stdout)] == [
        ("0", "", "ScalingDisabled"),
        ("0", "", "ScalingDisabled"),
    ]


def test_trace_with_a_byte_order_mark(cli: Run, rules_file: Path, tmp_path: Path) -> None:
    (tmp_path / "excel.csv").write_bytes(("\ufeff" + HEADER + "0,90,100\r\n").encode("utf-8"))
    result = cli("simulate", str(rules_file), str(tmp_path / "excel.csv"))
    assert result.returncode == 0, result.stderr
    assert [(r["t"], r["desired"]) for r in output_rows(result.stdout)] == [("0", "3")]


def test_rule_flag_selects_among_several(cli: Run, two_rules_file: Path, tmp_path: Path) -> None:
    trace = write(tmp_path, "t.csv", "t,util\n0,1.6\n")
    result = cli("simulate", str(two_rules_file), trace, "--rule", "reranker")
    assert result.returncode == 0, result.stderr
    assert output_rows(result.stdout)[0]["desired"] == "2"


BAD_TRACES = [
    ("backwards", HEADER + "0,1,1\n45,1,1\n41,1,1\n", "trace.csv:4: t: goes backwards (41 < 45)"),
    (
        "bad-number",
        HEADER + "0,1,1\n15,abc,1\n",
        "trace.csv:3: gpu_utilization: expected a number (got 'abc')",
    ),
    (
        "nan",
        HEADER + "0,NaN,1\n",
        "trace.csv:2: gpu_utilization: expected a finite number (got 'NaN'); leave the cell empty for a failed query",  # noqa: E501
    ),
    ("bad-t", HEADER + "x,1,1\n", "trace.csv:2: t: expected a number (got 'x')"),
    ("empty-t", HEADER + ",1,1\n", "trace.csv:2: t: expected a time in seconds (got an empty cell)"),
    (
        "unknown-column",
        "t,gpu_utilization,queue,latency\n0,1,1,1\n",
        "trace.csv:1: latency: unknown metric column: rule 'embedding-service' has metrics gpu_utilization, queue",  # noqa: E501
    ),
    (
        "missing-column",
        "t,gpu_utilization\n0,1\n",
        "trace.csv:1: header: no column for metric(s) queue of rule 'embedding-service' "
        "(expected 't,gpu_utilization,queue')",
    ),
    ("duplicate-column", "t,queue,queue\n", "trace.csv:1: queue: duplicate column"),
    (
        "no-t-column",
        "time,gpu_utilization,queue\n",
        "trace.csv:1: header: the first column must be 't' (expected e.g. 't,gpu_utilization,queue')",
    ),
    ("short-row", HEADER + "0,1\n", "trace.csv:2: row: expected 3 cells (t,gpu_utilization,queue) (got 2)"),
    ("empty-file", "", "trace.csv:1: header: the trace is empty (expected a header 't,<metric>,...')"),
]


@pytest.mark.parametrize(("id_", "trace", "message"), BAD_TRACES, ids=[b[0] for b in BAD_TRACES])
def test_bad_trace_is_one_line_naming_file_line_and_field(
    cli: Run, rules_file: Path, tmp_path: Path, id_: str, trace: str, message: str
) -> None:
    write(tmp_path, "trace.csv", trace)
    result = cli("simulate", str(rules_file), "trace.csv")
    assert result.returncode == 2
    assert result.stderr == message + "\n"
    assert result.stdout == ""  # nothing half-written


def test_missing_trace_file(cli: Run, rules_file: Path) -> None:
    result = cli("simulate", str(rules_file), "nope.csv")
    assert (result.returncode, result.stderr) == (
        2,
        "nope.csv: not found\n",
    )


def test_rule_required_when_several(cli: Run, two_rules_file: Path, tmp_path: Path) -> None:
    write(tmp_path, "t.csv", "t,util\n0,1\n")
    result = cli("simulate", str(two_rules_file), "t.csv")
    assert result.returncode == 2
    assert result.stderr == (
        f"{two_rules_file}: --rule: required, the file has 2 rules (embedding-service, reranker)\n"
    )


def test_unknown_rule(cli: Run, two_rules_file: Path, tmp_path: Path) -> None:
    write(tmp_path, "t.csv", "t,util\n0,1\n")
    result = cli("simulate", str(two_rules_file), "t.csv", "--rule", "ranker")
    assert result.returncode == 2
    assert (
        result.stderr
        == f"{two_rules_file}: --rule: no rule named 'ranker' (rules: embedding-service, reranker)\n"
    )


def test_invalid_rules_file(cli: Run, tmp_path: Path) -> None:
    write(tmp_path, "bad.yaml", "rules:\n  - name: x\n    maxReplicas: 0\n")
    write(tmp_path, "t.csv", "t\n")
    result = cli("simulate", "bad.yaml", "t.csv")
    assert result.returncode == 2
    assert result.stderr.splitlines() == [
        "bad.yaml:2: rules[0].target: required field is missing",
        "bad.yaml:2: rules[0].metrics: required field is missing",
        "bad.yaml:3: rules[0].maxReplicas: expected an integer in [1, 2147483647] (got 0)",
    ]
    assert "Traceback" not in result.stderr


@pytest.mark.parametrize("value", ["-1", "two"])
def test_bad_replicas_flag(cli: Run, rules_file: Path, tmp_path: Path, value: str) -> None:
    write(tmp_path, "t.csv", HEADER)
    result = cli("simulate", str(rules_file), "t.csv", "--replicas", value)
    assert result.returncode == 2
    assert "--replicas: " in result.stderr and "expected" in result.stderr


def test_help_lists_the_subcommands(cli: Run) -> None:
    result = cli("--help")
    assert result.returncode == 0
    assert "check" in result.stdout and "simulate" in result.stdout


GUARDED_ZERO = """\
rules:
  - name: llm
    target: {apiVersion: argoproj.io/v1alpha1, kind: Rollout, namespace: ml, name: llm}
    minReplicas: 0
    maxReplicas: 20
    cooldownSeconds: 60
    metrics:
      - {name: rps, query: 'sum(rate(requests_total[1m]))', type: Total, target: 9, activationTarget: 0.5,
         whenEmpty: zero}
    capacity: {query: 'free_gpus', gpusPerReplica: 2}
"""


def test_capacity_column_and_scale_to_zero(cli: Run, tmp_path: Path) -> None:
    rules = write(tmp_path, "rules.yaml", GUARDED_ZERO)
    trace = write(tmp_path, "trace.csv", "t,rps,capacity\n"
                  "0,,4\n"  # no series: read as 0 (whenEmpty: zero), idle at 0
                  "15,0.7,4\n"  # above the activation target: 0 -> 1
                  "30,90,4\n"  # the HPA wants 10; 4 free GPUs fit 2 more replicas
                  "45,90,\n"  # the capacity query failed: not limited (the HPA's rate limit: 3 -> 7)
                  "60,90,0\n"  # nothing free: hold
                  "75,0,0\n105,0,0\n120,0,0\n135,0,0\n")  # idle after the last activity at t=60
    result = cli("simulate", rules, trace)
    assert result.returncode == 0, result.stderr
    assert [(r["t"], r["desired"], r["reason"]) for r in output_rows(result.stdout)] == [
        ("0", "0", "Idle"),
        ("15", "1", "Activated"),
        ("30", "3", "CapacityLimited"),
        ("45", "7", "ScaleUpLimit"),
        ("60", "7", "CapacityLimited"),
        ("75", "7", "ScaleDownStabilized"),
        ("105", "7", "ScaleDownStabilized"),  # idle for 45 s: under cooldownSeconds 60
        ("120", "0", "ScaledToZero"),  # idle for 60 s: straight to 0, no behavior policies (as KEDA)
        ("135", "0", "Idle"),
    ]


def test_a_capacity_column_needs_a_guarded_rule(cli: Run, rules_file: Path, tmp_path: Path) -> None:
    trace = write(tmp_path, "trace.csv", "t,gpu_utilization,queue,capacity\n0,90,100,4\n")
    result = cli("simulate", str(rules_file), trace)
    assert result.returncode == 2
    assert "trace.csv:1: capacity: a capacity column, but rule" in result.stderr
    assert "has no capacity guard" in result.stderr


@pytest.mark.parametrize("start", ["0001-01-01T00:00:00", "1969-12-31T23:59:59Z", "9999-06-01T00:00:00",
                                   "9999-12-31T23:00:00-05:00", "+275760-01-01"])
def test_a_start_outside_1970_to_9998_is_one_message(cli: Run, rules_file: Path, tmp_path: Path,
                                                    start: str) -> None:
    trace = write(tmp_path, "trace.csv", HEADER + "0,90,100\n")
    result = cli("simulate", str(rules_file), trace, "--start", start)
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr
    assert "--start" in result.stderr and result.stdout == ""


SCHEDULED_RULES = """\
rules:
  - name: llm
    target: {kind: Deployment, namespace: ml, name: llm}
    minReplicas: 1
    maxReplicas: 8
    metrics:
      - {name: rps, query: 'sum(rate(r[1m]))', type: Total, target: 9}
    schedules:
      - {cron: "0 9 * * 1-5", timezone: Europe/Berlin, durationSeconds: 36000, minReplicas: 4}
"""


@pytest.mark.parametrize("value", ["10e400", "1e308", "99999999999999999999", "2147483648"])
def test_a_huge_replicas_flag_is_refused_where_it_is_parsed(cli: Run, rules_file: Path, tmp_path: Path,
                                                            value: str) -> None:
    write(tmp_path, "t.csv", HEADER + "0,90,100\n")
    result = cli("simulate", str(rules_file), "t.csv", "--replicas", value)
    assert result.returncode == 2 and result.stdout == ""
    expected = f"argument --replicas: expected a replica count from 0 to 2147483647 (got '{value}')"
    assert expected in result.stderr


def test_a_row_past_the_year_9999_after_start_is_one_message(cli: Run, tmp_path: Path) -> None:
    """The trace's t may reach 1e10 s (317 years): after a --start in 9998 a schedule cannot be evaluated."""
    rules = write(tmp_path, "rules.yaml", SCHEDULED_RULES)
    trace = write(tmp_path, "trace.csv", "t,rps\n0,10\n15,10\n1e10,10\n")
    result = cli("simulate", "--rules", rules, trace, "--start", "9998-12-31T00:00:00")
    assert result.returncode == 2 and result.stdout == "", result.stderr
    assert "trace.csv: t: the row at t=1e10 is past 9999-12-31T23:59:59Z" in result.stderr
    assert cli("simulate", "--rules", rules, trace, "--start", "2026-03-02T08:00:00").returncode == 0


@pytest.mark.parametrize("cell", ["1e400", "-1e400", "1e309", "inf", "nan"])
def test_a_trace_value_that_parses_to_infinity_names_file_line_and_column(cli: Run, rules_file: Path,
                                                                          tmp_path: Path, cell: str) -> None:
    trace = write(tmp_path, "trace.csv", HEADER + f"0,90,100\n15,80,{cell}\n")
    result = cli("simulate", str(rules_file), trace)
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr.startswith("trace.csv:3: queue: expected a finite number"), result.stderr


def test_every_output_format_carries_the_same_rows(cli: Run, rules_file: Path, tmp_path: Path) -> None:
    trace = write(tmp_path, "trace.csv", HEADER + "0,90,100\n15,160,\n30,,\n45,20,10\n")
    as_csv = output_rows(cli("simulate", "--rules", str(rules_file), trace).stdout)
    expected = [(float(r["t"]), int(r["desired"]), int(r["proposed"]) if r["proposed"] else None, r["reason"])
                for r in as_csv]
    document = json.loads(cli("simulate", "--rules", str(rules_file), trace, "-o", "json").stdout)
    assert document["schemaVersion"] == 1 and document["rule"] == "embedding-service"
    assert [(r["t"], r["desired"], r["proposed"], r["reason"]) for r in document["rows"]] == expected
    table = cli("simulate", "--rules", str(rules_file), trace, "-o", "table").stdout.splitlines()
    assert table[0].split() == ["T", "DESIRED", "PROPOSED", "REASON"]
    assert [line.split() for line in table[1:]] == [
        [r["t"], r["desired"], r["proposed"] or "-", r["reason"]] for r in as_csv]
    wide = cli("simulate", "--rules", str(rules_file), trace, "-o", "wide").stdout.splitlines()
    assert wide[0].split() == ["T", "GPU_UTILIZATION", "QUEUE", "DESIRED", "PROPOSED", "REASON"]
    assert wide[2].split()[:3] == ["15", "160", "-"]  # a failed query: no value
    bare = cli("simulate", "--rules", str(rules_file), trace, "--no-headers").stdout
    assert bare.splitlines() == cli("simulate", "--rules", str(rules_file), trace).stdout.splitlines()[1:]
