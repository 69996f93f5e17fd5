"""Pieces of run/status that need no network: durations, the JSON log format, the status table."""

from __future__ import annotations

import argparse
import json
import logging

import pytest

from autoscaler.controller import RuleOutcome
from autoscaler.logfmt import JsonFormatter
from autoscaler.policy import MetricObservation
from autoscaler.run import RunOptions, parse_duration
from autoscaler.status import render
from tests.unit.controller.conftest import rule, ruleset


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("15s", 15.0), ("500ms", 0.5), ("1m", 60.0), ("2h", 7200.0), ("7", 7.0), ("1.5s", 1.5)],
)
def test_parse_duration(text: str, seconds: float) -> None:
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("text", ["", "0s", "-1s", "15 minutes", "s"])
def test_parse_duration_rejects(text: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError, match="expected a positive duration"):
        parse_duration(text)


def test_query_budget_leaves_half_the_interval() -> None:
    options = RunOptions(rules="r.yaml", interval=15.0)
    assert options.query_budget == 7.5 and options.request_timeout == 3.75


def test_json_formatter_puts_decision_fields_at_top_level() -> None:
    record = logging.LogRecord(
        "autoscaler.controller", logging.INFO, __file__, 1, "rule %s: keep", ("a",), None
    )
    record.fields = {"rule": "a", "desired": 3, "metrics": {"util": None}}
    line = json.loads(JsonFormatter().format(record))
    assert line["message"] == "rule a: keep" and line["level"] == "info"
    assert (line["rule"], line["desired"], line["metrics"]) == ("a", 3, {"util": None})
    assert line["time"].endswith("+00:00")


def test_status_table() -> None:
    rules = ruleset(rule("embed"), rule("kg"))
    outcomes = [
        RuleOutcome(
            rules.get("embed"),
            3,
            5,
            "ScaleUpLimit",
            "scale up 3 -> 5 limited by policy Pods 2/60s",
            (MetricObservation("util", 95.0),),
            ok=True,
        ),
        RuleOutcome(
            rules.get("kg"),
            None,
            None,
            "FailedGetScale",
            'deployments.apps "kg" not found',
            (MetricObservation("util", None, "NoSeries: no series"),),
            error="not found",
        ),
    ]
    lines = render(outcomes).splitlines()
    assert lines[0].split()[:4] == ["RULE", "TARGET", "CURRENT", "DESIRED"]
    assert lines[1].split()[:5] == ["embed", "Deployment/ml/embed", "3", "5", "util=95"]
    assert lines[1].endswith("rate-limited (ScaleUpLimit): scale up 3 -> 5 limited by policy Pods 2/60s")
    assert lines[2].split()[:4] == ["kg", "Deployment/ml/kg", "-", "-"]
    assert "util=failed NoSeries (target 80)" in lines[2] and "cannot read scale (FailedGetScale)" in lines[2]
    # columns line up
    assert lines[1].index("Deployment") == lines[2].index("Deployment") == lines[0].index("TARGET")
