"""Rules files in a few lines: one rule per call of `rule()` (a Deployment in namespace `ml` scaled on one
Average metric unless told otherwise), `rules_yaml()` to join them into a file's text, `ruleset()` to parse
them (`parsed_rule()`: the one rule of a `rule()`), `ref()` for the target a rule names, `rule_with()` for the
smallest valid file changed in one place (the validation tests, whose messages name its lines), the
two-metric rule the CLI tests share (VALID_RULES); and random rules for the property tests (`rule_st()` over a
`RuleSpace`)."""

from __future__ import annotations

import textwrap
from typing import Any, NamedTuple

from hypothesis import strategies as st

from autoscaler.config.rules import RuleSet, parse_rules
from autoscaler.policy import Behavior, Fallback, MetricSpec, Rule, ScalingPolicy, ScalingRules, TargetRef
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
    workload: str | None = None,
) -> str:
    """One rule's text. `metrics`: the whole `metrics:` entry instead of the one on `query`; `workload`: the
    whole target mapping instead of the `kind` named as the rule, e.g. '{kind: Rollout, apiVersion:
    argoproj.io/v1alpha1, namespace: ml, name: w}'; `extra`: more fields of the rule."""
    metrics_block = (
        metrics
        or f"""
    metrics:
      - {{name: util, query: '{query}', type: Average, target: {target}}}"""
    )
    return f"""
- name: {name}
  target: {workload or f"{{kind: {kind}, namespace: ml, name: {name}}}"}
  minReplicas: {min_replicas}
  maxReplicas: {max_replicas}
{textwrap.indent(textwrap.dedent(metrics_block).strip(), "  ")}
{textwrap.indent(textwrap.dedent(extra).strip(), "  ")}
"""


def ruleset(*rules: str) -> RuleSet:
    return parse_rules(rules_yaml(*rules), "rules.yaml")


def parsed_rule(*args: Any, **kwargs: Any) -> Rule:
    """The rule `rule(*args, **kwargs)` writes, parsed."""
    return ruleset(rule(*args, **kwargs)).rules[0]


MINIMAL = """\
rules:
  - name: r
    target: {kind: Deployment, namespace: ml, name: svc}
    maxReplicas: 5
    metrics:
      - {name: util, query: 'avg(x)', type: Average, target: 80}
"""
"""The smallest valid rules file; its lines are those the validation messages name."""


def rule_with(extra: str = "", replace: tuple[str, str] | None = None) -> str:
    """MINIMAL with `replace` (old, new) applied and `extra` lines (rule fields, indented 4) appended."""
    text = MINIMAL if replace is None else MINIMAL.replace(*replace)
    return text + extra


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


# --- random rules (hypothesis) ----------------------------------------------------------------------------

RANDOM_TARGET = TargetRef("Deployment", "ml", "embedding")


class RuleSpace(NamedTuple):
    """What `rule_st` draws each part of a rule from (immutable strategies, so a NamedTuple; `_replace` for a
    variant). The defaults: windows and periods short enough to expire within a trace of a few minutes,
    minReplicas >= 1 (a rule with minReplicas 0 scales to zero as KEDA does, not as the HPA's alpha
    HPAScaleToZero, which the HPA reference ports), a metric with no series failing, no fallback."""

    policy_values: st.SearchStrategy[int] = st.sampled_from([1, 2, 3, 4, 10, 25, 50, 100, 150, 200])
    periods: st.SearchStrategy[int] = st.sampled_from([5, 15, 30, 60, 120])
    windows: st.SearchStrategy[int] = st.sampled_from([0, 0, 15, 30, 60, 120, 300])
    selects: st.SearchStrategy[str] = st.sampled_from(["Max", "Max", "Min", "Disabled"])
    tolerances: st.SearchStrategy[float] = st.sampled_from([0.0, 0.1, 0.2])
    min_replicas: st.SearchStrategy[int] = st.integers(1, 4)
    max_replicas: int = 30
    """The largest maxReplicas drawn (it is at least minReplicas, and at least 1)."""
    targets: st.SearchStrategy[float] = st.sampled_from([1.0, 10.0, 80.0])
    when_empty: st.SearchStrategy[str] = st.just("fail")
    fallbacks: st.SearchStrategy[Fallback | None] = st.none()


SHORT = RuleSpace()
"""The default space (what the HPA parity tests draw from)."""


def scaling_st(space: RuleSpace = SHORT) -> st.SearchStrategy[ScalingRules]:
    """One direction of a random `behavior`: 1 to 3 policies."""
    policy = st.builds(ScalingPolicy, st.sampled_from(["Pods", "Percent"]), space.policy_values,
                       space.periods)
    return st.builds(ScalingRules, space.windows, space.selects, space.tolerances,
                     st.lists(policy, min_size=1, max_size=3).map(tuple))


@st.composite
def rule_st(draw: st.DrawFn, space: RuleSpace = SHORT) -> Rule:
    """A random rule of 1 to 3 metrics (m0, m1, ...; Average or Total) on RANDOM_TARGET."""
    low = draw(space.min_replicas)
    high = draw(st.integers(max(low, 1), space.max_replicas))
    metrics = tuple(
        MetricSpec(f"m{i}", "q", draw(st.sampled_from(["Average", "Total"])), draw(space.targets),
                   when_empty=draw(space.when_empty))  # type: ignore[arg-type]
        for i in range(draw(st.integers(1, 3)))
    )
    fallback = draw(space.fallbacks)
    behavior = Behavior(draw(scaling_st(space)), draw(scaling_st(space)))
    return Rule("r", RANDOM_TARGET, low, high, metrics, behavior, fallback, 1)
