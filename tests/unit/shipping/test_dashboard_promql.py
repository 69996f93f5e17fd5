"""Dashboard panels compute the right numbers: the committed panel queries, with Grafana's variables
substituted as an instant query over a 4-hour range would, run by promtool on series we write by hand.

Energy by namespace integrates power over the time the namespace drew it (not its average times the whole
range); the idle-GPU count counts a GPU time-sliced four ways once.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import yaml

from demo.processes import promtool
from tests.unit.shipping.promql_names import ROOT

DASHBOARD_DIR = ROOT / "dashboards"
# An instant query at the end of a 4-hour range, "All" selected. Grafana's "now" is seldom on a minute
# boundary; on one, Prometheus 2's closed range interval adds one 1-minute step to the energy sum.
VARIABLES = {"namespace": ".*", "node": ".*", "gpu": ".*", "rule": ".*", "__range": "4h",
             "__range_s": "14400", "__rate_interval": "1m", "__interval": "1m"}
EVAL_TIME = "4h30s"


def panel_expr(dashboard: str, title: str) -> str:
    """The (only) query of the committed panel `title`, variables substituted."""
    panels = json.loads((DASHBOARD_DIR / dashboard).read_text())["panels"]
    (panel,) = [p for p in panels if p["title"] == title]
    (target,) = panel["targets"]
    return re.sub(r"\$\{?(\w+)\}?", lambda m: VARIABLES[m.group(1)], str(target["expr"]))


def run_promtool(tmp_path: Path, expr: str, series: list[dict[str, str]],
                 expected: list[dict[str, Any]]) -> str:
    """promtool's verdict on `expr` at EVAL_TIME over `series` (1-minute samples): '' when it matches."""
    test = {"evaluation_interval": "1m", "tests": [{
        "interval": "1m", "input_series": series,
        "promql_expr_test": [{"expr": expr, "eval_time": EVAL_TIME, "exp_samples": expected}],
    }]}
    path = tmp_path / "panel.test.yaml"
    path.write_text(yaml.safe_dump(test, sort_keys=False))
    result = promtool("test", "rules", str(path))
    return "" if result.returncode == 0 else result.stdout + result.stderr


def test_energy_by_namespace_integrates_only_the_time_the_namespace_drew_power(tmp_path: Path) -> None:
    """`ml` draws 300 W for the second hour of the range only (its recorded series then goes stale, as a
    recording rule's output does when its input disappears): 300 W x 3600 s. `research` draws 100 W over
    the whole range: 100 W x 4 h. The old `avg_over_time(...[$__range]) * $__range_s` said 4x too much for
    ml."""
    expr = panel_expr("gpu-workloads.json", "Energy by namespace over the time range")
    name = "namespace:gpu_energy_consumption_joules:rate5m"
    series = [
        {"series": f'{name}{{namespace="ml"}}', "values": "_x59 300x59 stale"},
        {"series": f'{name}{{namespace="research"}}', "values": "100x240"},
    ]
    expected = [{"labels": '{namespace="ml"}', "value": 300 * 3600},
                {"labels": '{namespace="research"}', "value": 100 * 4 * 3600}]
    assert run_promtool(tmp_path, expr, series, expected) == ""


def test_idle_allocated_gpus_counts_a_time_sliced_gpu_once(tmp_path: Path) -> None:
    """GPU-A is idle and time-sliced between four containers, GPU-B idle and exclusive, GPU-C busy: 2."""
    expr = panel_expr("gpu-workloads.json", "Allocated GPUs idle for an hour")
    device = 'gpu="{gpu}",uuid="{uuid}",model="NVIDIA H100 80GB HBM3",node="gpu-node-1"'
    holders = [("0", "GPU-A", "ml", f"embed-{i}", "true") for i in range(4)]
    holders += [("1", "GPU-B", "ml", "rerank-0", "false"), ("2", "GPU-C", "research", "train-0", "false")]
    holder = 'namespace="{ns}",pod="{pod}",container="server",resource="nvidia.com/gpu",shared="{shared}"'
    series = [{"series": f"gpu_allocation_info{{{device.format(gpu=g, uuid=u)},"
                         f"{holder.format(ns=ns, pod=pod, shared=shared)}}}",
               "values": "1x240"} for g, u, ns, pod, shared in holders]
    series += [{"series": f"gpu_utilization_ratio{{{device.format(gpu=g, uuid=u)}}}", "values": f"{v}x240"}
               for g, u, v in (("0", "GPU-A", "0.01"), ("1", "GPU-B", "0"), ("2", "GPU-C", "0.9"))]
    assert run_promtool(tmp_path, expr, series, [{"labels": "{}", "value": 2}]) == ""


def test_tensor_activity_per_pod_averages_the_pods_gpus_and_leaves_free_gpus_out(tmp_path: Path) -> None:
    """train-0 holds GPUs 0 (0.75) and 1 (0.25): 0.5; a MIG slice held by notebook-0: 0.25; GPU 3 free."""
    expr = panel_expr("gpu-fleet.json", "Tensor pipe active per pod")
    device = 'gpu="{gpu}",uuid="GPU-{gpu}",model="NVIDIA H100 80GB HBM3",node="gpu-node-1"'
    rows = [("0", 'namespace="ml",pod="train-0",container="main"', "0.75"),
            ("1", 'namespace="ml",pod="train-0",container="main"', "0.25"),
            ("2", 'namespace="research",pod="notebook-0",container="jupyter",gpu_instance_id="1",'
                  'compute_instance_id="0",mig_profile="1g.10gb"', "0.25"),
            ("3", "", "0.9")]
    series = [{"series": "gpu_tensor_active_ratio{" + ",".join(filter(None, (device.format(gpu=g), holder)))
                         + "}", "values": f"{value}x240"} for g, holder, value in rows]
    expected = [{"labels": '{namespace="ml",pod="train-0"}', "value": 0.5},
                {"labels": '{namespace="research",pod="notebook-0"}', "value": 0.25}]
    assert run_promtool(tmp_path, expr, series, expected) == ""
