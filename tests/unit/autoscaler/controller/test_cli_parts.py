"""Pieces of run/status that need no network: durations, the JSON log format, the status table."""

from __future__ import annotations

import json
import logging

from autoscaler.cli.run import RunOptions
from autoscaler.cli.status import CSV_FIELDS, render, rendered
from autoscaler.config.schedules import ScheduleBounds
from autoscaler.controller.logfmt import JsonFormatter
from autoscaler.controller.loop import RuleOutcome
from autoscaler.controller.slo_learning import SloLearning
from autoscaler.policy import MetricObservation
from autoscaler.policy.slo import learn_target
from tests.rules import rule, ruleset


def test_query_budget_leaves_half_the_interval() -> None:
    options = RunOptions(rules="r.yaml", interval=15.0)
    assert options.query_budget == 7.5 and options.request_timeout == 3.75


def test_json_formatter_puts_decision_fields_at_top_level() -> None:
    record = logging.LogRecord(
        "autoscaler.controller.loop", logging.INFO, __file__, 1, "rule %s: keep", ("a",), None
    )
    record.fields = {"rule": "a", "desired": 3, "metrics": {"util": None}}
    line = json.loads(JsonFormatter().format(record))
    assert line["message"] == "rule a: keep" and line["level"] == "info"
    assert (line["rule"], line["desired"], line["metrics"]) == ("a", 3, {"util": None})
    assert line["time"].endswith("+00:00")


def _two_outcomes() -> list[RuleOutcome]:
    rules = ruleset(rule("embed"), rule("kg"))
    return [
        RuleOutcome(
            rule=rules.get("embed"),
            current=3,
            desired=5,
            reason="ScaleUpLimit",
            message="scale up 3 -> 5 limited by policy Pods 2/60s",
            observations=(MetricObservation("util", 95.0),),
            ok=True,
        ),
        RuleOutcome(
            rule=rules.get("kg"),
            current=None,
            desired=None,
            reason="FailedGetScale",
            message='deployments.apps "kg" not found',
            observations=(MetricObservation("util", None, "NoSeries: no series"),),
            error="not found",
        ),
    ]


def test_status_table() -> None:
    outcomes = _two_outcomes()
    lines = render(outcomes).splitlines()
    assert lines[0].split()[:4] == ["RULE", "TARGET", "CURRENT", "DESIRED"]
    assert lines[1].split()[:6] == ["embed", "Deployment/ml/embed", "3", "5", "1-10", "util=95"]
    assert lines[1].endswith("rate-limited (ScaleUpLimit): scale up 3 -> 5 limited by policy Pods 2/60s")
    assert lines[2].split()[:4] == ["kg", "Deployment/ml/kg", "-", "-"]
    assert "util=failed NoSeries (target 80)" in lines[2] and "cannot read scale (FailedGetScale)" in lines[2]
    # columns line up
    assert lines[1].index("Deployment") == lines[2].index("Deployment") == lines[0].index("TARGET")


def test_status_shows_the_bounds_of_an_open_schedule() -> None:
    rules = ruleset(rule("embed", min_replicas=2, max_replicas=10))
    window = ScheduleBounds(5, 8, "schedules[0] ('0 9 * * 1-5' UTC, open since 2026-03-02T09:00:00+00:00)",
                            "schedules[0]")
    outcome = RuleOutcome(
        rule=rules.get("embed"),
        current=2,
        desired=5,
        reason="BelowMinReplicas",
        message="current 2 is below minReplicas 5",
        ok=True,
        schedule=window,
    )
    header, row = render([outcome]).splitlines()
    assert header.split()[4] == "BOUNDS"
    assert row.split()[4:6] == ["5-8", "(schedule)"]
    plain = RuleOutcome(
        rule=rules.get("embed"), current=2, desired=2, reason="WithinTolerance", message="ok", ok=True
    )
    assert render([plain]).splitlines()[1].split()[4] == "2-10"


def test_status_table_shows_a_servers_escapes_inert() -> None:
    """A message quoting the API server (or a label) shows its control characters as escapes, one line."""
    rules = ruleset(rule("embed"))
    outcome = RuleOutcome(rule=rules.get("embed"), current=None, desired=None, reason="FailedGetScale",
                          message='deployments.apps "x\x1b]0;owned\x07\n\u009b2J" not found', observations=(),
                          error="not found")
    lines = render([outcome]).splitlines()
    assert len(lines) == 2 and "\x1b" not in lines[1] and "\u009b" not in lines[1]
    assert '"x\\x1b]0;owned\\x07\\x0a\\u009b2J" not found' in lines[1]


def test_status_json_is_one_document_of_every_rule() -> None:
    document = json.loads(rendered(_two_outcomes(), "json"))
    assert document["schemaVersion"] == 1
    embed, kg = document["rules"]
    assert embed == {
        "rule": "embed", "target": {"apiVersion": "apps/v1", "kind": "Deployment", "namespace": "ml",
                                    "name": "embed"},
        "current": 3, "desired": 5, "min": 1, "max": 10, "schedule": False, "reason": "ScaleUpLimit",
        "complete": True, "message": "scale up 3 -> 5 limited by policy Pods 2/60s", "why": "rate-limited",
        "metrics": [{"name": "util", "value": 95.0, "error": None, "target": 80.0, "type": "Average"}],
        "slo": None}
    assert (kg["current"], kg["desired"], kg["complete"]) == (None, None, False)
    assert kg["metrics"][0]["value"] is None and kg["metrics"][0]["error"].startswith("NoSeries")


def test_status_json_says_why_an_slo_rule_learned_no_target() -> None:
    """A rule with `slo` whose history was too short: the configured target stays, and the JSON says why."""
    rules = ruleset(rule("chat", extra="slo: {latency: 'q_ttft', objectiveSeconds: 0.5, learn: util, "
                                       "bounds: {min: 2, max: 40}, mode: observe}"))
    outcome = RuleOutcome(rule=rules.get("chat"), current=2, desired=2, reason="WithinTolerance", message="",
                          observations=(MetricObservation("util", 80.0),), ok=True)
    learning = SloLearning(learned=learn_target([(1.0, 0.1)] * 5, 0.5, 2, 40))
    slo = json.loads(rendered([outcome], "json", learning={"chat": learning}))["rules"][0]["slo"]
    assert slo.pop("reason").startswith("TooFewSamples: 5 samples")
    assert slo == {"metric": "util", "learned_target": None, "configured_target": 80.0, "mode": "observe"}
    unread = json.loads(rendered([outcome], "json"))["rules"][0]["slo"]
    assert unread["learned_target"] is None and unread["reason"] == "history not read yet"


def test_status_csv_and_wide_carry_the_same_rows() -> None:
    lines = rendered(_two_outcomes(), "csv").splitlines()
    assert lines[0] == ",".join(CSV_FIELDS)
    assert lines[1].startswith("embed,Deployment,ml,embed,3,5,1,10,False,ScaleUpLimit,True,")
    assert lines[2].startswith("kg,Deployment,ml,kg,,,1,10,False,FailedGetScale,False,")
    assert rendered(_two_outcomes(), "csv", headers=False).splitlines() == lines[1:]
    wide = rendered(_two_outcomes(), "wide").splitlines()
    assert wide[0].split()[-3:] == ["REASON", "COMPLETE", "MESSAGE"]
    assert wide[1].split()[8:10] == ["ScaleUpLimit", "yes"]
