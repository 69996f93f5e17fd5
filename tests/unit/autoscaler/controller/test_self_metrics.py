"""The self-metrics exposition: names, labels, one-hot reasons, removed rules disappear."""

from __future__ import annotations

from prometheus_client.parser import text_string_to_metric_families

from autoscaler.controller.self_metrics import ControllerMetrics
from autoscaler.policy import Reason
from tests.rules import rule, ruleset

CONTRACT = {
    "gpu_autoscaler_current_replicas",
    "gpu_autoscaler_desired_replicas",
    "gpu_autoscaler_min_replicas",
    "gpu_autoscaler_max_replicas",
    "gpu_autoscaler_metric_value",
    "gpu_autoscaler_metric_target",
    "gpu_autoscaler_metric_up",
    "gpu_autoscaler_decision_reason",
    "gpu_autoscaler_scale_events",
    "gpu_autoscaler_scale_errors",
    "gpu_autoscaler_query_errors",
    "gpu_autoscaler_sync_duration_seconds",
    "gpu_autoscaler_last_successful_sync_timestamp_seconds",
    "gpu_autoscaler_rule_last_successful_sync_timestamp_seconds",
    "gpu_autoscaler_rules_valid",
    "gpu_autoscaler_rules_loaded",
    "gpu_autoscaler_leader",
    "gpu_autoscaler_dry_run",
}


def parse(m: ControllerMetrics) -> dict[str, list[tuple[dict[str, str], float]]]:
    out: dict[str, list[tuple[dict[str, str], float]]] = {}
    for family in text_string_to_metric_families(m.exposition().decode()):
        for s in family.samples:
            out.setdefault(s.name, []).append((s.labels, s.value))
    return out


def test_every_contract_family_is_exposed_with_its_labels() -> None:
    rules = ruleset(rule("a"), rule("b"))
    m = ControllerMetrics(reasons=[r.value for r in Reason])
    m.set_rules(rules)
    a = rules.get("a")
    m.record_decision(a, 2, 4, "ScaleUpLimit", {"util": 95.0})
    m.rule_synced(a, 1000.0)
    m.scale_event(a, "up")
    m.scale_error(a, "Conflict")
    m.query_error(a, "util", "NoSeries")
    m.sync_finished(0.3, 1000.0)
    families = {f.name for f in text_string_to_metric_families(m.exposition().decode())}
    assert families >= CONTRACT
    samples = parse(m)
    assert ({"rule": "a", "namespace": "ml", "target": "a"}, 4.0) in samples[
        "gpu_autoscaler_desired_replicas"
    ]
    assert ({"rule": "a", "namespace": "ml", "target": "a", "direction": "up"}, 1.0) in samples[
        "gpu_autoscaler_scale_events_total"
    ]
    assert ({"rule": "a", "metric": "util", "reason": "NoSeries"}, 1.0) in samples[
        "gpu_autoscaler_query_errors_total"
    ]
    reasons = {
        labels["reason"]: v
        for labels, v in samples["gpu_autoscaler_decision_reason"]
        if labels["rule"] == "a"
    }
    assert reasons["ScaleUpLimit"] == 1 and sum(reasons.values()) == 1 and len(reasons) == len(Reason)
    assert ({"le": "0.5"}, 1.0) in samples["gpu_autoscaler_sync_duration_seconds_bucket"]
    assert ({"le": "0.25"}, 0.0) in samples["gpu_autoscaler_sync_duration_seconds_bucket"]
    # rule b has not synced yet: bounds and targets, no current/desired, no value
    assert not [s for s in samples["gpu_autoscaler_current_replicas"] if s[0]["rule"] == "b"]
    assert ({"rule": "b", "namespace": "ml", "target": "b"}, 10.0) in samples["gpu_autoscaler_max_replicas"]


def test_failed_metric_has_up_zero_and_no_value() -> None:
    rules = ruleset(rule("a"))
    m = ControllerMetrics()
    m.set_rules(rules)
    m.record_decision(rules.get("a"), 2, 2, "MetricsFailed", {"util": None})
    samples = parse(m)
    assert [v for _, v in samples["gpu_autoscaler_metric_up"]] == [0.0]
    assert "gpu_autoscaler_metric_value" not in samples


def test_removed_rules_disappear_and_kept_rules_keep_their_series() -> None:
    m = ControllerMetrics()
    m.set_rules(ruleset(rule("a"), rule("b")))
    m.record_decision(ruleset(rule("a")).get("a"), 3, 3, "WithinTolerance", {"util": 80.0})
    m.set_rules(ruleset(rule("a")))
    samples = parse(m)
    assert {labels["rule"] for labels, _ in samples["gpu_autoscaler_min_replicas"]} == {"a"}
    assert [v for _, v in samples["gpu_autoscaler_current_replicas"]] == [3.0]
    assert samples["gpu_autoscaler_rules_loaded"] == [({}, 1.0)]
