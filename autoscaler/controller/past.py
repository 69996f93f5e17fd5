"""A rule's past read back from Prometheus: the minute loads its overload budget and forecast need.

Both learn from the last day (or seasons) of the rule's own load, kept in the controller's memory. A new
rule, a restart or a leader failover would otherwise run on the given targets for an hour and without a
forecast for a whole season. So once per rule the controller asks Prometheus for the past of each metric's
query (a range query, one point a minute, bounded by the range reader's limits and the query timeout) and,
for an `Average` metric, the replicas it recorded itself (`gpu_autoscaler_current_replicas` of the leader),
and seeds the series with it. One rule is read per sync, each of its range requests within the query
timeout, so a slow Prometheus delays a sync by that rule's few requests at most; a failed read is logged
and tried again after `RETRY_SECONDS`, the rule learning in memory meanwhile.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, replace

from autoscaler.policy import Rule, RuleHistory
from autoscaler.policy import budget as headroom
from autoscaler.policy import forecast as seasonal
from autoscaler.policy.minutes import load_of, minute_of, seeded
from plumbing.prometheus.errors import PrometheusClientError
from plumbing.prometheus.runner import HistorySource

__all__ = ["RETRY_SECONDS", "PastRead", "needs_past", "read_past", "recorded_query", "try_read_past"]

log = logging.getLogger(__name__)

RETRY_SECONDS = 300.0
RECORDED_REPLICAS = "gpu_autoscaler_current_replicas"


@dataclass
class PastRead:
    """Whether a rule's past was read (`done`) and when it was last tried."""

    done: bool = False
    tried: float | None = None

    def due(self, now: float) -> bool:
        return not self.done and (self.tried is None or now - self.tried >= RETRY_SECONDS)


def needs_past(rule: Rule) -> bool:
    return rule.forecast is not None or rule.overload_budget is not None


def recorded_query(rule: Rule) -> str:
    """The replicas the running controller recorded, read from the replica that led at each step (one that
    lost its lease keeps showing its last count, as the shipped alert rules know)."""
    return (f'max({RECORDED_REPLICAS}{{rule="{rule.name}",namespace="{rule.target.namespace}",'
            f'target="{rule.target.name}"}} and on (instance) (gpu_autoscaler_leader == 1))')


def read_past(rule: Rule, source: HistorySource, history: RuleHistory, now: float) -> RuleHistory:
    """`history` with its minute series seeded from Prometheus (PrometheusClientError when it cannot be
    read: the caller tries again later)."""
    wanted = max(headroom.kept_minutes(rule.overload_budget) if rule.overload_budget else 0,
                 seasonal.kept_minutes(rule.forecast) if rule.forecast else 0)
    last = minute_of(now) - 1  # the last whole minute: the current one is the syncs' own
    start = (last - wanted + 1) * 60.0
    end = last * 60.0
    replicas: dict[float, float | None] = {}
    if any(m.type == "Average" for m in rule.metrics):
        replicas = source.run_range(recorded_query(rule), start, end, 60.0).values
    past: dict[str, list[float | None]] = {}
    for metric in rule.metrics:
        values = source.run_range(metric.query, start, end, 60.0).values
        loads: list[float | None] = []
        for minute in range(last - wanted + 1, last + 1):
            t = minute * 60.0
            count = replicas.get(t)
            current = round(count) if count is not None else 0
            known = metric.type == "Total" or count is not None
            loads.append(load_of(metric, values.get(t), current) if known else None)
        past[metric.name] = loads
    if rule.overload_budget is not None:
        budget = rule.overload_budget
        history = replace(history, budget=seeded(rule.metrics, history.budget, past, last,
                                                 headroom.kept_minutes(budget), headroom.derivation(budget)))
    if rule.forecast is not None:
        forecast = rule.forecast
        history = replace(history, forecast=seeded(rule.metrics, history.forecast, past, last,
                                                   seasonal.kept_minutes(forecast),
                                                   seasonal.derivation(forecast)))
    return history


def try_read_past(rule: Rule, source: HistorySource | None, history: RuleHistory, read: PastRead,
                  now: float) -> RuleHistory:
    """`read_past`, its failure logged (and tried again later), never raised."""
    if source is None:  # a source that cannot read the past (a test's fake): the rule learns in memory
        read.done = True
        return history
    read.tried = now
    try:
        history = read_past(rule, source, history, now)
    except PrometheusClientError as e:
        log.warning("rule %s: cannot read its past from Prometheus (%s); it learns from its own syncs, "
                    "and the read is tried again in %.0f s", rule.name, e, RETRY_SECONDS)
        return history
    read.done = True
    return history
