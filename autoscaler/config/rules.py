"""The rules file loader: YAML in, validated `autoscaler.policy.spec` values out, so everything downstream
(engine, controller) trusts them.

The `behavior` block has the fields, defaults and validation of the autoscaling/v2 HPA API. `parse_rules`
gathers every problem in the file (with its line) and raises one `RulesError` listing them all.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import cast

from yaml.nodes import Node, ScalarNode

from autoscaler.config.budget import parse_overload_budget
from autoscaler.config.deletion_cost import parse_pod_deletion_cost
from autoscaler.config.forecast import parse_forecast
from autoscaler.config.panic import parse_panic, with_panic_queries
from autoscaler.config.schedules import MAX_SCHEDULES_PER_FILE, parse_schedules
from autoscaler.config.slo import parse_slo
from autoscaler.config.targets import parse_target
from autoscaler.errors import Problem, RulesError
from autoscaler.policy.spec import (
    DEFAULT_BEHAVIOR,
    DEFAULT_COOLDOWN_SECONDS,
    DEFAULT_PENDING_GRACE_SECONDS,
    DEFAULT_SCALE_DOWN,
    DEFAULT_SCALE_UP,
    Behavior,
    Capacity,
    Fallback,
    MetricSpec,
    MetricType,
    PolicyType,
    Rule,
    ScalingPolicy,
    ScalingRules,
    Schedule,
    SelectPolicy,
    TargetRef,
    WhenEmpty,
)
from plumbing import yamlsafe
from plumbing.prometheus.syntax import normal_form
from plumbing.yamlnodes import NodeReader, describe, line_of

__all__ = ["Problem", "RuleSet", "RulesError", "load_rules", "parse_rules", "parse_rules_bytes",
           "read_rules_bytes"]

MAX_WINDOW_SECONDS = 3600  # HPA API: stabilizationWindowSeconds in [0, 3600]
MAX_PERIOD_SECONDS = 1800  # HPA API: periodSeconds in (0, 1800]
MAX_INT32 = 2**31 - 1  # HPA API: replica counts, policy values and thresholds are int32
MAX_TOLERANCE = 10.0  # 1000 %: beyond it a direction never scales; larger is a typo, not a policy
MAX_TARGET = 1e15  # far above any per-replica target; keeps target x replicas finite and exact
MAX_COOLDOWN_SECONDS = 7 * 86_400  # a week: longer is a typo (seconds for minutes), not a cooldown
MAX_PENDING_GRACE_SECONDS = 86_400
MAX_PRIORITY = 1_000_000  # Kubernetes' user PriorityClass values go to a billion; ordering needs far fewer
MAX_GPUS_PER_REPLICA = 4096  # a multi-node replica (LeaderWorkerSet) of 512 nodes of 8 GPUs
RULES_LIMITS = yamlsafe.YamlLimits()  # 4 MiB, 64 deep, 250,000 nodes, 1,000,000 expanded, 64-char numbers

_NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")


@dataclass(frozen=True, slots=True)
class RuleSet:
    path: str
    rules: tuple[Rule, ...]

    def get(self, name: str) -> Rule:
        """The rule called `name`; KeyError names the rules that exist."""
        for rule in self.rules:
            if rule.name == name:
                return rule
        raise KeyError(f"no rule named {name!r} in {self.path} (rules: {', '.join(self.names)})")

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(rule.name for rule in self.rules)


def load_rules(path: str | Path) -> RuleSet:
    """Read and parse a rules file; an unreadable, too large or non-UTF-8 file is a RulesError too."""
    return parse_rules_bytes(read_rules_bytes(path), str(path))


def read_rules_bytes(path: str | Path) -> bytes:
    """A rules file's bytes, read no further than the size limit (a 50 GB file costs one bounded read); an
    unreadable or too large file is a RulesError."""
    try:
        return yamlsafe.read_bytes(path, RULES_LIMITS, "rules file")
    except yamlsafe.YamlFileError as exc:
        raise _file_error(exc, "file") from exc


def parse_rules_bytes(raw: bytes, path: str) -> RuleSet:
    """`parse_rules` of a file's bytes: text that is not UTF-8 is a RulesError naming the line."""
    try:
        text = yamlsafe.decode(raw, path)
    except yamlsafe.YamlFileError as exc:
        raise _file_error(exc, "file") from exc
    return parse_rules(text, path)


def parse_rules(text: str, path: str) -> RuleSet:
    """Parse and validate a rules file; raises RulesError listing every problem found.

    The YAML is read by `plumbing.yamlsafe` (bounded in size, depth, nodes, alias expansion and number
    length), so a hostile file is one RulesError too, never a hang or a traceback: hot reload relies on it.
    """
    try:
        root = yamlsafe.compose(text, path, RULES_LIMITS)
    except yamlsafe.YamlFileError as exc:
        raise _file_error(exc, "yaml") from exc
    if root is None:
        raise RulesError([Problem(path, 1, "rules",
                                  "the file is empty (expected a top-level 'rules:' list)")])
    reader = NodeReader(path)
    rules = _parse_root(reader, root)
    if reader.problems:
        raise RulesError(sorted(reader.problems, key=lambda p: p.line))
    return RuleSet(path, tuple(rules))


def _file_error(exc: yamlsafe.YamlFileError, field: str) -> RulesError:
    return RulesError([Problem(exc.path, exc.line, field, exc.message)])


def _parse_root(reader: NodeReader, root: Node) -> list[Rule]:
    top = reader.mapping(root, "", {"rules"}, required={"rules"})
    if top is None or "rules" not in top:
        return []
    items = reader.sequence(top["rules"], "rules")
    if items is None:
        return []
    if not items:
        reader.problem(line_of(top["rules"]), "rules", "expected at least one rule (got an empty list)")
    rules: list[Rule] = []
    seen: dict[str, int] = {}
    targets: dict[TargetRef, tuple[str, int]] = {}
    for index, node in enumerate(items):
        rule, name, target = _parse_rule(reader, node, f"rules[{index}]")
        if target is not None:
            if target.ref in targets:  # the HPA sets AmbiguousSelector, KEDA's webhook refuses the second
                first, line = targets[target.ref]
                reader.problem(target.line, f"rules[{index}].target",
                               f"{target.ref} is already the target of rule {first!r} (line {line}): two "
                               "rules on one workload would take turns scaling it")
                rule = None
            else:
                targets[target.ref] = (name or f"rules[{index}]", line_of(node))
        if name is not None:
            if name in seen:
                reader.problem(line_of(node), f"rules[{index}].name",
                               f"duplicate rule name {name!r} (first defined on line {seen[name]})")
                continue
            seen[name] = line_of(node)
        if rule is not None:
            rules.append(rule)
    windows = sum(len(rule.schedules) for rule in rules)
    if windows > MAX_SCHEDULES_PER_FILE:
        reader.problem(line_of(top["rules"]), "rules",
                       f"expected at most {MAX_SCHEDULES_PER_FILE} schedules in one file (got {windows}): "
                       "every sync evaluates them all; one cron line covers many windows ('0 9 * * 1-5')")
    return rules


@dataclass(frozen=True, slots=True)
class _TargetAt:
    """A readable target and the line it is written on."""

    ref: TargetRef
    line: int


_RULE_FIELDS = {"name", "target", "minReplicas", "maxReplicas", "metrics", "behavior", "fallback",
                "prometheus", "schedules", "cooldownSeconds", "capacity", "batch", "overloadBudget",
                "priority", "forecast", "slo", "podDeletionCost"}


def _parse_rule(
    reader: NodeReader, node: Node, where: str
) -> tuple[Rule | None, str | None, _TargetAt | None]:
    """The rule (None if invalid), its name and target (when readable, to detect duplicates even in invalid
    rules)."""
    before = len(reader.problems)
    fields = reader.mapping(node, where, _RULE_FIELDS, required=("name", "target", "maxReplicas", "metrics"))
    if fields is None:
        return None, None, None
    name = _name(reader, fields["name"], f"{where}.name") if "name" in fields else None
    target = parse_target(reader, fields["target"], f"{where}.target") if "target" in fields else None
    min_replicas: int | None = 1
    if "minReplicas" in fields:
        min_replicas = reader.integer(fields["minReplicas"], f"{where}.minReplicas", low=0, high=MAX_INT32)
    max_replicas = None
    if "maxReplicas" in fields:
        max_replicas = reader.integer(fields["maxReplicas"], f"{where}.maxReplicas", low=1, high=MAX_INT32)
    if min_replicas is not None and max_replicas is not None and min_replicas > max_replicas:
        reader.problem(line_of(fields["maxReplicas"]), f"{where}.maxReplicas",
                       f"expected maxReplicas >= minReplicas (got {max_replicas} < {min_replicas})")
    metrics = _parse_metrics(reader, fields["metrics"], f"{where}.metrics") if "metrics" in fields else ()
    behavior = DEFAULT_BEHAVIOR
    if "behavior" in fields:
        behavior = _parse_behavior(reader, fields["behavior"], f"{where}.behavior")
    fallback = None
    if "fallback" in fields:
        fallback = _parse_fallback(reader, fields["fallback"], f"{where}.fallback")
    prometheus = "default"
    if "prometheus" in fields:
        prometheus = _name(reader, fields["prometheus"], f"{where}.prometheus") or "default"
    schedules: tuple[Schedule, ...] = ()
    if "schedules" in fields:
        schedules = parse_schedules(reader, fields["schedules"], f"{where}.schedules", max_replicas)
    cooldown = DEFAULT_COOLDOWN_SECONDS
    if "cooldownSeconds" in fields:
        cooldown = reader.integer(fields["cooldownSeconds"], f"{where}.cooldownSeconds",
                                  low=0, high=MAX_COOLDOWN_SECONDS) or 0
    if min_replicas:
        _zero_only(reader, fields, metrics, where, min_replicas)
    capacity = None
    if "capacity" in fields:
        capacity = _parse_capacity(reader, fields["capacity"], f"{where}.capacity")
    batch = _boolean(reader, fields["batch"], f"{where}.batch") if "batch" in fields else True
    priority = 0
    if "priority" in fields:
        priority = reader.integer(fields["priority"], f"{where}.priority", low=-MAX_PRIORITY,
                                  high=MAX_PRIORITY) or 0
    budget = None
    if "overloadBudget" in fields:
        budget = parse_overload_budget(reader, fields["overloadBudget"], f"{where}.overloadBudget")
    forecast = None
    if "forecast" in fields:
        forecast = parse_forecast(reader, fields["forecast"], f"{where}.forecast",
                                  budget.startup_seconds if budget is not None else None)
    slo = parse_slo(reader, fields["slo"], f"{where}.slo", metrics) if "slo" in fields else None
    deletion_cost = None
    if "podDeletionCost" in fields:
        deletion_cost = parse_pod_deletion_cost(reader, fields["podDeletionCost"], f"{where}.podDeletionCost",
                                                target)
    target_at = None if target is None else _TargetAt(target, line_of(fields["target"]))
    if len(reader.problems) > before or name is None or target is None:
        return None, name, target_at
    assert min_replicas is not None and max_replicas is not None
    rule = Rule(name, target, min_replicas, max_replicas, with_panic_queries(metrics, behavior.panic),
                behavior, fallback, line_of(node), prometheus, schedules, cooldown, capacity,
                batch=batch is not False, overload_budget=budget, priority=priority, forecast=forecast,
                slo=slo, pod_deletion_cost=deletion_cost)
    return rule, name, target_at


def _boolean(reader: NodeReader, node: Node, where: str) -> bool | None:
    if isinstance(node, ScalarNode) and node.tag.endswith(":bool"):
        return str(node.value).lower() in ("true", "yes", "on")
    reader.problem(line_of(node), where, f"expected true or false (got {describe(node)})")
    return None


def _zero_only(reader: NodeReader, fields: dict[str, Node], metrics: tuple[MetricSpec, ...], where: str,
               min_replicas: int) -> None:
    """cooldownSeconds and activationTarget act only between 0 and 1: on a rule that never goes to zero they
    would be silently ignored, so they are a mistake to explain."""
    why = ("applies only to a rule that scales to zero (minReplicas: 0); this rule has minReplicas "
           f"{min_replicas}")
    if "cooldownSeconds" in fields:
        reader.problem(line_of(fields["cooldownSeconds"]), f"{where}.cooldownSeconds", why)
    for index, metric in enumerate(metrics):
        if metric.activation_target:
            reader.problem(metric.line, f"{where}.metrics[{index}].activationTarget", why)


def _parse_capacity(reader: NodeReader, node: Node, where: str) -> Capacity | None:
    fields = reader.mapping(node, where, {"query", "gpusPerReplica", "pendingGraceSeconds"},
                            required=("query", "gpusPerReplica"))
    if fields is None:
        return None
    query = reader.string(fields["query"], f"{where}.query") if "query" in fields else None
    gpus = None
    if "gpusPerReplica" in fields:
        gpus = reader.integer(fields["gpusPerReplica"], f"{where}.gpusPerReplica", low=1,
                              high=MAX_GPUS_PER_REPLICA)
    grace = DEFAULT_PENDING_GRACE_SECONDS
    if "pendingGraceSeconds" in fields:
        grace = reader.integer(fields["pendingGraceSeconds"], f"{where}.pendingGraceSeconds",
                               low=0, high=MAX_PENDING_GRACE_SECONDS) or 0
    if query is None or gpus is None:
        return None
    return Capacity(query.strip(), gpus, grace, line_of(node), pool=normal_form(query))


def _name(reader: NodeReader, node: Node, where: str) -> str | None:
    value = reader.string(node, where)
    if value is not None and not _NAME_RE.fullmatch(value):
        reader.problem(line_of(node), where,
                       "expected letters, digits, '-', '_' or '.', starting with a letter or digit "
                       f"(got {value!r})")
        return None
    return value


RESERVED_METRIC_NAMES = {
    "t": "it is the time column of simulate traces",
    "capacity": "it is the free-GPU column of simulate traces and the capacity query's metric label",
}
_METRIC_FIELDS = {"name", "query", "type", "target", "activationTarget", "whenEmpty"}


def _parse_metrics(reader: NodeReader, node: Node, where: str) -> tuple[MetricSpec, ...]:
    items = reader.sequence(node, where)
    if items is None:
        return ()
    if not items:
        reader.problem(line_of(node), where, "expected at least one metric (got an empty list)")
    metrics: list[MetricSpec] = []
    seen: dict[str, int] = {}
    for index, item in enumerate(items):
        at = f"{where}[{index}]"
        fields = reader.mapping(item, at, _METRIC_FIELDS, required=("name", "query", "type", "target"))
        if fields is None:
            continue
        name = _name(reader, fields["name"], f"{at}.name") if "name" in fields else None
        if name in RESERVED_METRIC_NAMES:
            reader.problem(line_of(fields["name"]), f"{at}.name", f"{name!r} is reserved "
                           f"({RESERVED_METRIC_NAMES[name]})")
            name = None
        if name is not None:
            if name in seen:
                reader.problem(line_of(fields["name"]), f"{at}.name",
                               f"duplicate metric name {name!r} (first defined on line {seen[name]})")
                name = None
            else:
                seen[name] = line_of(item)
        query = reader.string(fields["query"], f"{at}.query") if "query" in fields else None
        type_ = None
        if "type" in fields:
            type_ = reader.choice(fields["type"], f"{at}.type", ("Average", "Total"))
        target = None
        if "target" in fields:
            target = reader.number(fields["target"], f"{at}.target", above=0, high=MAX_TARGET)
        activation: float | None = 0.0
        if "activationTarget" in fields:
            activation = reader.number(fields["activationTarget"], f"{at}.activationTarget", low=0,
                                       high=MAX_TARGET)
        when_empty: str | None = "fail"
        if "whenEmpty" in fields:
            when_empty = reader.choice(fields["whenEmpty"], f"{at}.whenEmpty", ("fail", "zero"))
        if name is None or query is None or type_ is None or target is None or activation is None \
                or when_empty is None:
            continue
        metrics.append(MetricSpec(name, query.strip(), cast(MetricType, type_), target, line_of(item),
                                  activation, cast(WhenEmpty, when_empty)))
    return tuple(metrics)


def _parse_behavior(reader: NodeReader, node: Node, where: str) -> Behavior:
    fields = reader.mapping(node, where, {"scaleUp", "scaleDown", "panic"})
    if fields is None:
        return DEFAULT_BEHAVIOR
    up = DEFAULT_SCALE_UP
    down = DEFAULT_SCALE_DOWN
    if "scaleUp" in fields:
        up = _parse_scaling_rules(reader, fields["scaleUp"], f"{where}.scaleUp", DEFAULT_SCALE_UP)
    if "scaleDown" in fields:
        down = _parse_scaling_rules(reader, fields["scaleDown"], f"{where}.scaleDown", DEFAULT_SCALE_DOWN)
    panic = parse_panic(reader, fields["panic"], f"{where}.panic") if "panic" in fields else None
    return Behavior(up, down, panic)


_SCALING_FIELDS = {"stabilizationWindowSeconds", "selectPolicy", "tolerance", "policies"}


def _parse_scaling_rules(reader: NodeReader, node: Node, where: str, default: ScalingRules) -> ScalingRules:
    fields = reader.mapping(node, where, _SCALING_FIELDS)
    if fields is None:
        return default
    window = default.stabilization_window_seconds
    if "stabilizationWindowSeconds" in fields:
        window = reader.integer(fields["stabilizationWindowSeconds"], f"{where}.stabilizationWindowSeconds",
                                low=0, high=MAX_WINDOW_SECONDS) or 0
    select = default.select_policy
    if "selectPolicy" in fields:
        select = cast(SelectPolicy, reader.choice(fields["selectPolicy"], f"{where}.selectPolicy",
                                                  ("Max", "Min", "Disabled")) or "Max")
    tolerance = default.tolerance
    if "tolerance" in fields:
        tolerance = reader.number(fields["tolerance"], f"{where}.tolerance", low=0, high=MAX_TOLERANCE) or 0.0
    policies = default.policies
    if "policies" in fields:
        policies = _parse_policies(reader, fields["policies"], f"{where}.policies")
    return ScalingRules(window, select, tolerance, policies)


def _parse_policies(reader: NodeReader, node: Node, where: str) -> tuple[ScalingPolicy, ...]:
    items = reader.sequence(node, where)
    if items is None:
        return ()
    if not items:
        reader.problem(line_of(node), where, "expected at least one policy (got an empty list)")
    policies: list[ScalingPolicy] = []
    for index, item in enumerate(items):
        at = f"{where}[{index}]"
        fields = reader.mapping(item, at, {"type", "value", "periodSeconds"},
                                required=("type", "value", "periodSeconds"))
        if fields is None:
            continue
        type_ = reader.choice(fields["type"], f"{at}.type", ("Pods", "Percent")) if "type" in fields else None
        value = None
        if "value" in fields:
            value = reader.integer(fields["value"], f"{at}.value", low=1, high=MAX_INT32)
        period = None
        if "periodSeconds" in fields:
            period = reader.integer(fields["periodSeconds"], f"{at}.periodSeconds",
                                    low=1, high=MAX_PERIOD_SECONDS)
        if type_ is not None and value is not None and period is not None:
            policies.append(ScalingPolicy(cast(PolicyType, type_), value, period))
    return tuple(policies)


def _parse_fallback(reader: NodeReader, node: Node, where: str) -> Fallback | None:
    fields = reader.mapping(node, where, {"failureThreshold", "replicas"},
                            required=("failureThreshold", "replicas"))
    if fields is None:
        return None
    threshold = replicas = None
    if "failureThreshold" in fields:
        threshold = reader.integer(fields["failureThreshold"], f"{where}.failureThreshold",
                                   low=1, high=MAX_INT32)
    if "replicas" in fields:
        replicas = reader.integer(fields["replicas"], f"{where}.replicas", low=0, high=MAX_INT32)
    if threshold is None or replicas is None:
        return None
    return Fallback(threshold, replicas)

