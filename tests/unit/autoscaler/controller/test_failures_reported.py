"""Every failed, abandoned or crashed rule sync is told like a decision: a metric, an Event where this replica
may still write, and a log line whose structured fields (`--log-format json`) name the rule and the reason."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable

import pytest

from autoscaler.controller.logfmt import JsonFormatter
from autoscaler.controller.loop import Controller
from autoscaler.errors import NotFoundError
from tests.rules import ref, rule, ruleset
from tests.unit.autoscaler.controller.fakes import FakeBackend, FakeMetrics, api_error
from tests.unit.autoscaler.controller.test_controller import sample

MakeController = Callable[..., Controller]
LogCapture = pytest.LogCaptureFixture


def json_lines(caplog: LogCapture, level: int) -> list[dict[str, object]]:
    """The captured records of `level`, rendered as --log-format json renders them."""
    formatter = JsonFormatter()
    return [json.loads(formatter.format(r)) for r in caplog.records if r.levelno == level]


def test_an_unexpected_exception_is_recorded_as_an_error_decision(
    make_controller: MakeController, backend: FakeBackend, source: FakeMetrics, caplog: LogCapture
) -> None:
    backend.add(ref("buggy"), 2)
    backend.add(ref("good"), 2)
    source.values["q_util"] = 84  # within tolerance: a first decision, WithinTolerance
    c = make_controller(ruleset(rule("buggy"), rule("good")))
    c.sync_once()
    assert sample(c, "gpu_autoscaler_decision_reason", rule="buggy", reason="WithinTolerance") == 1
    assert sample(c, "gpu_autoscaler_decision_reason", rule="buggy", reason="Error") == 0  # a series already
    backend.patch_errors[ref("buggy")] = RuntimeError("bug in a backend")  # not a KubeError: a surprise
    source.values["q_util"] = 160
    with caplog.at_level(logging.WARNING, logger="autoscaler.controller.loop"):
        outcomes = {o.rule.name: o for o in c.sync_once().outcomes}
    assert backend.patches == [(ref("good"), 4)]  # the other rule went on
    buggy = outcomes["buggy"]
    assert (buggy.reason, buggy.ok) == ("Error", False)
    # the metric: the old reason is gone, the error is the rule's decision now
    assert sample(c, "gpu_autoscaler_decision_reason", rule="buggy", reason="Error") == 1
    assert sample(c, "gpu_autoscaler_decision_reason", rule="buggy", reason="WithinTolerance") == 0
    assert sample(c, "gpu_autoscaler_desired_replicas", rule="buggy") is None
    # the Event on the target
    failed = [e for e in backend.events if e[2] == "FailedSync"]
    assert [(e[0], e[1]) for e in failed] == [(ref("buggy"), "Warning")]
    assert "RuntimeError: bug in a backend" in failed[0][3]
    # the structured line, with the traceback
    (line,) = json_lines(caplog, logging.ERROR)
    assert (line["rule"], line["reason"], line["action"]) == ("buggy", "Error", "failed")
    assert line["target"] == "Deployment/ml/buggy" and line["error_reason"] == "RuntimeError"
    assert "bug in a backend" in str(line["exception"])


def test_a_backend_bug_while_reading_the_scale_is_a_failed_sync_not_an_api_error(
    make_controller: MakeController, backend: FakeBackend, source: FakeMetrics
) -> None:
    backend.add(ref(), 2)
    backend.read_errors[ref()] = KeyError("spec")
    c = make_controller(ruleset(rule()))
    outcome = c.sync_once().outcomes[0]
    assert outcome.reason == "Error" and "KeyError" in outcome.message
    assert backend.reasons() == ["FailedSync"]
    assert sample(c, "gpu_autoscaler_scale_errors_total", rule="svc", reason="ApiError") is None


def test_a_failed_patch_logs_its_decision_fields(
    make_controller: MakeController, backend: FakeBackend, source: FakeMetrics, caplog: LogCapture
) -> None:
    backend.add(ref(), 2)
    backend.patch_errors[ref()] = api_error(500)
    source.values["q_util"] = 160
    c = make_controller(ruleset(rule()))
    with caplog.at_level(logging.WARNING, logger="autoscaler.controller.loop"):
        outcome = c.sync_once().outcomes[0]
    (line,) = json_lines(caplog, logging.WARNING)
    assert (line["rule"], line["action"], line["error_reason"]) == ("svc", "failed", "ApiError")
    assert (line["current"], line["desired"], line["reason"]) == (2, 4, outcome.reason)
    assert line["metrics"] == {"util": 160.0} and "HTTP 500" in str(line["error"])
    assert backend.reasons() == ["FailedScale"]


def test_a_failed_scale_read_logs_its_fields(
    make_controller: MakeController, backend: FakeBackend, source: FakeMetrics, caplog: LogCapture
) -> None:
    backend.read_errors[ref()] = NotFoundError('deployments.apps "svc" not found', 404)
    c = make_controller(ruleset(rule()))
    with caplog.at_level(logging.WARNING, logger="autoscaler.controller.loop"):
        c.sync_once()
    (line,) = json_lines(caplog, logging.WARNING)
    assert (line["rule"], line["reason"], line["error_reason"]) == ("svc", "FailedGetScale", "NotFound")
    assert line["metrics"] == {"util": None} and "NoSeries" in str(line["metric_errors"])


def test_an_abandoned_patch_is_recorded_and_logged_but_writes_nothing(
    make_controller: MakeController, backend: FakeBackend, source: FakeMetrics, caplog: LogCapture
) -> None:
    backend.add(ref(), 2)
    source.values["q_util"] = 160
    answers = iter([True])  # leader at the start of the sync, not any more when about to patch
    c = make_controller(ruleset(rule()), is_leader=lambda: next(answers, False))
    with caplog.at_level(logging.WARNING, logger="autoscaler.controller.loop"):
        outcome = c.sync_once().outcomes[0]
    assert backend.patches == [] and backend.events == []  # no longer the leader: no write at all
    assert sample(c, "gpu_autoscaler_desired_replicas", rule="svc") == 4
    assert sample(c, "gpu_autoscaler_decision_reason", rule="svc", reason=outcome.reason) == 1
    (line,) = json_lines(caplog, logging.WARNING)
    assert (line["rule"], line["action"], line["error"]) == ("svc", "abandoned", "lost leadership")
    assert (line["current"], line["desired"]) == (2, 4)
