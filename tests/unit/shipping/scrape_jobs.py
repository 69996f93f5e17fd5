"""The shipped plain-Prometheus scrape jobs, turned into jobs a test Prometheus can run.

Debian's Prometheus is built without Kubernetes service discovery, and tests have no cluster anyway. A
Kubernetes pod target is, before relabelling, just a set of `__meta_kubernetes_*` labels and an address; a
static target carrying the same labels goes through the shipped `relabel_configs` and `honor_labels`
unchanged, so the test exercises exactly what users run.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import yaml

from tests.unit.shipping.promql_names import ROOT

SNIPPET = ROOT / "manifests" / "overlays" / "plain-prometheus" / "scrape-config.yaml"
TLS_SNIPPET = ROOT / "manifests" / "overlays" / "tls-auth" / "scrape-config.yaml"


def shipped_jobs(snippet: Path = SNIPPET) -> dict[str, dict[str, Any]]:
    """job_name -> job of the plain-prometheus scrape-config.yaml (or of another shipped snippet)."""
    return {job["job_name"]: job for job in yaml.safe_load(snippet.read_text())["scrape_configs"]}


def pod_meta_labels(app: str, pod: str, namespace: str, node: str,
                    port_name: str = "metrics") -> dict[str, str]:
    """What Kubernetes pod discovery attaches to a target (the subset the shipped jobs read)."""
    return {
        "__meta_kubernetes_pod_label_app_kubernetes_io_name": app,
        "__meta_kubernetes_pod_container_port_name": port_name,
        "__meta_kubernetes_pod_name": pod,
        "__meta_kubernetes_namespace": namespace,
        "__meta_kubernetes_pod_node_name": node,
        "__meta_kubernetes_pod_container_name": app,
    }


def as_static_job(job: dict[str, Any], targets: list[tuple[str, dict[str, str]]],
                  scrape_interval: str | None = None) -> dict[str, Any]:
    """`job` with its kubernetes_sd_configs replaced by static targets (address, discovery labels)."""
    static = copy.deepcopy(job)
    static.pop("kubernetes_sd_configs")
    static["static_configs"] = [{"targets": [address], "labels": labels} for address, labels in targets]
    if scrape_interval:
        static["scrape_interval"] = scrape_interval
        static["scrape_timeout"] = scrape_interval
    return static


def servicemonitor_as_job(monitor: dict[str, Any], job_name: str, targets: list[tuple[str, dict[str, str]]],
                          scrape_interval: str) -> dict[str, Any]:
    """A ServiceMonitor endpoint as the scrape job prometheus-operator generates from it: the operator's own
    target labels (namespace, pod, container, service, endpoint, job) are set first, then the endpoint's
    `relabelings` run, with honor_labels from `honorLabels`."""
    (endpoint,) = monitor["spec"]["endpoints"]
    keys = {"sourceLabels": "source_labels", "targetLabel": "target_label"}
    relabel = [{keys.get(k, k): v for k, v in r.items()} for r in endpoint["relabelings"]]
    operator = [{"source_labels": [source], "target_label": target} for source, target in (
        ("__meta_kubernetes_namespace", "namespace"), ("__meta_kubernetes_pod_name", "pod"),
        ("__meta_kubernetes_pod_container_name", "container"))]
    return {"job_name": job_name, "honor_labels": endpoint["honorLabels"], "scrape_interval": scrape_interval,
            "scrape_timeout": scrape_interval,
            "static_configs": [{"targets": [address], "labels": labels} for address, labels in targets],
            "relabel_configs": [*operator, *relabel]}


def write_check_config(path: Path, jobs: list[dict[str, Any]]) -> Path:
    path.write_text(yaml.safe_dump({"global": {"scrape_interval": "15s"}, "scrape_configs": jobs}))
    return path
