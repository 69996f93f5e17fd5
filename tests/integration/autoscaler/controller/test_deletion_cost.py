"""Scale-down that cuts no generation, end to end: a real Prometheus serves each pod's in-flight requests, the
controller (official client) sets the pods' deletion costs on the fake API server before every scale-down
patch of a Deployment rule with `podDeletionCost`, the order read from the requests the server recorded; a
failed per-pod query or pod patch is told and the scale-down goes on, and no other rule is harmed."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from autoscaler.config.rules import parse_rules
from autoscaler.controller.loop import Controller
from autoscaler.kube.deletion_cost import COST_ANNOTATION, OURS_ANNOTATION
from plumbing.prometheus.runner import PromQLSettings
from tests.fake_kube.apiserver import FakeApiServer
from tests.integration.autoscaler.controller.conftest import RealController
from tests.prom import Prom
from tests.rules import rule, rules_yaml

pytestmark = pytest.mark.integration

DOWN_AT_ONCE = "behavior: {scaleDown: {stabilizationWindowSeconds: 0}}"


def per_pod(prefix: str) -> str:
    """The in-flight requests of each pod: series `<prefix>-<pod>` of the test target, relabelled `pod`."""
    return (f'sum by (pod) (label_replace(test_load{{series=~"{prefix}-.*"}}, "pod", "$1", "series", '
            f'"{prefix}-(.*)"))')


def costs_rule(name: str, load: str, cost_query: str) -> str:
    return rule(name, load, extra=f"{DOWN_AT_ONCE}\npodDeletionCost: {{query: '{cost_query}'}}")


@pytest.fixture
def controller(real_controller: RealController, prom: Prom) -> Callable[..., Controller]:
    def build(*texts: str) -> Controller:
        return real_controller(parse_rules(rules_yaml(*texts), "rules.yaml"),
                               PromQLSettings(prom.url, query_timeout=2.0, budget=4.0, backoff_initial=0.05))

    return build


def serve(prom: Prom, values: dict[str, float]) -> None:
    for series, value in values.items():
        prom.target.set(series, value)
    for series, value in values.items():
        prom.wait_value(f'test_load{{series="{series}"}}', value)


def ours(cost: str) -> dict[str, str]:
    return {COST_ANNOTATION: cost, OURS_ANNOTATION: cost}


def test_every_scale_down_sets_the_costs_before_its_scale_patch(
    controller: Callable[..., Controller], apiserver: FakeApiServer, prom: Prom
) -> None:
    apiserver.add("web", 4)
    running = {"app": "web"}
    apiserver.add_pod("web-a", running, phase="Running")
    apiserver.add_pod("web-b", running, phase="Running", annotations=ours("4"))  # ours, from before
    apiserver.add_pod("web-c", running, phase="Running")
    apiserver.add_pod("web-d", running, phase="Running", annotations={COST_ANNOTATION: "-5"})  # the user's
    apiserver.add_pod("db-a", {"app": "db"}, phase="Running")
    load = 'test_load{series="dc1-load"}'
    serve(prom, {"dc1-load": 40, "dc1-web-a": 5, "dc1-web-b": 0, "dc1-web-c": 2, "dc1-web-d": 9,
                 "dc1-db-a": 7})
    c = controller(costs_rule("web", load, per_pod("dc1")))

    c.sync_once()  # 4 replicas at 40 against 80: 2
    assert apiserver.patches("web") == [2]
    assert {name: annotations for _, name, annotations in apiserver.pod_patches()} == {
        "web-a": ours("5"), "web-c": ours("2"), "web-b": {COST_ANNOTATION: None, OURS_ANNOTATION: None}}
    assert max(i for i, _, _ in apiserver.pod_patches()) < apiserver.scale_patch_indices("web")[0]
    assert apiserver.pod_annotations("web-d") == {COST_ANNOTATION: "-5"}
    assert apiserver.pod_annotations("db-a") == {}
    assert "FailedSetDeletionCost" not in apiserver.event_reasons("web")

    serve(prom, {"dc1-load": 20, "dc1-web-a": 1, "dc1-web-c": 2})  # 2 replicas at 20: 1
    before = len(apiserver.pod_patches())
    c.sync_once()
    assert apiserver.patches("web") == [2, 1]
    second = apiserver.pod_patches()[before:]
    assert [(name, annotations) for _, name, annotations in second] == [("web-a", ours("1"))]  # c unchanged
    assert second[-1][0] < apiserver.scale_patch_indices("web")[1]

    serve(prom, {"dc1-load": 400})  # a scale-up touches no pod
    before = len(apiserver.pod_patches())
    c.sync_once()
    assert apiserver.patches("web") == [2, 1, 5] and len(apiserver.pod_patches()) == before


def test_a_failed_query_or_pod_patch_is_told_and_the_scale_down_goes_on(
    controller: Callable[..., Controller], apiserver: FakeApiServer, prom: Prom
) -> None:
    for name in ("badq", "badpatch", "fine"):
        apiserver.add(name, 4)
        apiserver.add_pod(f"{name}-a", {"app": name}, phase="Running")
    load = 'test_load{series="dc2-load"}'
    serve(prom, {"dc2-load": 40, "dc2-badpatch-a": 3, "dc2-fine-a": 6})
    apiserver.fail("PATCH", "/pods/badpatch-a$", 500, times=None)
    c = controller(costs_rule("badq", load, "sum by (pod) (rate(test_load[1m]) / )"),
                   costs_rule("badpatch", load, per_pod("dc2")),
                   costs_rule("fine", load, per_pod("dc2")))

    outcomes = {o.rule.name: o for o in c.sync_once().outcomes}
    assert all(outcomes[name].patched and apiserver.replicas(name) == 2 for name in outcomes)
    for name, words in (("badq", "podDeletionCost query failed: BadQuery"),
                        ("badpatch", "cannot set the deletion cost of pod ml/badpatch-a")):
        assert apiserver.event_reasons(name) == ["FailedSetDeletionCost", "ScaledDown"]
        warning = next(e for e in apiserver.events if e["involvedObject"]["name"] == name)
        assert warning["type"] == "Warning" and words in warning["message"]
    assert apiserver.event_reasons("fine") == ["ScaledDown"]
    assert apiserver.pod_annotations("fine-a") == ours("6")
