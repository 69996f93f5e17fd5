"""The rules file: defaults, typed values, and every validation problem with its line."""

from __future__ import annotations

from pathlib import Path

import pytest

from autoscaler.config.rules import load_rules, parse_rules
from autoscaler.errors import Problem, RulesError
from autoscaler.policy import (
    DEFAULT_BEHAVIOR,
    Behavior,
    Fallback,
    MetricSpec,
    ScalingPolicy,
    ScalingRules,
    TargetRef,
)
from tests.rules import MINIMAL, SECOND_RULE, VALID_RULES, rule_with


def problems_of(text: str) -> list[str]:
    with pytest.raises(RulesError) as info:
        parse_rules(text, "rules.yaml")
    assert str(info.value) == "\n".join(str(p) for p in info.value.problems)
    return [str(p) for p in info.value.problems]


def test_example_file_parses_to_typed_rules() -> None:
    ruleset = parse_rules(VALID_RULES + SECOND_RULE, "rules.yaml")
    first, second = ruleset.rules
    assert first.name == "embedding-service" and first.line == 2
    assert first.target == TargetRef("Deployment", "medical-kg", "embedding-service")
    assert (first.min_replicas, first.max_replicas) == (2, 10)
    assert first.metrics[1] == MetricSpec(
        "queue", 'sum(inference_queue_depth{service="embedding"})', "Total", 50.0, 11
    )
    assert first.behavior == Behavior(
        ScalingRules(0, "Max", 0.1, (ScalingPolicy("Pods", 4, 15), ScalingPolicy("Percent", 100, 15))),
        ScalingRules(300, "Max", 0.1, (ScalingPolicy("Percent", 100, 15),)),
    )
    assert first.fallback is None
    assert second.min_replicas == 1 and second.target.kind == "StatefulSet"
    assert ruleset.get("reranker") is second
    with pytest.raises(KeyError, match=r"no rule named 'nope'.*embedding-service, reranker"):
        ruleset.get("nope")


def test_defaults_are_the_hpa_api_defaults() -> None:
    rule = parse_rules(MINIMAL, "r.yaml").rules[0]
    assert rule.min_replicas == 1
    assert rule.behavior == DEFAULT_BEHAVIOR
    assert DEFAULT_BEHAVIOR.scale_up == ScalingRules(
        0, "Max", 0.1, (ScalingPolicy("Pods", 4, 15), ScalingPolicy("Percent", 100, 15))
    )
    assert DEFAULT_BEHAVIOR.scale_down == ScalingRules(300, "Max", 0.1, (ScalingPolicy("Percent", 100, 15),))


def test_partial_behavior_keeps_the_other_defaults() -> None:
    text = (
        MINIMAL
        + "    behavior: {scaleDown: {selectPolicy: Disabled}}\n    fallback: {failureThreshold: 3, replicas: 4}\n"  # noqa: E501
    )
    rule = parse_rules(text, "r.yaml").rules[0]
    assert rule.behavior.scale_down == ScalingRules(
        300, "Disabled", 0.1, (ScalingPolicy("Percent", 100, 15),)
    )
    assert rule.behavior.scale_up == DEFAULT_BEHAVIOR.scale_up
    assert rule.fallback == Fallback(3, 4)


def test_scalars_keep_their_meaning() -> None:
    text = MINIMAL.replace("query: 'avg(x)'", "query: 1").replace("target: 80", "target: 1e3")
    metric = parse_rules(text, "r.yaml").rules[0].metrics[0]
    assert (metric.query, metric.target) == ("1", 1000.0)


INVALID = [
    (
        "max-below-min",
        rule_with("    minReplicas: 6\n"),
        "rules.yaml:4: rules[0].maxReplicas: expected maxReplicas >= minReplicas (got 5 < 6)",
    ),
    (
        "max-zero",
        rule_with(replace=("maxReplicas: 5", "maxReplicas: 0")),
        "rules.yaml:4: rules[0].maxReplicas: expected an integer in [1, 2147483647] (got 0)",
    ),
    (
        "min-negative",
        rule_with("    minReplicas: -1\n"),
        "rules.yaml:7: rules[0].minReplicas: expected an integer in [0, 2147483647] (got -1)",
    ),
    (
        "max-not-integer",
        rule_with(replace=("maxReplicas: 5", "maxReplicas: 2.5")),
        "rules.yaml:4: rules[0].maxReplicas: expected an integer (got 2.5)",
    ),
    (
        "max-bool",
        rule_with(replace=("maxReplicas: 5", "maxReplicas: true")),
        "rules.yaml:4: rules[0].maxReplicas: expected an integer (got true)",
    ),
    (
        "missing-max",
        rule_with(replace=("    maxReplicas: 5\n", "")),
        "rules.yaml:2: rules[0].maxReplicas: required field is missing",
    ),
    (
        "bad-kind",
        rule_with(replace=("kind: Deployment", "kind: Job")),
        "rules.yaml:3: rules[0].target.kind: a Job has no scale subresource (it runs to completion; set its "
        "parallelism instead): a rule scales a Deployment, a StatefulSet or any resource with /scale, such "
        "as an Argo Rollout, a LeaderWorkerSet or a custom resource",
    ),
    (
        "kind-not-camel-case",
        rule_with(replace=("kind: Deployment", "kind: deployment")),
        "rules.yaml:3: rules[0].target.kind: expected a Kubernetes kind in CamelCase, e.g. Deployment, "
        "StatefulSet, Rollout (got 'deployment')",
    ),
    (
        "custom-kind-without-api-version",
        rule_with(replace=("kind: Deployment", "kind: Rollout")),
        "rules.yaml:3: rules[0].target.apiVersion: required for kind Rollout (argoproj.io/v1alpha1); only "
        "Deployment, StatefulSet, ReplicaSet default to apps/v1",
    ),
    (
        "bad-api-version",
        rule_with(replace=("kind: Deployment", "apiVersion: argoproj.io, kind: Rollout")),
        "rules.yaml:3: rules[0].target.apiVersion: expected group/version such as apps/v1 or "
        "argoproj.io/v1alpha1 (got 'argoproj.io')",
    ),
    (
        "deployment-in-another-group",
        rule_with(replace=("kind: Deployment", "apiVersion: extensions/v1beta1, kind: Deployment")),
        "rules.yaml:3: rules[0].target.apiVersion: a Deployment is served as apps/v1 "
        "(got 'extensions/v1beta1')",
    ),
    (
        "cooldown-without-zero",
        rule_with("    cooldownSeconds: 600\n"),
        "rules.yaml:7: rules[0].cooldownSeconds: applies only to a rule that scales to zero "
        "(minReplicas: 0); this rule has minReplicas 1",
    ),
    (
        "activation-without-zero",
        rule_with(replace=("target: 80}", "target: 80, activationTarget: 5}")),
        "rules.yaml:6: rules[0].metrics[0].activationTarget: applies only to a rule that scales to zero "
        "(minReplicas: 0); this rule has minReplicas 1",
    ),
    (
        "negative-activation",
        rule_with("    minReplicas: 0\n", replace=("target: 80}", "target: 80, activationTarget: -1}")),
        "rules.yaml:6: rules[0].metrics[0].activationTarget: expected a number >= 0 (got -1)",
    ),
    (
        "bad-when-empty",
        rule_with(replace=("target: 80}", "target: 80, whenEmpty: ignore}")),
        "rules.yaml:6: rules[0].metrics[0].whenEmpty: expected one of fail, zero (got 'ignore')",
    ),
    (
        "cooldown-too-long",
        rule_with("    minReplicas: 0\n    cooldownSeconds: 6048000\n"),
        "rules.yaml:8: rules[0].cooldownSeconds: expected an integer in [0, 604800] (got 6048000)",
    ),
    (
        "capacity-without-gpus",
        rule_with("    capacity: {query: 'sum(free_gpus)'}\n"),
        "rules.yaml:7: rules[0].capacity.gpusPerReplica: required field is missing",
    ),
    (
        "capacity-zero-gpus",
        rule_with("    capacity: {query: 'sum(free_gpus)', gpusPerReplica: 0}\n"),
        "rules.yaml:7: rules[0].capacity.gpusPerReplica: expected an integer in [1, 4096] (got 0)",
    ),
    (
        "capacity-empty-query",
        rule_with("    capacity: {query: ' ', gpusPerReplica: 1}\n"),
        "rules.yaml:7: rules[0].capacity.query: expected a non-empty string (got ' ')",
    ),
    (
        "capacity-grace-negative",
        rule_with("    capacity: {query: 'x', gpusPerReplica: 1, pendingGraceSeconds: -5}\n"),
        "rules.yaml:7: rules[0].capacity.pendingGraceSeconds: expected an integer in [0, 86400] (got -5)",
    ),
    (
        "bad-name",
        rule_with(replace=("name: r", "name: 'my rule'")),
        "rules.yaml:2: rules[0].name: expected letters, digits, '-', '_' or '.', starting with a letter or digit "  # noqa: E501
        "(got 'my rule')",
    ),
    (
        "metric-named-t",
        rule_with(replace=("name: util", "name: t")),
        "rules.yaml:6: rules[0].metrics[0].name: 't' is reserved (it is the time column of simulate traces)",
    ),
    (
        "bad-metric-type",
        rule_with(replace=("type: Average", "type: Value")),
        "rules.yaml:6: rules[0].metrics[0].type: expected one of Average, Total (got 'Value')",
    ),
    (
        "target-zero",
        rule_with(replace=("target: 80", "target: 0")),
        "rules.yaml:6: rules[0].metrics[0].target: expected a number > 0 (got 0)",
    ),
    (
        "target-nan",
        rule_with(replace=("target: 80", "target: .nan")),
        "rules.yaml:6: rules[0].metrics[0].target: expected a finite number (got .nan)",
    ),
    (
        "no-metrics",
        rule_with(replace=("      - {name: util, query: 'avg(x)', type: Average, target: 80}\n", "")).replace(
            "metrics:", "metrics: []"
        ),
        "rules.yaml:5: rules[0].metrics: expected at least one metric (got an empty list)",
    ),
    (
        "window-too-long",
        rule_with("    behavior: {scaleDown: {stabilizationWindowSeconds: 3601}}\n"),
        "rules.yaml:7: rules[0].behavior.scaleDown.stabilizationWindowSeconds: expected an integer in [0, 3600] "  # noqa: E501
        "(got 3601)",
    ),
    (
        "window-negative",
        rule_with("    behavior: {scaleUp: {stabilizationWindowSeconds: -1}}\n"),
        "rules.yaml:7: rules[0].behavior.scaleUp.stabilizationWindowSeconds: expected an integer in [0, 3600] "  # noqa: E501
        "(got -1)",
    ),
    (
        "period-zero",
        rule_with(
            "    behavior:\n      scaleUp:\n        policies: [{type: Pods, value: 1, periodSeconds: 0}]\n"
        ),
        "rules.yaml:9: rules[0].behavior.scaleUp.policies[0].periodSeconds: expected an integer in [1, 1800] "
        "(got 0)",
    ),
    (
        "period-too-long",
        rule_with("    behavior: {scaleUp: {policies: [{type: Pods, value: 1, periodSeconds: 1801}]}}\n"),
        "rules.yaml:7: rules[0].behavior.scaleUp.policies[0].periodSeconds: expected an integer in [1, 1800] "
        "(got 1801)",
    ),
    (
        "policy-value-zero",
        rule_with("    behavior: {scaleDown: {policies: [{type: Percent, value: 0, periodSeconds: 60}]}}\n"),
        "rules.yaml:7: rules[0].behavior.scaleDown.policies[0].value: expected an integer in [1, 2147483647] "
        "(got 0)",
    ),
    (
        "policy-type",
        rule_with("    behavior: {scaleDown: {policies: [{type: Replicas, value: 1, periodSeconds: 60}]}}\n"),
        "rules.yaml:7: rules[0].behavior.scaleDown.policies[0].type: expected one of Pods, Percent (got 'Replicas')",  # noqa: E501
    ),
    (
        "no-policies",
        rule_with("    behavior: {scaleUp: {policies: []}}\n"),
        "rules.yaml:7: rules[0].behavior.scaleUp.policies: expected at least one policy (got an empty list)",
    ),
    (
        "select-policy",
        rule_with("    behavior: {scaleUp: {selectPolicy: Maximum}}\n"),
        "rules.yaml:7: rules[0].behavior.scaleUp.selectPolicy: expected one of Max, Min, Disabled (got 'Maximum')",  # noqa: E501
    ),
    (
        "tolerance-negative",
        rule_with("    behavior: {scaleUp: {tolerance: -0.1}}\n"),
        "rules.yaml:7: rules[0].behavior.scaleUp.tolerance: expected a number >= 0 (got -0.1)",
    ),
    (
        "fallback-threshold",
        rule_with("    fallback: {failureThreshold: 0, replicas: 2}\n"),
        "rules.yaml:7: rules[0].fallback.failureThreshold: expected an integer in [1, 2147483647] (got 0)",
    ),
    (
        "fallback-replicas",
        rule_with("    fallback: {failureThreshold: 1, replicas: -2}\n"),
        "rules.yaml:7: rules[0].fallback.replicas: expected an integer in [0, 2147483647] (got -2)",
    ),
    (
        "unknown-field",
        rule_with("    maxReplica: 3\n"),
        "rules.yaml:7: rules[0].maxReplica: unknown field (expected one of: batch, behavior, capacity, "
        "cooldownSeconds, fallback, forecast, maxReplicas, metrics, minReplicas, name, overloadBudget, "
        "podDeletionCost, priority, prometheus, schedules, slo, target); did you mean 'maxReplicas'?",
    ),
    (
        "duplicate-key",
        rule_with("    maxReplicas: 3\n"),
        "rules.yaml:7: rules[0].maxReplicas: duplicate key (each field may appear once)",
    ),
    (
        "duplicate-rule",
        MINIMAL + MINIMAL.replace("rules:\n", ""),
        "rules.yaml:7: rules[1].name: duplicate rule name 'r' (first defined on line 2)",
    ),
    (
        "namespace",
        rule_with(replace=("namespace: ml", "namespace: ML_team")),
        "rules.yaml:3: rules[0].target.namespace: expected a Kubernetes namespace (lower-case DNS label, "
        "<= 63 chars) (got 'ML_team')",
    ),
    (
        "empty-query",
        rule_with(replace=("query: 'avg(x)'", "query: ''")),
        "rules.yaml:6: rules[0].metrics[0].query: expected a non-empty string (got '')",
    ),
    ("rules-not-list", "rules: {a: 1}\n", "rules.yaml:1: rules: expected a list (got a mapping)"),
    ("empty-rules", "rules: []\n", "rules.yaml:1: rules: expected at least one rule (got an empty list)"),
    (
        "no-rules-key",
        "rule: []\n",
        "rules.yaml:1: rule: unknown field (expected one of: rules); did you mean 'rules'?",
    ),
    ("root-not-mapping", "- a\n", "rules.yaml:1: (top level): expected a mapping (got a list)"),
    ("empty-file", "", "rules.yaml:1: rules: the file is empty (expected a top-level 'rules:' list)"),
    (
        "yaml-syntax",
        "rules:\n  - name: [a\n",
        # The parser's own words after this prefix change between PyYAML releases: ours stop at the colon.
        "rules.yaml:3: yaml: not valid YAML: ",
    ),
]


@pytest.mark.parametrize(("id_", "text", "expected"), INVALID, ids=[i[0] for i in INVALID])
def test_each_problem_is_reported_with_file_line_and_field(id_: str, text: str, expected: str) -> None:
    found = problems_of(text)
    if expected.endswith(": "):  # a library's message follows: the project's part, then something
        assert any(p.startswith(expected) and len(p) > len(expected) for p in found), found
    else:
        assert expected in found


def test_every_problem_is_gathered_into_one_error() -> None:
    text = MINIMAL.replace("kind: Deployment", "kind: Job").replace("target: 80", "target: -1") + (
        "    behavior: {scaleUp: {policies: []}, scaleDown: {tolerance: x}}\n"
    )
    found = problems_of(text)
    assert len(found) == 4
    assert [p.split(":")[1] for p in found] == ["3", "6", "7", "7"]  # sorted by line


def test_problem_string_format() -> None:
    assert (
        str(Problem("f.yaml", 12, "rules[0].maxReplicas", "expected x (got y)"))
        == "f.yaml:12: rules[0].maxReplicas: expected x (got y)"
    )


def test_unreadable_file_is_a_rules_error(tmp_path: Path) -> None:
    with pytest.raises(RulesError, match=r"/missing\.yaml: not found$"):
        load_rules(tmp_path / "missing.yaml")
    (tmp_path / "bin.yaml").write_bytes(b"\xff\xfe\x00")
    with pytest.raises(RulesError, match=r"bin\.yaml:1: file: not UTF-8 text \(byte 0xff at offset 0\)"):
        load_rules(tmp_path / "bin.yaml")


def test_yaml_anchors_and_merge_keys_share_a_behavior() -> None:
    text = (
        MINIMAL
        + "    behavior:\n"
        + "      scaleDown: &down {stabilizationWindowSeconds: 600, policies: [{type: Pods, value: 1, "
        + "periodSeconds: 60}]}\n"
        + MINIMAL.replace("rules:\n", "").replace("name: r\n", "name: s\n")
        .replace("name: svc}", "name: svc2}")  # one rule per workload
        + "    behavior:\n"
        + "      scaleDown: {<<: *down, stabilizationWindowSeconds: 900}\n"
    )
    first, second = parse_rules(text, "r.yaml").rules
    assert first.behavior.scale_down == ScalingRules(600, "Max", 0.1, (ScalingPolicy("Pods", 1, 60),))
    assert second.behavior.scale_down == ScalingRules(900, "Max", 0.1, (ScalingPolicy("Pods", 1, 60),))
