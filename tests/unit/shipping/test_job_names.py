"""The `job` values the alert rules filter on (`up{job="gpu-exporter"}`, absent(...), ...) are the job
names both overlays really produce: the plain scrape config's `job_name`, and for prometheus-operator the name
of the Service each ServiceMonitor selects (the operator's job label when `jobLabel` is unset). A mismatch
would make GPUExporterAbsent fire forever and GPUExporterDown never."""

from __future__ import annotations

import re
from typing import Any

from tests.unit.shipping.kustomize import render
from tests.unit.shipping.promql_names import ROOT, rule_groups
from tests.unit.shipping.scrape_jobs import shipped_jobs

OPERATOR_OVERLAY = ROOT / "manifests" / "overlays" / "prometheus-operator"


def rule_job_names() -> set[str]:
    exprs = " ".join(rule["expr"] for group in rule_groups() for rule in group["rules"])  # type: ignore[attr-defined]
    return set(re.findall(r'\bjob="([^"]+)"', exprs))


def operator_job_names() -> set[str]:
    objects = render(OPERATOR_OVERLAY)
    services = [o for o in objects if o["kind"] == "Service"]
    names = set()
    for monitor in (o for o in objects if o["kind"] == "ServiceMonitor"):
        spec: dict[str, Any] = monitor["spec"]
        assert "jobLabel" not in spec, "the job label would come from a Service label: extend this test"
        wanted = spec["selector"]["matchLabels"]
        ports = {endpoint["port"] for endpoint in spec["endpoints"]}
        (service,) = [s for s in services
                      if wanted.items() <= s["metadata"]["labels"].items()
                      and ports <= {p["name"] for p in s["spec"]["ports"]}]
        names.add(service["metadata"]["name"])
    return names


def test_rules_filter_on_jobs_that_exist() -> None:
    assert rule_job_names() == {"gpu-exporter", "gpu-autoscaler"}


def test_both_overlays_name_the_jobs_as_the_rules_do() -> None:
    assert set(shipped_jobs()) == rule_job_names()
    assert operator_job_names() == rule_job_names()
