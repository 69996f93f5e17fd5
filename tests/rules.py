"""Rules files in a few lines: one rule per call of `rule()` (a Deployment in namespace `ml` scaled on one
Average metric unless told otherwise), `rules_yaml()` to join them into a file's text, `ruleset()` to parse
them, `ref()` for the target a rule names, and the two-metric rule the CLI tests share (VALID_RULES)."""

from __future__ import annotations

import textwrap

from autoscaler.config.rules import RuleSet, parse_rules
from autoscaler.policy import TargetRef
from benchmarks.example_rules import GPU_UTILIZATION_METRIC, embedding_service_rules


def rules_yaml(*rules: str) -> str:
    return "rules:\n" + "".join(textwrap.indent(textwrap.dedent(r).strip() + "\n", "  ") for r in rules)


def rule(
    name: str = "svc",
    query: str = "q_util",
    target: float = 80,
    *,
    min_replicas: int = 1,
    max_replicas: int = 10,
    extra: str = "",
    metrics: str | None = None,
    kind: str = "Deployment",
) -> str:
    metrics_block = (
        metrics
        or f"""
    metrics:
      - {{name: util, query: '{query}', type: Average, target: {target}}}"""
    )
    return f"""
- name: {name}
  target: {{kind: {kind}, namespace: ml, name: {name}}}
  minReplicas: {min_replicas}
  maxReplicas: {max_replicas}{textwrap.indent(textwrap.dedent(metrics_block), "  ")}
{textwrap.indent(textwrap.dedent(extra).strip(), "  ")}
"""


def ruleset(*rules: str) -> RuleSet:
    return parse_rules(rules_yaml(*rules), "rules.yaml")


def ref(name: str = "svc", kind: str = "Deployment") -> TargetRef:
    return TargetRef(kind, "ml", name)  # type: ignore[arg-type]


def minimal_rules(*names: str, query: str = "q", max_replicas: int = 10) -> str:
    """A rules file of one rule per name (each scaling the Deployment of that name on `query`)."""
    return rules_yaml(*(rule(name, query, max_replicas=max_replicas) for name in names))


VALID_RULES = embedding_service_rules(GPU_UTILIZATION_METRIC + """\
      - name: queue
        query: sum(inference_queue_depth{service="embedding"})
        type: Total
        target: 50
""", behavior="""\
    behavior:
      scaleUp:   {stabilizationWindowSeconds: 0, selectPolicy: Max, tolerance: 0.1,
                  policies: [{type: Pods, value: 4, periodSeconds: 15},
                             {type: Percent, value: 100, periodSeconds: 15}]}
      scaleDown: {stabilizationWindowSeconds: 300, selectPolicy: Max, tolerance: 0.1,
                  policies: [{type: Percent, value: 100, periodSeconds: 15}]}
""")
"""The embedding-service rule on GPU utilization and queue depth, with a behavior: what the CLI tests read."""

SECOND_RULE = """\
  - name: reranker
    target: {kind: StatefulSet, namespace: medical-kg, name: reranker}
    maxReplicas: 4
    metrics:
      - {name: util, query: 'avg(gpu_utilization_ratio{pod=~"reranker-.*"})', type: Average, target: 0.8}
"""
"""A second rule to append to VALID_RULES (a list item at the rules' indentation)."""
