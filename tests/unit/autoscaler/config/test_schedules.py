"""Schedules: windows open/closed around fire times and across Europe/Berlin's DST changes, overlapping
windows, the maxReplicas override, parity without schedules, rules-file problems and `simulate --start`."""

from __future__ import annotations

import csv
import io
from datetime import datetime
from pathlib import Path
from zoneinfo import available_timezones

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from autoscaler.config.rules import parse_rules
from autoscaler.config.schedules import (
    MAX_SCHEDULES_PER_FILE,
    MAX_SCHEDULES_PER_RULE,
    apply_schedules,
    cron_problem,
    open_bounds,
    timezone_problem,
)
from autoscaler.errors import RulesError
from autoscaler.planning.plan import plan_replicas
from autoscaler.policy import MetricObservation, Reason, RuleHistory
from autoscaler.policy.spec import Schedule
from tests.measure import Run

RULE_HEAD = """rules:
- name: llm
  target: {kind: Deployment, namespace: ml, name: llm}
  minReplicas: 1
  maxReplicas: 10
  metrics:
  - {name: rps, query: 'sum(rate(requests_total[1m]))', type: Total, target: 10}
"""


def at(text: str) -> float:
    return datetime.fromisoformat(text).timestamp()


def rules_with(schedules: str) -> str:
    return RULE_HEAD + "  schedules:\n" + schedules


WEEKDAY_9_UTC = Schedule("0 9 * * 1-5", "UTC", 3600, 4, None)
BERLIN_1AM_2H = Schedule("0 1 * * *", "Europe/Berlin", 7200, 4, None)  # 2026-03-02 is a Monday


@pytest.mark.parametrize(("schedule", "now", "is_open"), [
    pytest.param(WEEKDAY_9_UTC, "2026-03-02T08:59:59+00:00", False, id="a-second-before-the-fire"),
    pytest.param(WEEKDAY_9_UTC, "2026-03-02T09:00:00+00:00", True, id="exactly-at-the-fire"),
    pytest.param(WEEKDAY_9_UTC, "2026-03-02T09:59:59+00:00", True, id="last-second-of-the-window"),
    pytest.param(WEEKDAY_9_UTC, "2026-03-02T10:00:00+00:00", False, id="window-closed-after-duration"),
    pytest.param(WEEKDAY_9_UTC, "2026-03-07T09:30:00+00:00", False, id="saturday-does-not-fire"),
    pytest.param(WEEKDAY_9_UTC, "2026-03-02T10:30:00+01:00", True, id="other-offset-same-instant"),
    # Spring forward (2026-03-29, 02:00 CET -> 03:00 CEST): fired 01:00+01:00, open 7200 real seconds, so
    # until 04:00+02:00 (naive wall-clock arithmetic would close it at 03:00 local).
    pytest.param(BERLIN_1AM_2H, "2026-03-29T03:30:00+02:00", True, id="spring-forward-still-open"),
    pytest.param(BERLIN_1AM_2H, "2026-03-29T04:00:00+02:00", False, id="spring-forward-closed"),
    # Fall back (2026-10-25, 03:00 CEST -> 02:00 CET): fired 01:00+02:00, closes at the second 02:00.
    pytest.param(BERLIN_1AM_2H, "2026-10-25T02:30:00+02:00", True, id="fall-back-first-0230-open"),
    pytest.param(BERLIN_1AM_2H, "2026-10-25T02:30:00+01:00", False, id="fall-back-second-0230-closed"),
    # A fire time inside the repeated hour fires once, at its first occurrence.
    pytest.param(Schedule("30 2 * * *", "Europe/Berlin", 600, 4, None), "2026-10-25T02:35:00+01:00", False,
                 id="repeated-hour-fires-once"),
    pytest.param(Schedule("30 2 * * *", "Europe/Berlin", 600, 4, None), "2026-10-25T02:35:00+02:00", True,
                 id="repeated-hour-first-occurrence"),
    # A fire time skipped by spring forward fires when the clock resumes (03:00 CEST), as cron does.
    pytest.param(Schedule("30 2 * * *", "Europe/Berlin", 600, 4, None), "2026-03-29T03:05:00+02:00", True,
                 id="skipped-time-fires-at-the-jump"),
])
def test_window_open_or_closed(schedule: Schedule, now: str, is_open: bool) -> None:
    bounds = open_bounds((schedule,), at(now))
    assert (bounds is not None) is is_open
    if bounds is not None:
        assert bounds.min_replicas == 4 and "schedules[0]" in bounds.min_from


def test_overlapping_windows_largest_minimum_and_largest_given_maximum_win() -> None:
    schedules = (Schedule("0 8 * * *", "UTC", 7200, 3, 20), Schedule("0 9 * * *", "UTC", 3600, 6, None),
                 Schedule("0 9 * * *", "UTC", 3600, 2, 15), Schedule("0 12 * * *", "UTC", 3600, 9, 30))
    bounds = open_bounds(schedules, at("2026-03-02T09:30:00+00:00"))
    assert bounds is not None
    assert (bounds.min_replicas, bounds.max_replicas) == (6, 20)
    assert bounds.min_from.startswith("schedules[1] ") and (bounds.max_from or "").startswith("schedules[0] ")


def test_max_replicas_override_caps_and_names_the_schedule() -> None:
    rule = parse_rules(rules_with('  - {cron: "0 9 * * *", durationSeconds: 3600, minReplicas: 4, '
                                  "maxReplicas: 12}\n"), "r.yaml").rules[0]
    busy = [MetricObservation("rps", 1000.0)]
    inside = plan_replicas(
        rule=rule,
        current=10,
        observations=busy,
        history=RuleHistory(),
        all_failed_syncs=0,
        now=at("2026-03-02T09:10:00+00:00"),
    )
    outside = plan_replicas(
        rule=rule,
        current=10,
        observations=busy,
        history=RuleHistory(),
        all_failed_syncs=0,
        now=at("2026-03-02T11:10:00+00:00"),
    )
    assert (inside.replicas, inside.reason) == (12, Reason.TooManyReplicas)
    assert "maxReplicas 12 from schedules[0] ('0 9 * * *' UTC" in inside.message
    assert (outside.replicas, outside.reason) == (10, Reason.TooManyReplicas)  # the rule's own max again
    assert "schedules" not in outside.message


def test_a_raised_minimum_lifts_the_count_and_the_message_names_the_schedule() -> None:
    rule = parse_rules(rules_with('  - {cron: "0 9 * * 1-5", timezone: Europe/Berlin, '
                                  'durationSeconds: 36000, minReplicas: 4}\n'), "r.yaml").rules[0]
    quiet = [MetricObservation("rps", 1.0)]
    below = plan_replicas(
        rule=rule,
        current=2,
        observations=quiet,
        history=RuleHistory(),
        all_failed_syncs=0,
        now=at("2026-03-02T09:00:00+01:00"),
    )
    held = plan_replicas(
        rule=rule,
        current=4,
        observations=quiet,
        history=below.history,
        all_failed_syncs=0,
        now=at("2026-03-02T09:15:00+01:00"),
    )
    assert (below.replicas, below.reason) == (4, Reason.BelowMinReplicas)
    assert (held.replicas, held.reason) == (4, Reason.TooFewReplicas)
    for plan in (below, held):
        assert ("minReplicas 4 from schedules[0] ('0 9 * * 1-5' Europe/Berlin, "
                "open since 2026-03-02T09:00:00+01:00)") in plan.message


def test_a_rule_without_schedules_is_unchanged() -> None:
    rule = parse_rules(RULE_HEAD, "r.yaml").rules[0]
    same, bounds = apply_schedules(rule, at("2026-03-02T09:30:00+00:00"))
    assert same is rule and bounds is None
    scheduled = parse_rules(rules_with('  - {cron: "0 9 * * *", durationSeconds: 60, minReplicas: 7}\n'),
                            "r.yaml").rules[0]
    obs = [MetricObservation("rps", 35.0)]
    closed = at("2026-03-02T12:00:00+00:00")
    assert plan_replicas(
        rule=scheduled, current=2, observations=obs, history=RuleHistory(), all_failed_syncs=0, now=closed
    ) == plan_replicas(
        rule=rule, current=2, observations=obs, history=RuleHistory(), all_failed_syncs=0, now=closed
    )


def test_rules_file_problems_are_all_reported_with_line_and_field() -> None:
    text = rules_with(
        '  - {cron: "0 9 * * 1-5 2026", timezone: Mars/Olympus, durationSeconds: 0, minReplicas: 4}\n'
        '  - {cron: "61 * * * *", durationSeconds: 2678401, minReplicas: 40}\n'
        '  - {cron: "0 0 30 2 *", durationSeconds: 60, minReplicas: 5, maxReplicas: 3}\n'
        '  - {cron: "@daily", durationSeconds: 60, minReplicas: 1, maxReplicas: 2147483648, every: 1}\n'
        '  - {cron: "* * * * * *", timezone: UTC}\n'
    )
    with pytest.raises(RulesError) as caught:
        parse_rules(text, "r.yaml")
    got = [(p.line, p.field, p.message) for p in caught.value.problems]
    s = "rules[0].schedules"
    expected = [
        (9, f"{s}[0].cron", "got 6 field(s)"),
        (9, f"{s}[0].timezone", "unknown IANA time zone 'Mars/Olympus'"),
        (9, f"{s}[0].durationSeconds", "[1, 2678400] (got 0)"), (10, f"{s}[1].cron", "'61 * * * *'"),
        (10, f"{s}[1].durationSeconds", "(got 2678401)"),
        (10, f"{s}[1].minReplicas", "maxReplicas 10 (got 40)"),
        (11, f"{s}[2].cron", "never fires"), (11, f"{s}[2].maxReplicas", ">= minReplicas (got 3 < 5)"),
        (12, f"{s}[3].every", "unknown field"), (12, f"{s}[3].cron", "5-field"),
        (12, f"{s}[3].maxReplicas", "(got 2147483648)"), (13, f"{s}[4].durationSeconds", "missing"),
        (13, f"{s}[4].minReplicas", "missing"), (13, f"{s}[4].cron", "got 6 field(s)"),
    ]
    assert len(got) == len(expected), got
    for line, field, fragment in expected:
        assert any(g[0] == line and g[1] == field and fragment in g[2] for g in got), (line, field, got)


@pytest.mark.parametrize(("start", "replicas"), [
    pytest.param("2026-03-02T08:30:00+01:00", ["1", "4", "4"], id="monday-09-00-berlin-lifts-the-count"),
    pytest.param("2026-03-07T08:30:00+01:00", ["1", "1", "1"], id="saturday-stays-at-the-rule-minimum"),
    pytest.param(None, ["1", "1", "1"], id="no-start-t-is-unix-time-1970"),
])
def test_simulate_start_applies_schedules(cli: Run, tmp_path: Path, start: str | None,
                                          replicas: list[str]) -> None:
    (tmp_path / "rules.yaml").write_text(rules_with(
        '  - {cron: "0 9 * * 1-5", timezone: Europe/Berlin, durationSeconds: 36000, minReplicas: 4}\n'))
    (tmp_path / "trace.csv").write_text("t,rps\n0,5\n1800,5\n3600,5\n")
    result = cli("simulate", "--rules", "rules.yaml", "trace.csv", *(["--start", start] if start else []))
    assert result.returncode == 0, result.stderr
    rows = list(csv.DictReader(io.StringIO(result.stdout)))
    assert [r["desired"] for r in rows] == replicas
    if start and replicas[1] == "4":
        assert [r["reason"] for r in rows] == ["WithinTolerance", "BelowMinReplicas", "TooFewReplicas"]


def test_simulate_rejects_a_bad_start(cli: Run, tmp_path: Path) -> None:
    (tmp_path / "rules.yaml").write_text(RULE_HEAD)
    (tmp_path / "trace.csv").write_text("t,rps\n0,5\n")
    result = cli("simulate", "--rules", "rules.yaml", "trace.csv", "--start", "monday")
    assert result.returncode == 2
    assert "--start: expected an ISO 8601 date-time" in result.stderr


ZONE_CHARS = st.sampled_from("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz/_+-.0123456789")


@given(name=st.one_of(
    st.text(ZONE_CHARS, max_size=80),
    st.sampled_from(["Europe", "America", "Etc", "Etc/", "/etc/passwd", "../../etc/passwd", "a" * 300, "",
                     "Europe//Berlin", "UTC/", "Europe/Berlin/", ".", "..", "posix", "right"])))
@settings(max_examples=150, deadline=None)
def test_a_time_zone_name_is_a_key_of_the_database_or_one_message(name: str) -> None:
    """Whatever the name, the check answers (never IsADirectoryError, OSError or ValueError), and it accepts
    exactly the database's keys."""
    problem = timezone_problem(name)
    assert (problem is None) == (name in available_timezones())
    if problem is not None:
        assert problem.startswith("unknown IANA time zone") and len(problem) < 200


@pytest.mark.parametrize("cron", ["R 9 * * *", "0 R * * *", "H 9 * * *", "H(0-29) 9 * * *", "0 9 * * R",
                                  "*/5,R 9 * * *", "r 9 * * *"])
def test_a_random_or_hashed_cron_field_is_refused(cron: str) -> None:
    """croniter's R and H pick a time per run: the controller and a replay would open windows apart."""
    problem = cron_problem(cron)
    assert problem is not None and "random or hashed field" in problem


@pytest.mark.parametrize("cron", ["0 9 * mar-apr mon-fri", "0 9 * * 1-5", "*/15 8-18 * * *", "0 0 L * *"])
def test_deterministic_crons_stay_valid(cron: str) -> None:
    assert cron_problem(cron) is None


def test_the_schedules_of_a_rule_are_bounded() -> None:
    item = "{cron: '0 9 * * *', durationSeconds: 60, minReplicas: 2}"
    text = MINIMAL_WITH_SCHEDULES.format(items=", ".join([item] * (MAX_SCHEDULES_PER_RULE + 1)))
    with pytest.raises(RulesError, match=f"expected at most {MAX_SCHEDULES_PER_RULE} schedules per rule"):
        parse_rules(text, "rules.yaml")
    assert parse_rules(MINIMAL_WITH_SCHEDULES.format(items=", ".join([item] * MAX_SCHEDULES_PER_RULE)),
                       "rules.yaml").rules[0].schedules


def rules_with_windows(per_rule: list[int]) -> str:
    """One rule per entry, each with that many daily windows."""
    item = "{cron: '0 9 * * *', durationSeconds: 60, minReplicas: 2}"
    return "rules:\n" + "".join(
        f"  - name: r{i}\n    target: {{kind: Deployment, namespace: ml, name: s{i}}}\n    maxReplicas: 5\n"
        f"    metrics: [{{name: u, query: 'avg(x)', type: Average, target: 1}}]\n"
        f"    schedules: [{', '.join([item] * count)}]\n" for i, count in enumerate(per_rule) if count)


@settings(max_examples=25, deadline=None)
@given(st.lists(st.integers(min_value=1, max_value=MAX_SCHEDULES_PER_RULE), min_size=1, max_size=20))
def test_the_schedules_of_a_file_are_bounded_whatever_their_spread_over_rules(per_rule: list[int]) -> None:
    """Up to 20 rules of up to 32 windows, scaled so the file holds the bound or one more: the bound and
    below load, one more is one problem on the `rules:` line naming both counts."""
    scale = MAX_SCHEDULES_PER_FILE / sum(per_rule)
    counts = [min(MAX_SCHEDULES_PER_RULE, max(1, round(c * scale))) for c in per_rule]
    total = sum(counts)
    text = rules_with_windows(counts)
    if total <= MAX_SCHEDULES_PER_FILE:
        assert sum(len(r.schedules) for r in parse_rules(text, "rules.yaml").rules) == total
    else:
        with pytest.raises(RulesError) as refused:
            parse_rules(text, "rules.yaml")
        assert str(refused.value) == (
            f"rules.yaml:2: rules: expected at most {MAX_SCHEDULES_PER_FILE} schedules in one file "
            f"(got {total}): every sync evaluates them all; one cron line covers many windows "
            "('0 9 * * 1-5')")


def test_one_window_past_the_file_bound_is_refused() -> None:
    counts = [MAX_SCHEDULES_PER_RULE] * (MAX_SCHEDULES_PER_FILE // MAX_SCHEDULES_PER_RULE) + [1]
    with pytest.raises(RulesError, match=f"at most {MAX_SCHEDULES_PER_FILE} schedules in one file"):
        parse_rules(rules_with_windows(counts), "rules.yaml")
    assert parse_rules(rules_with_windows(counts[:-1]), "rules.yaml")


MINIMAL_WITH_SCHEDULES = """\
rules:
  - name: r
    target: {{kind: Deployment, namespace: ml, name: svc}}
    maxReplicas: 5
    metrics: [{{name: u, query: 'avg(x)', type: Average, target: 1}}]
    schedules: [{items}]
"""
