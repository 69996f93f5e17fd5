"""The shipped scrape configuration keeps the exporter's namespace/pod/container labels and never attributes
an unallocated GPU to the exporter's own pod or namespace, proven with a real Prometheus.

The plain-prometheus jobs run unchanged except that Kubernetes discovery is replaced by a static target
carrying the same `__meta_kubernetes_*` labels (tests/unit/shipping/scrape_jobs.py); the ServiceMonitor is
run as the job prometheus-operator generates from it. A third, naive job (the usual pod-role recipe that
writes the pod's namespace and name into `namespace`/`pod`) shows what the shipped config prevents.
"""

from __future__ import annotations

import pytest
import yaml

from demo.processes import running, start_prometheus
from tests.integration.shipping.conftest import Exposition, query
from tests.support import wait_for
from tests.unit.shipping.scrape_jobs import (
    as_static_job,
    pod_meta_labels,
    servicemonitor_as_job,
    shipped_jobs,
)
from tests.unit.shipping.test_manifests import objects, one

pytestmark = pytest.mark.integration

EXPORTER_POD, EXPORTER_NS, NODE = "gpu-exporter-x2x4z", "gpu-autoscaler", "gpu-node-1"
LABELS = 'gpu="{gpu}",uuid="GPU-{gpu}",model="NVIDIA H100 80GB HBM3",node="gpu-node-1"'
HOLDER = 'namespace="ml",pod="embed-7d9f8b6c5-x2x4z",container="server"'
EXPOSITION = f"""# HELP gpu_utilization_ratio GPU busy fraction.
# TYPE gpu_utilization_ratio gauge
gpu_utilization_ratio{{{LABELS.format(gpu=0)},{HOLDER}}} 0.5
gpu_utilization_ratio{{{LABELS.format(gpu=1)},namespace="",pod="",container=""}} 0.1
gpu_utilization_ratio{{{LABELS.format(gpu=2)}}} 0.2
# HELP gpu_exporter_nvml_up NVML answering.
# TYPE gpu_exporter_nvml_up gauge
gpu_exporter_nvml_up 1
"""


def test_shipped_scrape_configs_keep_the_holders_and_never_blame_the_exporter(exposition: Exposition) -> None:
    exposition.set(EXPOSITION)
    meta = pod_meta_labels("gpu-exporter", EXPORTER_POD, EXPORTER_NS, NODE)
    target = [(f"127.0.0.1:{exposition.port}", meta)]
    plain = as_static_job(shipped_jobs()["gpu-exporter"], target, scrape_interval="200ms")
    monitor = one("ServiceMonitor", "gpu-exporter", objects())
    operator = servicemonitor_as_job(monitor, "operator", target, "200ms")
    naive = {"job_name": "naive", "honor_labels": True, "scrape_interval": "200ms", "scrape_timeout": "200ms",
             "static_configs": plain["static_configs"], "relabel_configs": [
                 {"source_labels": ["__meta_kubernetes_namespace"], "target_label": "namespace"},
                 {"source_labels": ["__meta_kubernetes_pod_name"], "target_label": "pod"}]}
    config = {"global": {"scrape_interval": "200ms", "evaluation_interval": "200ms"},
              "scrape_configs": [plain, operator, naive]}
    with running(start_prometheus(config)) as prometheus:
        def series() -> dict[tuple[str, str], dict[str, str]] | None:
            result = {(s["metric"]["job"], s["metric"]["gpu"]): s["metric"]
                      for s in query(prometheus.url, "gpu_utilization_ratio")}
            return result if len(result) == 9 else None

        found = wait_for(series, 30, "three GPUs from the three jobs:\n" + yaml.safe_dump(config))
        for job in ("gpu-exporter", "operator"):
            allocated = found[(job, "0")]
            assert (allocated["namespace"], allocated["pod"], allocated["container"]) == (
                "ml", "embed-7d9f8b6c5-x2x4z", "server"), job
            for gpu in ("1", "2"):  # unallocated: labels empty, or left out entirely
                unallocated = found[(job, gpu)]
                assert not {"namespace", "pod", "container"} & set(unallocated), (job, unallocated)
                assert (unallocated["exporter_pod"], unallocated["exporter_namespace"]) == (EXPORTER_POD,
                                                                                             EXPORTER_NS)
        assert found[("gpu-exporter", "1")]["node"] == NODE
        # Without the shipped relabelling, a series without holder labels is charged to the exporter's pod.
        naive = found[("naive", "2")]
        assert (naive["namespace"], naive["pod"]) == (EXPORTER_NS, EXPORTER_POD)
        # Series without a node label of their own get the target's node (used by GPUExporterDown etc.).
        (nvml,) = query(prometheus.url, 'gpu_exporter_nvml_up{job="gpu-exporter"}')
        assert nvml["metric"]["node"] == NODE and "namespace" not in nvml["metric"]
