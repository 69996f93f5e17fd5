"""Two rules on one workload would take turns scaling it (the HPA disables itself with AmbiguousSelector,
KEDA's webhook refuses the second ScaledObject): such a rules file is rejected by `check` and hot reload."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from autoscaler.cli.main import main
from autoscaler.config.rules import RuleSet, parse_rules
from autoscaler.controller.reload import RulesWatcher, load_watched
from autoscaler.errors import RulesError
from tests.rules import rule, rules_yaml

SAME_TARGET = """\
rules:
  - name: embed-util
    target: {kind: Deployment, namespace: ml, name: embed}
    maxReplicas: 10
    metrics: [{name: util, query: u, type: Average, target: 80}]
  - name: embed-queue
    target:
      kind: Deployment
      namespace: ml
      name: embed
    maxReplicas: 10
    metrics: [{name: queue, query: q, type: Total, target: 50}]
"""


def problems(text: str) -> list[str]:
    with pytest.raises(RulesError) as info:
        parse_rules(text, "rules.yaml")
    return [str(p) for p in info.value.problems]


def test_a_second_rule_on_the_same_target_names_the_first_rules_line() -> None:
    assert problems(SAME_TARGET) == [
        "rules.yaml:8: rules[1].target: Deployment/ml/embed is already the target of rule 'embed-util' "
        "(line 2): two rules on one workload would take turns scaling it"
    ]


def test_same_name_in_another_namespace_or_kind_is_another_workload() -> None:
    text = (
        SAME_TARGET.replace("namespace: ml\n      name: embed", "namespace: search\n      name: embed")
        + "  - name: embed-sts\n"
        + "    target: {kind: StatefulSet, namespace: ml, name: embed}\n"
        + "    maxReplicas: 3\n"
        + "    metrics: [{name: util, query: u, type: Average, target: 80}]\n"
    )
    assert parse_rules(text, "rules.yaml").names == ("embed-util", "embed-queue", "embed-sts")


def test_every_rule_after_the_first_is_reported_with_the_other_problems() -> None:
    third = SAME_TARGET.split("  - name: embed-queue")[1].replace("queue\n", "third\n", 1)
    text = SAME_TARGET + "  - name: embed-third" + third.replace("maxReplicas: 10", "maxReplicas: 0")
    found = problems(text)
    assert [p.split(":")[1] for p in found] == ["8", "15", "18"]
    first = "rules[2].target: Deployment/ml/embed is already the target of rule 'embed-util' (line 2)"
    assert first in found[1]
    assert "rules[2].maxReplicas" in found[2]


def test_check_prints_it_and_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "rules.yaml"
    path.write_text(SAME_TARGET)
    assert main(["check", str(path)]) == 2
    out = capsys.readouterr().out.splitlines()
    assert out[0] == (
        f"{path}:8: rules[1].target: Deployment/ml/embed is already the target of rule 'embed-util' "
        "(line 2): two rules on one workload would take turns scaling it"
    )
    assert out[1] == f"{path}: 1 problem(s)"


def test_hot_reload_keeps_the_running_rules(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    path = tmp_path / "rules.yaml"
    path.write_text(rules_yaml(rule("embed-util")))
    applied: list[RuleSet] = []
    valid: list[bool] = []
    watcher = RulesWatcher(str(path), applied.append, valid.append, loaded=load_watched(str(path)))
    path.write_text(rules_yaml(rule("embed-util"), rule("b").replace("name: b}", "name: embed-util}")))
    with caplog.at_level(logging.ERROR, logger="autoscaler.controller.reload"):
        assert not watcher.check()
    assert applied == [] and valid == [False]
    assert "is already the target of rule 'embed-util'" in caplog.text
    path.write_text(rules_yaml(rule("embed-util"), rule("b")))  # fixed: b gets its own workload
    assert watcher.check()
    assert applied[-1].names == ("embed-util", "b") and valid == [False, True]
