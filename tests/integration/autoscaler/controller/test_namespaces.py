"""--namespaces: a rule whose target is elsewhere is refused without a single API call into that namespace
(no read, no patch, no Event), reported once as an ERROR and by its outcome and metric; others work."""

from __future__ import annotations

import argparse
import logging
import time

import pytest

from autoscaler.cli import status
from autoscaler.cli.args import namespace_list
from autoscaler.config.rules import parse_rules
from autoscaler.controller.loop import Controller, ControllerSettings
from autoscaler.kube.scale import KubernetesScaleBackend, NamespaceScope
from tests.fake_kube.apiserver import ANSWER_TIMEOUT, FakeApiServer
from tests.prom import Prom
from tests.unit.autoscaler.controller.fakes import FakeMetrics

pytestmark = pytest.mark.integration


def test_target_outside_namespaces_is_refused_without_api_calls(
    apiserver: FakeApiServer, caplog: pytest.LogCaptureFixture
) -> None:
    apiserver.add("web", 2, namespace="ml")
    apiserver.add("db", 2, namespace="finance")
    rules = parse_rules(
        "rules:\n"
        + "".join(
            f"  - name: {name}\n    target: {{kind: Deployment, namespace: {ns}, name: {name}}}\n"
            "    maxReplicas: 20\n"
            "    metrics: [{name: load, query: 'sum(load)', type: Total, target: 10}]\n"
            for name, ns in (("web", "ml"), ("db", "finance"))
        ),
        "rules.yaml",
    )
    backend = NamespaceScope(KubernetesScaleBackend(apiserver.api_client(), request_timeout=ANSWER_TIMEOUT),
                             {"ml"})
    controller = Controller(backend, FakeMetrics({"sum(load)": 60.0}), rules, time.time,
                            settings=ControllerSettings())
    try:
        with caplog.at_level(logging.ERROR, logger="autoscaler.kube.scale"):
            reports = [controller.sync_once(), controller.sync_once()]
    finally:
        controller.close()
    for report in reports:
        by_rule = {o.rule.name: o for o in report.outcomes}
        assert by_rule["db"].reason == "FailedGetScale" and not by_rule["db"].ok
        assert "namespace 'finance' is not in --namespaces (ml)" in by_rule["db"].message
        assert by_rule["web"].ok
    assert apiserver.patches("web") == [6] and apiserver.replicas("db", namespace="finance") == 2
    assert not [r.path for r in apiserver.requests if "/namespaces/finance/" in r.path]
    refused = [r for r in caplog.records if "not in --namespaces" in r.getMessage()]
    assert len(refused) == 1 and refused[0].levelno == logging.ERROR
    errors = [line for line in controller.metrics.exposition().decode().splitlines()
              if line.startswith("gpu_autoscaler_scale_errors_total{") and 'rule="db"' in line]
    assert len(errors) == 1 and 'reason="NamespaceNotAllowed"' in errors[0] and errors[0].endswith(" 2.0")


@pytest.mark.parametrize("text", ["", "ml,", "ML", "a_b", "-ml", "x" * 64, "ml,\u0661"])
def test_bad_namespace_lists_are_refused(text: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError, match="expected namespace names"):
        namespace_list(text)


def test_namespace_list() -> None:
    assert namespace_list("ml, research,ml") == frozenset({"ml", "research"})


def test_status_with_namespaces_refuses_the_same_way(apiserver: FakeApiServer, prom: Prom) -> None:
    """`status --namespaces` shows the refusal in its table and never reads the other namespace."""
    apiserver.add("web", 2, namespace="ml")
    apiserver.add("db", 2, namespace="finance")
    query = 'sum(test_load{series="namespaces"})'
    prom.target.set("namespaces", 60.0)
    prom.wait_value(query, 60.0)
    rules = parse_rules(
        "rules:\n"
        + "".join(
            f"  - name: {name}\n    target: {{kind: Deployment, namespace: {ns}, name: {name}}}\n"
            "    maxReplicas: 20\n"
            f"    metrics: [{{name: load, query: '{query}', type: Total, target: 10}}]\n"
            for name, ns in (("web", "ml"), ("db", "finance"))
        ),
        "rules.yaml",
    )
    outcomes = {o.rule.name: o for o in status.gather("rules.yaml", prom.url, apiserver.api_client(), rules,
                                                      namespaces=frozenset({"ml"}))}
    assert outcomes["web"].desired == 6 and outcomes["db"].reason == "FailedGetScale"
    table = status.render(tuple(outcomes.values()))
    assert "namespace 'finance' is not in --namespaces (ml)" in table
    assert not [r.path for r in apiserver.requests if "/namespaces/finance/" in r.path]
    assert apiserver.patches("web") == []  # status never patches
