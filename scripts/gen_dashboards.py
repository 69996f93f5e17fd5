#!/usr/bin/env python3
"""Generate the three Grafana dashboards in dashboards/ from one description, so they stay consistent.

    python scripts/gen_dashboards.py           # rewrite dashboards/*.json
    python scripts/gen_dashboards.py --check   # exit 1 if a committed dashboard is out of date

Every dashboard is the bare dashboard object (what file provisioning and "Import" both accept), without `id`,
with a stable lowercase uid and schemaVersion 39; every panel and every target uses the `${datasource}`
template variable (not an `__inputs` placeholder, which provisioning leaves unresolved:
grafana/grafana#10786),
and every panel has a unit. The output type-checks against Grafana's own `Dashboard` type (@grafana/schema):
tests/unit/shipping/test_dashboard_schema.py.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
OUT_DIR = ROOT / "dashboards"
SCHEMA_VERSION = 39
DATASOURCE = {"type": "prometheus", "uid": "${datasource}"}
LEADER = "and on (instance) (gpu_autoscaler_leader == 1)"


@dataclass(frozen=True)
class Query:
    expr: str
    legend: str = ""


@dataclass(frozen=True)
class Panel:
    """One panel: `kind` is a Grafana panel type; `width` in grid units (24 per row)."""

    title: str
    kind: str
    unit: str
    queries: tuple[Query, ...]
    description: str = ""
    width: int = 12
    height: int = 8


@dataclass(frozen=True)
class Variable:
    name: str
    label: str
    query: str


@dataclass(frozen=True)
class Dashboard:
    uid: str
    title: str
    description: str
    variables: tuple[Variable, ...]
    panels: tuple[Panel, ...]


def q(expr: str, legend: str = "") -> Query:
    return Query(expr, legend)


GPU_SEL = 'node=~"$node", gpu=~"$gpu"'
GPU_LEGEND = "{{node}} GPU {{gpu}}"

PROFILING = (
    ("SM active", "gpu_sm_active_ratio",
     "Fraction of cycles an SM had at least one warp assigned, averaged over the SMs (DCGM's "
     "PROF_SM_ACTIVE). Unlike utilization, a kernel on few SMs reads low."),
    ("Tensor pipe active", "gpu_tensor_active_ratio",
     "Fraction of cycles the tensor (HMMA) pipes were busy (DCGM's PROF_PIPE_TENSOR_ACTIVE): the work "
     "inference and training kernels are made of."),
    ("DRAM active", "gpu_dram_active_ratio",
     "Fraction of cycles the device memory interface was sending or receiving (DCGM's PROF_DRAM_ACTIVE): "
     "high with low tensor activity means memory-bound kernels."),
)
PROFILING_PANELS = tuple(
    [Panel(f"{title} per GPU", "timeseries", "percentunit",
           (q(f"{name}{{{GPU_SEL}}}", GPU_LEGEND + " {{gpu_instance_id}}"),), description=text, width=8)
     for title, name, text in PROFILING]
    + [Panel(f"{title} per pod", "timeseries", "percentunit",
             (q(f'avg by (namespace, pod) ({name}{{{GPU_SEL}, pod!=""}})', "{{namespace}}/{{pod}}"),),
             description=f"Average over the GPUs (or MIG instances) the pod holds alone. {text}", width=8)
       for title, name, text in PROFILING])

FLEET = Dashboard(
    uid="gpu-autoscaler-fleet",
    title="GPU fleet",
    description="Every GPU per node: utilization, memory, temperature, power and energy, clocks and "
                "throttling, "
                "ECC and XID errors, health state and availability.",
    variables=(Variable("node", "Node", "label_values(gpu_up, node)"),
               Variable("gpu", "GPU", 'label_values(gpu_up{node=~"$node"}, gpu)')),
    panels=(
        Panel("GPUs up", "stat", "short", (q(f"sum(gpu_up{{{GPU_SEL}}})"),), width=4, height=4,
              description="GPUs answering NVML."),
        Panel("GPUs allocated", "stat", "short",
              (q('count(count by (node, uuid) (gpu_allocation_info{node=~"$node", gpu=~"$gpu"}))'),),
              width=4, height=4, description="Distinct GPUs held by at least one pod."),
        Panel("Average utilization", "stat", "percentunit", (q(f"avg(gpu_utilization_ratio{{{GPU_SEL}}})"),),
              width=4, height=4),
        Panel("Memory used", "stat", "percentunit",
              (q(f"sum(gpu_memory_used_bytes{{{GPU_SEL}}}) / sum(gpu_memory_total_bytes{{{GPU_SEL}}})"),),
              width=4, height=4),
        Panel("Power", "stat", "watt", (q(f"sum(gpu_power_usage_watts{{{GPU_SEL}}})"),), width=4, height=4),
        Panel("Hottest GPU", "stat", "celsius", (q(f"max(gpu_temperature_celsius{{{GPU_SEL}}})"),),
              width=4, height=4),
        Panel("GPU utilization", "timeseries", "percentunit",
              (q(f"gpu_utilization_ratio{{{GPU_SEL}}}", GPU_LEGEND),)),
        Panel("Memory used", "timeseries", "bytes",
              (q(f"gpu_memory_used_bytes{{{GPU_SEL}}}", GPU_LEGEND + " used"),
               q(f"gpu_memory_total_bytes{{{GPU_SEL}}}", GPU_LEGEND + " total"))),
        Panel("Memory controller utilization", "timeseries", "percentunit",
              (q(f"gpu_memory_utilization_ratio{{{GPU_SEL}}}", GPU_LEGEND),)),
        Panel("Temperature", "timeseries", "celsius",
              (q(f"gpu_temperature_celsius{{{GPU_SEL}}}", GPU_LEGEND),),
              description="GPUTemperatureHigh fires above 80 °C for 2 minutes."),
        Panel("Power draw and limit", "timeseries", "watt",
              (q(f"gpu_power_usage_watts{{{GPU_SEL}}}", GPU_LEGEND),
               q(f"gpu_power_limit_watts{{{GPU_SEL}}}", GPU_LEGEND + " limit"))),
        Panel("Energy per node over the time range", "bargauge", "joule",
              (q(f"sum by (node) (increase(node_uuid:gpu_energy_consumption_joules_total:max{{{GPU_SEL}}}"
                 "[$__range]))", "{{node}}"),),
              description="From one energy counter per GPU (recording rule, max over the GPU's series): "
                          "a new holder or a kubelet flap starts a new scraped series and is not counted "
                          "twice."),
        Panel("SM clock", "timeseries", "hertz",
              (q(f"gpu_sm_clock_hertz{{{GPU_SEL}}}", GPU_LEGEND),
               q(f"gpu_sm_clock_max_hertz{{{GPU_SEL}}}", GPU_LEGEND + " max"))),
        Panel("Memory clock", "timeseries", "hertz",
              (q(f"gpu_memory_clock_hertz{{{GPU_SEL}}}", GPU_LEGEND),)),
        Panel("Throttle reasons active", "timeseries", "short",
              (q(f'gpu_clocks_event_reason_active{{{GPU_SEL}, reason!="gpu_idle"}} == 1',
                 GPU_LEGEND + " {{reason}}"),),
              description="Clock-event reasons currently holding the clocks down (gpu_idle left out)."),
        Panel("ECC errors", "timeseries", "short",
              (q(f"max by (node, gpu, uuid, type) (increase(gpu_ecc_errors_total{{{GPU_SEL}}}"
                 "[$__rate_interval]))", GPU_LEGEND + " {{type}}"),),
              description="New ECC errors per GPU. Max by device: a new holder or a kubelet flap starts "
                          "a new series of the same counter, which must not count twice."),
        Panel("XID errors", "timeseries", "short",
              (q(f"max by (node, gpu, uuid, xid) (gpu_xid_errors_total{{{GPU_SEL}}})",
                 GPU_LEGEND + " XID {{xid}}"),),
              description="XIDs per GPU and code since the exporter started: each step up is an XID. "
                          "A count, not increase(): a GPU's first XID creates its series, which increase() "
                          "never shows. Max by device: a new holder's series of the same count is not a "
                          "second line."),
        Panel("GPU up", "timeseries", "bool", (q(f"gpu_up{{{GPU_SEL}}}", GPU_LEGEND),)),
        Panel("Health state", "table", "none",
              (q(f"gpu_health_state{{{GPU_SEL}}} == 1", GPU_LEGEND + " {{state}}"),),
              description="optimal / normal / throttled / critical, from temperature and memory use."),
        Panel("Availability score", "timeseries", "percentunit",
              (q(f"gpu_availability_score{{{GPU_SEL}}}", GPU_LEGEND),),
              description="0.6 * free memory share + 0.4 * (1 - utilization)."),
        Panel("Speed multiplier", "timeseries", "none",
              (q(f"gpu_speed_multiplier{{{GPU_SEL}}}", GPU_LEGEND),)),
        # Profiling (NVML GPM, Hopper and newer; a MIG instance has its own series): what the GPU's cores do,
        # beyond "a kernel ran". A row of its own, per GPU then per pod; appended so panel ids stay stable.
        Panel("Profiling (GPM: Hopper and newer)", "row", "none", (), width=24, height=1,
              description="SM, tensor-core and DRAM activity per GPU and per pod (dcgm-exporter's "
                          "DCGM_FI_PROF_* fields)."),
        *PROFILING_PANELS,
    ),
)

NS_SEL = 'namespace=~"$namespace"'
# Holders of GPUs whose 1-hour average utilization is below 5 % (max by node/uuid: one value per GPU even
# while an exporter restart leaves two series of it in the range).
IDLE_ALLOCATED = (f"gpu_allocation_info{{{NS_SEL}}} * on (node, uuid) group_left () "
                  "(max by (node, uuid) (avg_over_time(gpu_utilization_ratio[1h])) < 0.05)")
WORKLOADS = Dashboard(
    uid="gpu-autoscaler-workloads",
    title="GPU workloads",
    description="GPU use by namespace, workload and pod (shared GPUs split between holders, never double "
                "counted), GPUs allocated but idle, energy by namespace.",
    variables=(Variable("namespace", "Namespace", "label_values(gpu_allocation_info, namespace)"),),
    panels=(
        Panel("GPUs allocated", "stat", "short",
              (q(f"count(count by (node, uuid) (gpu_allocation_info{{{NS_SEL}}}))"),), width=6, height=4),
        Panel("GPUs busy (GPU-equivalents)", "stat", "short",
              (q(f"sum(namespace:gpu_utilization_ratio:sum{{{NS_SEL}}})"),), width=6, height=4,
              description="Sum of per-holder utilization: 1 = one GPU fully busy."),
        Panel("GPU memory used", "stat", "bytes",
              (q(f"sum(namespace:gpu_memory_used_bytes:sum{{{NS_SEL}}})"),),
              width=6, height=4),
        Panel("Allocated GPUs idle for an hour", "stat", "short",
              (q(f"count(count by (node, uuid) ({IDLE_ALLOCATED})) or vector(0)"),), width=6, height=4,
              description="Distinct GPUs: a GPU time-sliced between several holders counts once."),
        Panel("GPUs busy by namespace", "timeseries", "short",
              (q(f"namespace:gpu_utilization_ratio:sum{{{NS_SEL}}}", "{{namespace}}"),)),
        Panel("GPUs allocated by namespace", "timeseries", "short",
              (q(f"namespace:gpus_allocated:count{{{NS_SEL}}}", "{{namespace}}"),)),
        Panel("GPU memory by namespace", "timeseries", "bytes",
              (q(f"namespace:gpu_memory_used_bytes:sum{{{NS_SEL}}}", "{{namespace}}"),)),
        Panel("Utilization by workload", "timeseries", "percentunit",
              (q(f"namespace_workload:gpu_utilization_ratio:avg{{{NS_SEL}}}", "{{namespace}}/{{workload}}"),),
              description="Average over the workload's pods; the workload is derived from the pod name."),
        Panel("Utilization by pod", "timeseries", "percentunit",
              (q(f"avg by (namespace, pod) (gpu_pod_utilization_ratio{{{NS_SEL}}})",
                 "{{namespace}}/{{pod}}"),)),
        Panel("GPU memory by pod", "timeseries", "bytes",
              (q(f"sum by (namespace, pod) (gpu_pod_memory_used_bytes{{{NS_SEL}}})",
                 "{{namespace}}/{{pod}}"),)),
        Panel("Idle but allocated GPUs (1 h average below 5 %)", "table", "percentunit",
              (q(IDLE_ALLOCATED, "{{namespace}}/{{pod}}"),), width=24),
        Panel("GPU power by namespace", "timeseries", "watt",
              (q(f"namespace:gpu_energy_consumption_joules:rate5m{{{NS_SEL}}}", "{{namespace}}"),),
              description="Each GPU's power (from its per-device energy counter) split evenly between the "
                          "holders gpu_allocation_info lists at each evaluation."),
        Panel("Energy by namespace over the time range", "bargauge", "joule",
              (q(f"sum_over_time(namespace:gpu_energy_consumption_joules:rate5m{{{NS_SEL}}}[$__range:1m])"
                 " * 60", "{{namespace}}"),),
              description="The namespace's watts sampled every minute of the range, times 60 s: only the "
                          "minutes in which it held GPUs count."),
        # Per-pod activity from NVML's per-process samples; appended so panel ids stay stable.
        Panel("SM utilization by pod", "timeseries", "percentunit",
              (q(f"avg by (namespace, pod) (gpu_pod_sm_utilization_ratio{{{NS_SEL}}})",
                 "{{namespace}}/{{pod}}"),),
              description="Time the pod's kernels ran on its GPUs (averaged over them), from NVML's "
                          "per-process utilization summed over its processes: on a time-sliced GPU each "
                          "pod's own part, the parts adding up to the GPU's utilization, not the whole GPU's "
                          "for every pod. None on MIG GPUs."),
        Panel("Memory bandwidth by pod", "timeseries", "percentunit",
              (q(f"avg by (namespace, pod) (gpu_pod_memory_bandwidth_utilization_ratio{{{NS_SEL}}})",
                 "{{namespace}}/{{pod}}"),),
              description="Time device memory was read or written for the pod's processes (averaged over its "
                          "GPUs), from NVML's per-process memory utilization: each pod's part of the GPU's "
                          "memory utilization. None on MIG GPUs."),
    ),
)

RULE_SEL = 'rule=~"$rule"'
AUTOSCALER = Dashboard(
    uid="gpu-autoscaler-controller",
    title="GPU autoscaler",
    description="Per rule: current vs desired replicas, metric value vs target, scale events, limiting "
                "reasons, "
                "query errors, the capacity guard (free GPUs, withheld and unschedulable replicas) and "
                "schedule windows; sync duration and health of the controller. Per-rule series from the "
                "leader.",
    variables=(Variable("rule", "Rule", "label_values(gpu_autoscaler_desired_replicas, rule)"),),
    panels=(
        Panel("Leader", "stat", "short", (q("sum(gpu_autoscaler_leader)"),), width=4, height=4,
              description="Replicas acting: 1 expected."),
        Panel("Rules loaded", "stat", "short", (q(f"max(gpu_autoscaler_rules_loaded {LEADER})"),), width=4,
              height=4),
        Panel("Rules file valid", "stat", "bool", (q("min(gpu_autoscaler_rules_valid)"),), width=4, height=4),
        Panel("Dry run", "stat", "bool", (q(f"max(gpu_autoscaler_dry_run {LEADER})"),), width=4, height=4),
        Panel("Since last successful sync", "stat", "s",
              (q("time() - max(gpu_autoscaler_last_successful_sync_timestamp_seconds)"),), width=4, height=4),
        Panel("Metrics failing", "stat", "short",
              (q(f"count((gpu_autoscaler_metric_up{{{RULE_SEL}}} == 0) {LEADER}) or vector(0)"),), width=4,
              height=4),
        Panel("Current vs desired replicas", "timeseries", "short",
              (q(f"max by (rule) (gpu_autoscaler_current_replicas{{{RULE_SEL}}} {LEADER})",
                 "{{rule}} current"),
               q(f"max by (rule) (gpu_autoscaler_desired_replicas{{{RULE_SEL}}} {LEADER})",
                 "{{rule}} desired"),
               q(f"max by (rule) (gpu_autoscaler_min_replicas{{{RULE_SEL}}} {LEADER})", "{{rule}} min"),
               q(f"max by (rule) (gpu_autoscaler_max_replicas{{{RULE_SEL}}} {LEADER})", "{{rule}} max"))),
        Panel("Metric value vs target", "timeseries", "short",
              (q(f"max by (rule, metric) (gpu_autoscaler_metric_value{{{RULE_SEL}}} {LEADER})",
                 "{{rule}} {{metric}}"),
               q(f"max by (rule, metric) (gpu_autoscaler_metric_target{{{RULE_SEL}}} {LEADER})",
                 "{{rule}} {{metric}} target"))),
        Panel("Metric value / target", "timeseries", "percentunit",
              (q(f"max by (rule, metric) ((gpu_autoscaler_metric_value{{{RULE_SEL}}} / "
                 f"gpu_autoscaler_metric_target{{{RULE_SEL}}}) {LEADER})", "{{rule}} {{metric}}"),),
              description="Above 100 % the rule wants more replicas (outside its tolerance band)."),
        Panel("Scale events", "timeseries", "short",
              (q(f"sum by (rule, direction) (increase(gpu_autoscaler_scale_events_total{{{RULE_SEL}}}"
                 "[$__rate_interval]))", "{{rule}} {{direction}}"),)),
        Panel("Limiting reason", "table", "none",
              (q(f"max by (rule, namespace, target, reason) (gpu_autoscaler_decision_reason{{{RULE_SEL}}} "
                 f"{LEADER}) == 1", "{{rule}} {{reason}}"),),
              description="The Reason of each rule's last decision (TooManyReplicas, ScaleUpLimit, ...)."),
        Panel("Decision reasons over time", "timeseries", "short",
              (q(f"count by (reason) ((gpu_autoscaler_decision_reason{{{RULE_SEL}}} == 1) {LEADER})",
                 "{{reason}}"),)),
        Panel("Query errors", "timeseries", "short",
              (q(f"sum by (rule, metric, reason) (increase(gpu_autoscaler_query_errors_total{{{RULE_SEL}}}"
                 "[$__rate_interval]))", "{{rule}} {{metric}} {{reason}}"),)),
        Panel("Scale errors", "timeseries", "short",
              (q(f"sum by (rule, reason) (increase(gpu_autoscaler_scale_errors_total{{{RULE_SEL}}}"
                 "[$__rate_interval]))", "{{rule}} {{reason}}"),)),
        Panel("Sync duration", "timeseries", "s",
              (q("histogram_quantile(0.5, sum by (le) (rate(gpu_autoscaler_sync_duration_seconds_bucket"
                 "[$__rate_interval])))", "median"),
               q("histogram_quantile(0.99, sum by (le) (rate(gpu_autoscaler_sync_duration_seconds_bucket"
                 "[$__rate_interval])))", "p99"))),
        Panel("Metric query up", "timeseries", "bool",
              (q(f"max by (rule, metric) (gpu_autoscaler_metric_up{{{RULE_SEL}}} {LEADER})",
                 "{{rule}} {{metric}}"),)),
        # The capacity guard (rules with `capacity`) and schedule windows; appended so panel ids stay stable.
        Panel("Capacity: free GPUs and withheld replicas", "timeseries", "short",
              (q(f"max by (rule) (gpu_autoscaler_capacity_free_gpus{{{RULE_SEL}}} {LEADER})",
                 "{{rule}} free GPUs"),
               q(f"max by (rule) (gpu_autoscaler_capacity_withheld_replicas{{{RULE_SEL}}} {LEADER})",
                 "{{rule}} withheld replicas")),
              description="Free GPUs the rule's capacity query returned (a gap: the query failed, which "
                          "limits nothing) and the replicas the decision wanted but the guard held back. "
                          "Giving them needs withheld x gpusPerReplica (from the rule) GPUs.",
              width=8),
        Panel("Capacity-limited, schedule window open", "timeseries", "bool",
              (q(f"max by (rule) (gpu_autoscaler_capacity_limited{{{RULE_SEL}}} {LEADER})",
                 "{{rule}} capacity-limited"),
               q(f"max by (rule) (gpu_autoscaler_schedule_active{{{RULE_SEL}}} {LEADER})",
                 "{{rule}} schedule window open")),
              description="1 when the last decision was held back by the capacity guard; 1 while a cron "
                          "schedule window of the rule replaces its min/maxReplicas.",
              width=8),
        Panel("Unschedulable replicas", "timeseries", "short",
              (q(f"max by (rule) (gpu_autoscaler_unschedulable_replicas{{{RULE_SEL}}} {LEADER})",
                 "{{rule}}"),),
              description="Replicas of the target Pending as unschedulable, any age. Past the rule's "
                          "pendingGraceSeconds they stop every scale-up; GPUAutoscalerReplicasUnschedulable "
                          "fires after 15 minutes.",
              width=8),
    ),
)

DASHBOARDS: dict[str, Dashboard] = {
    "gpu-fleet.json": FLEET,
    "gpu-workloads.json": WORKLOADS,
    "gpu-autoscaler.json": AUTOSCALER,
}


def _options(kind: str) -> dict[str, Any]:
    if kind == "timeseries":
        return {"legend": {"displayMode": "list", "placement": "bottom", "showLegend": True},
                "tooltip": {"mode": "multi", "sort": "desc"}}
    if kind in ("stat", "bargauge"):
        return {"reduceOptions": {"calcs": ["lastNotNull"], "fields": "", "values": False},
                "orientation": "auto", "showUnfilled": True, "colorMode": "value", "graphMode": "area",
                "textMode": "auto", "justifyMode": "auto"}
    return {"showHeader": True, "cellHeight": "sm"}


def _target(query: Query, ref: str, kind: str) -> dict[str, Any]:
    instant = kind in ("table", "bargauge")
    return {"datasource": DATASOURCE, "refId": ref, "editorMode": "code", "expr": query.expr,
            "legendFormat": query.legend or "__auto", "instant": instant, "range": not instant,
            "format": "table" if kind == "table" else "time_series"}


def _panels(panels: tuple[Panel, ...]) -> list[dict[str, Any]]:
    """Lay panels out left to right, wrapping at 24 grid units."""
    result: list[dict[str, Any]] = []
    x = y = row_height = 0
    for number, panel in enumerate(panels, start=1):
        if x + panel.width > 24:
            x, y, row_height = 0, y + row_height, 0
        if panel.kind == "row":  # a header that groups the panels below it
            result.append({"id": number, "type": "row", "title": panel.title, "collapsed": False,
                           "gridPos": {"h": 1, "w": 24, "x": 0, "y": y + row_height}, "panels": []})
            x, y, row_height = 0, y + row_height + 1, 0
            continue
        result.append({
            "id": number, "type": panel.kind, "title": panel.title, "description": panel.description,
            "datasource": DATASOURCE,
            "gridPos": {"h": panel.height, "w": panel.width, "x": x, "y": y},
            "fieldConfig": {"defaults": {"unit": panel.unit}, "overrides": []},
            "options": _options(panel.kind),
            "targets": [_target(query, chr(ord("A") + i), panel.kind)
                        for i, query in enumerate(panel.queries)],
        })
        x += panel.width
        row_height = max(row_height, panel.height)
    return result


ALL = {"selected": True, "text": ["All"], "value": ["$__all"]}
"""The `current` of a multi-value variable with All selected: Grafana's own form. A variable option needs its
text and value (Grafana's `VariableOption` type); the data source variable has none, so Grafana starts on the
default Prometheus."""


def _variables(variables: tuple[Variable, ...]) -> list[dict[str, Any]]:
    datasource = {"name": "datasource", "label": "Data source", "type": "datasource", "query": "prometheus",
                  "hide": 0, "includeAll": False, "multi": False, "options": [], "refresh": 1,
                  "regex": "", "skipUrlSync": False}
    return [datasource, *({
        "name": v.name, "label": v.label, "type": "query", "datasource": DATASOURCE,
        "query": {"qryType": 1, "query": v.query, "refId": "PrometheusVariableQueryEditor"},
        "current": ALL, "hide": 0, "includeAll": True, "allValue": ".*", "multi": True, "options": [],
        "refresh": 2, "regex": "", "skipUrlSync": False, "sort": 1,
    } for v in variables)]


def build(dashboard: Dashboard) -> dict[str, Any]:
    """The bare dashboard object (no `id`, no API wrapper, no `__inputs`)."""
    return {
        "uid": dashboard.uid,
        "title": dashboard.title,
        "description": dashboard.description,
        "tags": ["gpu", "gpu-autoscaler"],
        "schemaVersion": SCHEMA_VERSION,
        "version": 1,
        "editable": True,
        "graphTooltip": 1,
        "timezone": "",
        "time": {"from": "now-6h", "to": "now"},
        "refresh": "30s",
        "fiscalYearStartMonth": 0,
        "liveNow": False,
        "annotations": {"list": []},
        "links": [{"type": "dashboards", "tags": ["gpu-autoscaler"], "title": "GPU dashboards",
                   "asDropdown": True,
                   "includeVars": False, "keepTime": True, "icon": "external link", "targetBlank": False,
                   "tooltip": "", "url": ""}],
        "templating": {"list": _variables(dashboard.variables)},
        "panels": _panels(dashboard.panels),
    }


def render_all() -> dict[str, str]:
    """File name -> JSON text of every dashboard."""
    return {name: json.dumps(build(d), indent=2, ensure_ascii=False) + "\n" for name, d in DASHBOARDS.items()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="fail if a committed dashboard is out of date")
    args = parser.parse_args(argv)
    stale = []
    for name, text in render_all().items():
        path = OUT_DIR / name
        if args.check:
            if not path.exists() or path.read_text() != text:
                stale.append(name)
        else:
            path.write_text(text)
            print(f"wrote {path.relative_to(ROOT)}")
    if stale:
        print(f"out of date: {', '.join(stale)}: run python scripts/gen_dashboards.py", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
