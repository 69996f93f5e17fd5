"""Metric names a PromQL expression reads, and every metric name our processes and rules produce.

Used to prove that the rules and dashboards only query series that exist (a typo in a metric name is not a
PromQL error: the query silently returns nothing).
"""

from __future__ import annotations

import copy
import functools
import re
from collections.abc import Iterable
from pathlib import Path

import yaml

import autoscaler.controller.self_metrics
import exporter.metric_table
from tests import REPO_ROOT

ROOT = REPO_ROOT
RULE_FILES = sorted((ROOT / "rules").glob("*.rules.yaml"))

# Names fixed in docs/metrics.md that the rules and dashboards rely on; a test
# checks that exporter/metric_table.py serves every one of them.
CONTRACT_EXPORTER_NAMES = frozenset({
    "gpu_xid_errors_total", "gpu_health_state", "gpu_speed_multiplier", "gpu_availability_score",
    "gpu_exporter_pod_resources_up", "gpu_allocation_info", "gpu_pod_utilization_ratio",
    "gpu_pod_memory_used_bytes",
})
# Series Prometheus itself adds to every target.
PROMETHEUS_NAMES = frozenset({"up", "scrape_duration_seconds", "scrape_samples_scraped"})
# kube-state-metrics v2 series the capacity recording rules read (the scheduler's view of GPUs). Not served by
# our processes: names and labels as kube-state-metrics documents them (docs/metrics/cluster/node-metrics.md,
# docs/metrics/workload/pod-metrics.md), extended resources as resource="nvidia_com_gpu", unit="integer".
KUBE_STATE_METRICS_NAMES = frozenset({
    "kube_node_status_allocatable", "kube_node_status_condition", "kube_node_spec_unschedulable",
    "kube_node_labels", "kube_pod_container_resource_requests", "kube_pod_init_container_resource_requests",
    "kube_pod_status_phase",
})

# The exporter's profiling, memory-temperature and NVLink series, read by the DCGM recording rules
# (rules/gpu-dcgm-compat.rules.yaml) and the GPU dashboard's profiling row under these agreed names;
# tests/integration/shipping/test_dcgm_profiling.py checks that the exporter serves every one of them.
PROFILING_EXPORTER_NAMES = frozenset({
    "gpu_graphics_engine_active_ratio", "gpu_sm_active_ratio", "gpu_sm_occupancy_ratio",
    "gpu_tensor_active_ratio", "gpu_dram_active_ratio", "gpu_memory_temperature_celsius",
    "gpu_nvlink_tx_bytes_per_second", "gpu_nvlink_rx_bytes_per_second",
    "gpu_mig_graphics_engine_active_ratio", "gpu_mig_sm_active_ratio", "gpu_mig_sm_occupancy_ratio",
    "gpu_mig_tensor_active_ratio", "gpu_mig_dram_active_ratio",
})

# The LLM inference servers' own series, read by rules/llm-serving-recording.rules.yaml: names as vLLM,
# SGLang, TGI and Triton document them (docs/llm-signals.md lists each; test_rules.py checks the page names
# them all). Histograms by their _bucket series.
LLM_SERVER_NAMES = frozenset({
    "vllm:num_requests_waiting", "vllm:num_requests_running", "vllm:kv_cache_usage_perc",
    "vllm:gpu_cache_usage_perc", "vllm:time_to_first_token_seconds_bucket",
    "sglang:num_queue_reqs", "sglang:num_running_reqs", "sglang:token_usage",
    "sglang:time_to_first_token_seconds_bucket",
    "tgi_queue_size", "tgi_batch_current_size",
    "nv_inference_pending_request_count",
})

_KEYWORDS = frozenset({
    "by", "without", "on", "ignoring", "group_left", "group_right", "and", "or", "unless", "offset", "bool",
    "inf", "nan", "atan2",
})
_STRING = re.compile(r'"(?:[^"\\]|\\.)*"')
_BRACES = re.compile(r"\{[^{}]*\}")
_BRACKETS = re.compile(r"\[[^\[\]]*\]")
_GROUPING = re.compile(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^()]*\)")
_IDENT = re.compile(r"(?<![\w:$.])([A-Za-z_:][\w:]*)(?![\w:])(?!\s*\()")


def metric_names(expr: str) -> set[str]:
    """Names of the series `expr` selects (label matchers, ranges, grouping lists and functions removed)."""
    text = _STRING.sub('""', expr)
    text = _BRACES.sub(" ", text)
    text = _BRACKETS.sub(" ", text)
    text = _GROUPING.sub(" ", text)
    return {m for m in _IDENT.findall(text) if m.lower() not in _KEYWORDS}


def exporter_names() -> set[str]:
    """Every sample name exporter/metric_table.py declares (counters with `_total`)."""
    return {spec.exposed_name for spec in vars(exporter.metric_table).values()
            if isinstance(spec, exporter.metric_table.MetricSpec)}


def autoscaler_names() -> set[str]:
    self_metrics = autoscaler.controller.self_metrics
    names = {self_metrics.name(short) for short in self_metrics.HELP}
    histograms = {n for n in names if n.endswith("_seconds") and "duration" in n}
    return names | {f"{n}{suffix}" for n in histograms for suffix in ("_bucket", "_sum", "_count")}


def rule_groups(paths: Iterable[Path] = RULE_FILES) -> list[dict[str, object]]:
    """The groups of the rules files, a copy each call (parsed once: several modules read them at
    collection, in every worker)."""
    groups: list[dict[str, object]] = []
    for path in paths:
        groups.extend(copy.deepcopy(_groups_of(path)))
    return groups


@functools.cache
def _groups_of(path: Path) -> list[dict[str, object]]:
    return list(yaml.safe_load(path.read_text())["groups"])


def recorded_names() -> set[str]:
    return {str(rule["record"]) for group in rule_groups() for rule in group["rules"]  # type: ignore[attr-defined]
            if "record" in rule}


def known_names() -> set[str]:
    return (exporter_names() | autoscaler_names() | recorded_names() | PROMETHEUS_NAMES
            | KUBE_STATE_METRICS_NAMES | PROFILING_EXPORTER_NAMES | LLM_SERVER_NAMES)
