"""Rules name their Prometheus endpoint: each query goes to that endpoint's source only, and a rule naming an
endpoint that does not exist is refused alone (an Event, a decision reason) while the others scale."""

from __future__ import annotations

from autoscaler.controller.loop import Controller
from tests.clock import T0, ManualClock
from tests.rules import ref, rule, ruleset
from tests.unit.autoscaler.controller.fakes import FakeBackend, FakeMetrics


def test_queries_follow_the_rules_endpoint_and_an_unknown_one_is_refused_alone() -> None:
    backend = FakeBackend()
    for name in ("a", "b", "c"):
        backend.add(ref(name), 2)
    default = FakeMetrics({"q": 160.0})  # twice the target: scale 2 -> 4
    mimir = FakeMetrics({"q": 40.0})  # half the target: would scale down (held by the window)
    rules = ruleset(rule("a", "q"), rule("b", "q", extra="prometheus: mimir"),
                    rule("c", "q", extra="prometheus: thanos"))
    controller = Controller(backend, {"default": default, "mimir": mimir}, rules, ManualClock(T0))
    try:
        outcomes = {o.rule.name: o for o in controller.sync_once().outcomes}
    finally:
        controller.close()
    assert default.calls == [("q",)] and mimir.calls == [("q",)]
    assert outcomes["a"].desired == 4 and outcomes["a"].observations[0].value == 160.0
    assert outcomes["b"].observations[0].value == 40.0
    refused = outcomes["c"]
    assert (refused.reason, refused.desired, refused.complete) == ("UnknownEndpoint", None, False)
    assert "endpoint 'thanos', which is not configured (endpoints: default, mimir)" in refused.message
    assert ("Deployment/ml/c", "Warning", "InvalidRule") in [(str(e[0]), e[1], e[2]) for e in backend.events]
    assert [p for p in backend.patches if p[0] == ref("c")] == []
    text = controller.metrics.exposition().decode()
    assert 'reason="UnknownEndpoint",rule="c"' in text and 'reason="UnknownEndpoint",rule="a"' in text
