"""The controller's self-metrics: the one place naming every `gpu_autoscaler_*` series and its help text.

A custom collector on a private registry: the controller records plain numbers here, and every scrape builds
fresh families from them, so a removed rule's gauges disappear with it. Example output:

    gpu_autoscaler_desired_replicas{namespace="ml",rule="embed",target="embed"} 5.0
    gpu_autoscaler_decision_reason{namespace="ml",reason="ScaleUpLimit",rule="embed",target="embed"} 1.0
"""

from __future__ import annotations

import bisect
import threading
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector

from autoscaler.config.rules import RuleSet
from autoscaler.config.schedules import ScheduleBounds
from autoscaler.policy import Rule
from autoscaler.reasons import OutcomeReason, ScaleErrorReason
from plumbing.prometheus.answer import QueryErrorReason

RULE_LABELS = ("rule", "namespace", "target")
SYNC_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1.0, 2.0, 5.0, 10.0, 15.0, 30.0, 60.0)

HELP = {
    "current_replicas": "Replicas read from the target's scale subresource (spec.replicas) this sync.",
    "desired_replicas": "Replicas decided this sync (what the target is or would be patched to).",
    "min_replicas": "minReplicas in effect: the rule's, or an open schedule window's.",
    "max_replicas": "maxReplicas in effect: the rule's, or an open schedule window's.",
    "metric_value": "Last value returned by the metric's query (absent when the query failed).",
    "metric_target": "Target value of the metric (per replica for Total metrics).",
    "metric_up": "1 when the metric's last query returned one finite value, 0 when it failed.",
    "metric_effective_target": "The target the last decision used: the metric's target divided by the "
    "headroom its overloadBudget calls for; only for rules with an overloadBudget.",
    "learned_target": "The per-replica target the rule's slo learned for the metric from its latency "
    "history (used in mode scale, only published in mode observe; absent while none is learned).",
    "decision_reason": "1 for the reason of the rule's last decision, 0 for the other reasons.",
    "schedule_active": "1 while a schedule window of the rule is open (its bounds in effect), else 0; only "
    "for rules with schedules.",
    "capacity_free_gpus": "Free GPUs the rule's capacity query returned in the last sync (absent when it "
    "failed); only for rules with a capacity guard.",
    "capacity_limited": "1 when the capacity guard held back the rule's last decision, else 0; only for "
    "rules with a capacity guard.",
    "capacity_withheld_replicas": "Replicas the last decision wanted but the capacity guard held back.",
    "forecast_replicas": "Replicas the rule's forecast asks for: its metrics raised by the seasonal rise "
    "over the lead (absent before a complete earlier season); only for rules with a forecast.",
    "unschedulable_replicas": "Replicas of the target Pending as unschedulable in the last sync (any age; "
    "absent when they could not be listed); only for rules with a capacity guard.",
    "scale_events_total": "Scale patches applied, by direction (up/down).",
    "scale_errors_total": "Failed reads or patches of the target's scale, by reason (Conflict, NotFound, "
    "ApiError, Timeout, MalformedAnswer, NamespaceNotAllowed).",
    "query_errors_total": "Failed metric queries, by reason (NoSeries, MultipleSeries, NaN, Inf, Timeout, "
    "HTTPError, BadQuery, Unreachable, BadAnswer).",
    "sync_duration_seconds": "Duration in seconds of one full sync of all rules.",
    "last_successful_sync_timestamp_seconds": "Unix time of the last successful sync: it completed and at "
    "least one rule synced successfully (or no rule is loaded). Failed metrics do not make a sync fail.",
    "rule_last_successful_sync_timestamp_seconds": "Unix time of the rule's last successful sync: its scale "
    "was read and no patch it needed failed (also when its metrics failed).",
    "rules_valid": "1 if the rules file is valid; 0 when its last change was invalid (previous rules run).",
    "rules_loaded": "Number of rules running.",
    "leader": "1 when this replica acts (always 1 without --leader-elect).",
    "dry_run": "1 when running with --dry-run (decides and reports, never patches).",
}


def name(short: str) -> str:
    return f"gpu_autoscaler_{short}"


def rule_labels(rule: Rule) -> tuple[str, str, str]:
    return rule.name, rule.target.namespace, rule.target.name


@dataclass
class _RuleSeries:
    """What the last sync of one rule reported."""

    labels: tuple[str, str, str]
    min_replicas: int
    max_replicas: int
    targets: dict[str, float]
    current: int | None = None
    desired: int | None = None
    reason: OutcomeReason | None = None
    values: dict[str, float | None] = field(default_factory=dict)
    last_success: float | None = None
    guards: Guards | None = None
    """What the schedules and the capacity guard did in the last decision."""
    has_schedules: bool = False
    has_capacity: bool = False
    learned: dict[str, float] = field(default_factory=dict)
    """slo: the learned target of its metric (empty while none is learned)."""


@dataclass(frozen=True)
class Guards:
    """One decision's schedule window and capacity guard, as the gauges show them."""

    schedule: ScheduleBounds | None = None
    free_gpus: float | None = None
    withheld: int = 0
    limited: bool = False
    unschedulable: int | None = None
    effective_targets: tuple[tuple[str, float], ...] = ()
    """overloadBudget: each metric's target in the last decision (empty: the rule has no budget)."""
    forecast_replicas: int | None = None
    """forecast: the replicas it asked for in the last decision (None: no forecast yet, or none)."""


class ControllerMetrics(Collector):
    """Thread-safe store of the controller's numbers, collected on every scrape of its private registry."""

    def __init__(
        self, reasons: Sequence[OutcomeReason] = (), registry: CollectorRegistry | None = None
    ) -> None:
        self.reasons = tuple(reasons)
        self.registry = registry if registry is not None else CollectorRegistry(auto_describe=False)
        self._lock = threading.Lock()
        self._rules: dict[str, _RuleSeries] = {}
        self._scale_events: dict[tuple[str, ...], float] = {}
        self._scale_errors: dict[tuple[str, ...], float] = {}
        self._query_errors: dict[tuple[str, ...], float] = {}
        self._sync_buckets = [0] * (len(SYNC_BUCKETS) + 1)
        self._sync_sum = 0.0
        self._last_success: float | None = None
        self.rules_valid = True
        self.leader = True
        self.dry_run = False
        self.registry.register(self)

    def exposition(self) -> bytes:
        return generate_latest(self.registry)

    # --- recording -----------------------------------------------------------------------------------------
    def set_rules(self, rules: RuleSet) -> None:
        """Track exactly these rules; series of removed rules disappear, those of kept rules stay."""
        with self._lock:
            kept = {}
            for rule in rules.rules:
                series = _RuleSeries(
                    rule_labels(rule),
                    rule.min_replicas,
                    rule.max_replicas,
                    {m.name: m.target for m in rule.metrics},
                )
                old = self._rules.get(rule.name)
                if old is not None and old.labels == series.labels:
                    series.current, series.desired, series.reason = old.current, old.desired, old.reason
                    series.values = {k: v for k, v in old.values.items() if k in series.targets}
                    series.last_success = old.last_success
                    series.guards = old.guards
                    if rule.slo is not None:
                        series.learned = {k: v for k, v in old.learned.items() if k == rule.slo.learn}
                series.has_schedules, series.has_capacity = bool(rule.schedules), rule.capacity is not None
                kept[rule.name] = series
            self._rules = kept

    def record_decision(
        self,
        rule: Rule,
        current: int | None,
        desired: int | None,
        reason: OutcomeReason,
        values: dict[str, float | None],
    ) -> None:
        with self._lock:
            series = self._rules.get(rule.name)
            if series is None:
                return
            series.current, series.desired, series.reason = current, desired, reason
            series.values = dict(values)

    def record_guards(self, rule: Rule, guards: Guards) -> None:
        with self._lock:
            series = self._rules.get(rule.name)
            if series is not None:
                series.guards = guards

    def record_learned(self, rule: Rule, metric: str, target: float | None) -> None:
        with self._lock:
            series = self._rules.get(rule.name)
            if series is not None:
                series.learned = {} if target is None else {metric: target}

    def rule_synced(self, rule: Rule, timestamp: float) -> None:
        with self._lock:
            series = self._rules.get(rule.name)
            if series is not None:
                series.last_success = timestamp

    def scale_event(self, rule: Rule, direction: str) -> None:
        self._inc(self._scale_events, (*rule_labels(rule), direction))

    def scale_error(self, rule: Rule, reason: ScaleErrorReason) -> None:
        self._inc(self._scale_errors, (*rule_labels(rule), reason))

    def query_error(self, rule: Rule, metric: str, reason: QueryErrorReason) -> None:
        self._inc(self._query_errors, (rule.name, metric, reason))

    def _inc(self, store: dict[tuple[str, ...], float], key: tuple[str, ...]) -> None:
        with self._lock:
            store[key] = store.get(key, 0.0) + 1.0

    def sync_finished(self, duration: float, succeeded_at: float | None) -> None:
        with self._lock:
            self._sync_buckets[bisect.bisect_left(SYNC_BUCKETS, duration)] += 1
            self._sync_sum += duration
            if succeeded_at is not None:
                self._last_success = succeeded_at

    # --- collection ----------------------------------------------------------------------------------------
    def collect(self) -> Iterator[Metric]:
        with self._lock:
            rules = list(self._rules.values())
            scale_events = dict(self._scale_events)
            scale_errors = dict(self._scale_errors)
            query_errors = dict(self._query_errors)
            buckets = list(self._sync_buckets)
            sync_sum, last_success = self._sync_sum, self._last_success
        yield from self._rule_families(rules)
        yield _counter("scale_events_total", [*RULE_LABELS, "direction"], scale_events)
        yield _counter("scale_errors_total", [*RULE_LABELS, "reason"], scale_errors)
        yield _counter("query_errors_total", ["rule", "metric", "reason"], query_errors)
        histogram = HistogramMetricFamily(name("sync_duration_seconds"), HELP["sync_duration_seconds"])
        cumulative, pairs = 0, []
        for bound, count in zip([*map(str, SYNC_BUCKETS), "+Inf"], buckets, strict=True):
            cumulative += count
            pairs.append((bound, cumulative))
        histogram.add_metric([], pairs, sync_sum)
        yield histogram
        if last_success is not None:
            yield _gauge("last_successful_sync_timestamp_seconds", last_success)
        yield _gauge("rules_valid", 1.0 if self.rules_valid else 0.0)
        yield _gauge("rules_loaded", float(len(rules)))
        yield _gauge("leader", 1.0 if self.leader else 0.0)
        yield _gauge("dry_run", 1.0 if self.dry_run else 0.0)

    def _rule_families(self, rules: Iterable[_RuleSeries]) -> Iterator[Metric]:
        fams = {
            short: GaugeMetricFamily(name(short), HELP[short], labels=list(RULE_LABELS))
            for short in (
                "current_replicas",
                "desired_replicas",
                "min_replicas",
                "max_replicas",
                "rule_last_successful_sync_timestamp_seconds",
            )
        }
        per_metric = {
            short: GaugeMetricFamily(name(short), HELP[short], labels=[*RULE_LABELS, "metric"])
            for short in ("metric_value", "metric_target", "metric_up", "metric_effective_target",
                          "learned_target")
        }
        reasons = GaugeMetricFamily(
            name("decision_reason"), HELP["decision_reason"], labels=[*RULE_LABELS, "reason"]
        )
        guards = {
            short: GaugeMetricFamily(name(short), HELP[short], labels=list(RULE_LABELS))
            for short in ("schedule_active", "capacity_free_gpus", "capacity_limited",
                          "capacity_withheld_replicas", "unschedulable_replicas", "forecast_replicas")
        }
        for s in rules:
            labels = list(s.labels)
            window = s.guards.schedule if s.guards is not None else None
            fams["min_replicas"].add_metric(labels, s.min_replicas if window is None else window.min_replicas)
            top = s.max_replicas if window is None or window.max_replicas is None else window.max_replicas
            fams["max_replicas"].add_metric(labels, top)
            _add_guards(guards, labels, s)
            if s.current is not None:
                fams["current_replicas"].add_metric(labels, s.current)
            if s.desired is not None:
                fams["desired_replicas"].add_metric(labels, s.desired)
            if s.last_success is not None:
                fams["rule_last_successful_sync_timestamp_seconds"].add_metric(labels, s.last_success)
            for metric, target in s.targets.items():
                per_metric["metric_target"].add_metric([*labels, metric], target)
                if metric in s.values:
                    value = s.values[metric]
                    per_metric["metric_up"].add_metric([*labels, metric], 0.0 if value is None else 1.0)
                    if value is not None:
                        per_metric["metric_value"].add_metric([*labels, metric], value)
            for metric, target in s.guards.effective_targets if s.guards is not None else ():
                per_metric["metric_effective_target"].add_metric([*labels, metric], target)
            for metric, target in s.learned.items():
                per_metric["learned_target"].add_metric([*labels, metric], target)
            if s.reason is not None:
                for reason in dict.fromkeys([*self.reasons, s.reason]):
                    reasons.add_metric([*labels, reason], 1.0 if reason == s.reason else 0.0)
        yield from fams.values()
        yield from per_metric.values()
        yield reasons
        yield from guards.values()


def _add_guards(families: dict[str, GaugeMetricFamily], labels: list[str], s: _RuleSeries) -> None:
    """The schedule and capacity gauges of one rule: present for the rules that have them, once decided."""
    g = s.guards
    if g is None:
        return
    if g.forecast_replicas is not None:
        families["forecast_replicas"].add_metric(labels, g.forecast_replicas)
    if s.has_schedules:
        families["schedule_active"].add_metric(labels, 0.0 if g.schedule is None else 1.0)
    if not s.has_capacity:
        return
    families["capacity_limited"].add_metric(labels, 1.0 if g.limited else 0.0)
    families["capacity_withheld_replicas"].add_metric(labels, g.withheld)
    if g.free_gpus is not None:
        families["capacity_free_gpus"].add_metric(labels, g.free_gpus)
    if g.unschedulable is not None:
        families["unschedulable_replicas"].add_metric(labels, g.unschedulable)


def _counter(short: str, labels: list[str], values: dict[tuple[str, ...], float]) -> CounterMetricFamily:
    family = CounterMetricFamily(name(short.removesuffix("_total")), HELP[short], labels=labels)
    for key, value in sorted(values.items()):
        family.add_metric(list(key), value)
    return family


def _gauge(short: str, value: float) -> GaugeMetricFamily:
    return GaugeMetricFamily(name(short), HELP[short], value=value)
