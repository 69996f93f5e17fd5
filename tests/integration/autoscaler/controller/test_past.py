"""A rule's past read back from a real Prometheus holding 3 days of the `embed` service (tests/history.py):
its overload budget and forecast start from the last day instead of learning it again after a restart."""

from __future__ import annotations

import pytest

from autoscaler.config.rules import parse_rules
from autoscaler.controller.loop import Controller
from autoscaler.policy.budget import LOOKBACK_MINUTES
from autoscaler.policy.forecast import WINDOW_MINUTES
from plumbing.prometheus.config import endpoint_from_url
from plumbing.prometheus.runner import PromQLRunner, PromQLSettings
from tests.history import EMBED_RULES, BackfilledPrometheus
from tests.rules import ref
from tests.unit.autoscaler.controller.fakes import FakeBackend, sample

pytestmark = pytest.mark.integration

LEARNING = EMBED_RULES + """\
    overloadBudget: {percentOfMinutes: 5, startupSeconds: 120}
    forecast: {seasonSeconds: 86400, leadSeconds: 300}
"""


def controller(url: str, end: float, backend: FakeBackend) -> tuple[Controller, PromQLRunner]:
    runner = PromQLRunner(PromQLSettings(url, query_timeout=10.0, budget=30.0), endpoint_from_url(url))
    backend.add(ref("embed"), 4)
    return Controller(backend, runner, parse_rules(LEARNING, "r.yaml"), lambda: end + 30.0), runner


def test_the_first_sync_reads_the_last_day_back_and_forecasts_at_once(
        backfilled_prometheus: BackfilledPrometheus) -> None:
    backend = FakeBackend()
    c, runner = controller(backfilled_prometheus.url, backfilled_prometheus.spec.end, backend)
    try:
        report = c.sync_once()
        history = c.history("embed")
        [budget], [forecast] = history.budget, history.forecast
        assert len(budget.loads) >= LOOKBACK_MINUTES and budget.derived is not None
        assert len(forecast.loads) >= 1_440 + WINDOW_MINUTES and forecast.derived is not None
        assert sum(load is None for load in forecast.loads) < 10  # the request rate, minute by minute
        assert "history" not in report.outcomes[0].message and "no complete" not in report.outcomes[0].message
        assert sample(c, "gpu_autoscaler_forecast_replicas", rule="embed") is not None
        target = sample(c, "gpu_autoscaler_metric_effective_target", rule="embed", metric="requests")
        assert target is not None and target <= 50.0
    finally:
        c.close()
        runner.close()


def test_a_past_that_cannot_be_read_is_tried_again_later_and_the_rule_still_syncs() -> None:
    backend = FakeBackend()
    c, runner = controller("http://127.0.0.1:9", 1_800_000_000.0, backend)  # nothing listens on port 9
    try:
        report = c.sync_once()
        assert report.outcomes[0].reason == "MetricsFailed"  # the metrics fail too, and nothing raised
        read = c.past("embed")
        assert not read.done and read.tried == 1_800_000_030.0
        assert c.history("embed").forecast[0].derived is None
    finally:
        c.close()
        runner.close()
