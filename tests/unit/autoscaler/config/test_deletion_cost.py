"""`podDeletionCost` in a rules file: a query and the label naming the pod, on a kind whose pods a ReplicaSet
removes; every mistake one `file:line: field: problem`."""

from __future__ import annotations

import pytest

from autoscaler.config.query_syntax import syntax_problems
from autoscaler.errors import RulesError
from autoscaler.policy.spec import PodDeletionCost
from tests.rules import rule, ruleset

QUERY = "sum by (pod) (vllm:num_requests_running)"


def test_the_block_is_read_with_its_default_label() -> None:
    [parsed] = ruleset(rule(extra=f"podDeletionCost: {{query: '{QUERY}'}}")).rules
    assert parsed.pod_deletion_cost == PodDeletionCost(QUERY, "pod", 8)
    [named] = ruleset(rule(extra=f"podDeletionCost: {{query: '{QUERY}', podLabel: kubernetes_pod}}")).rules
    assert named.pod_deletion_cost is not None and named.pod_deletion_cost.pod_label == "kubernetes_pod"
    [plain] = ruleset(rule()).rules
    assert plain.pod_deletion_cost is None


def test_a_replicaset_target_takes_it_too() -> None:
    [parsed] = ruleset(rule(kind="ReplicaSet", extra=f"podDeletionCost: {{query: '{QUERY}'}}")).rules
    assert parsed.pod_deletion_cost is not None


@pytest.mark.parametrize(("block", "field", "words"), [
    ("{podLabel: pod}", "query", "required"),
    ("{query: ' '}", "query", "empty"),
    (f"{{query: '{QUERY}', podLabel: 'pod-name'}}", "podLabel", "label name"),
    (f"{{query: '{QUERY}', weight: 2}}", "weight", "unknown field"),
])
def test_each_mistake_is_one_problem_with_its_line_and_field(block: str, field: str, words: str) -> None:
    with pytest.raises(RulesError) as raised:
        ruleset(rule(extra=f"podDeletionCost: {block}"))
    [problem] = raised.value.problems
    assert (problem.line, problem.field) == (8, f"rules[0].podDeletionCost.{field}")
    assert words in problem.message


@pytest.mark.parametrize(("workload", "words"), [
    ("{kind: StatefulSet, namespace: ml, name: w}", "highest ordinal"),
    ("{kind: Rollout, apiVersion: argoproj.io/v1alpha1, namespace: ml, name: w}",
     "Deployment or a ReplicaSet"),
])
def test_a_kind_whose_pods_no_replicaset_removes_is_refused(workload: str, words: str) -> None:
    with pytest.raises(RulesError) as raised:
        ruleset(rule(workload=workload, extra=f"podDeletionCost: {{query: '{QUERY}'}}"))
    [problem] = raised.value.problems
    assert problem.field == "rules[0].podDeletionCost" and words in problem.message


def test_check_parses_its_query_offline() -> None:
    parsed = ruleset(rule(extra="podDeletionCost: {query: 'sum by (pod) (x'}"))
    [problem] = syntax_problems(parsed)
    assert (problem.line, problem.field) == (8, "podDeletionCost.query")
