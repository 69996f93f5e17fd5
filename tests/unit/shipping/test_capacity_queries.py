"""The capacity guard queries docs/alerts-dashboards-manifests.md tells users to paste into a rule: each one
is evaluated by promtool on hand-written series (rules/tests/capacity.test.yaml) and accepted by the real
`gpu-autoscaler check`; the section's table lists every recording rule of the gpu-autoscaler.capacity
group."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

from tests.unit.shipping.promql_names import ROOT, rule_groups

DOC = ROOT / "docs" / "alerts-dashboards-manifests.md"
CAPACITY_TESTS = ROOT / "rules" / "tests" / "capacity.test.yaml"
GROUP = "gpu-autoscaler.capacity"
BIN = Path(sys.executable).parent
RULE = """
  - name: {name}
    target: {{kind: Deployment, namespace: ml, name: {name}}}
    minReplicas: 1
    maxReplicas: 4
    metrics:
      - {{name: gpu_util, query: '100 * avg(gpu_utilization_ratio)', type: Average, target: 50}}
    {capacity}
"""


def section() -> str:
    text = DOC.read_text()
    start = text.index("### Capacity guard queries")
    return text[start:text.index("\n## ", start)]


def examples() -> list[str]:
    """The `capacity: {...}` lines of the section, as written."""
    return re.findall(r"^capacity: \{.*\}$", section(), re.MULTILINE)


def example_queries() -> list[str]:
    queries = []
    for line in examples():
        capacity: dict[str, Any] = yaml.safe_load(line)["capacity"]
        queries.append(str(capacity["query"]))
    return queries


def promtool_exprs() -> set[str]:
    doc = yaml.safe_load(CAPACITY_TESTS.read_text())
    return {" ".join(str(case["expr"]).split()) for test in doc["tests"]
            for case in test.get("promql_expr_test", [])}


def check(tmp_path: Path, lines: list[str]) -> subprocess.CompletedProcess[str]:
    rules = "rules:" + "".join(RULE.format(name=f"svc-{i}", capacity=line) for i, line in enumerate(lines))
    path = tmp_path / "rules.yaml"
    path.write_text(rules)
    return subprocess.run([str(BIN / "gpu-autoscaler"), "check", str(path)], capture_output=True, text=True,
                          timeout=60, check=False)


def test_the_section_shows_both_sources_and_a_pool() -> None:
    queries = example_queries()
    assert "cluster:kube_gpus_free:sum" in queries and "cluster:gpus_unallocated:sum" in queries
    assert any(query.startswith("pool:kube_gpus_free:sum{pool=") for query in queries)


def test_every_example_is_evaluated_by_promtool() -> None:
    untested = [query for query in example_queries() if " ".join(query.split()) not in promtool_exprs()]
    assert untested == [], "add them to rules/tests/capacity.test.yaml with their exact values"


def test_every_example_is_accepted_by_gpu_autoscaler_check(tmp_path: Path) -> None:
    result = check(tmp_path, examples())
    assert result.returncode == 0, result.stdout + result.stderr


def test_check_rejects_a_broken_capacity_query(tmp_path: Path) -> None:
    """The check above can fail: an unclosed selector in a capacity query is a problem."""
    result = check(tmp_path, ["capacity: {query: 'sum(node:kube_gpus_free:sum{', gpusPerReplica: 2}"])
    assert result.returncode == 2 and "capacity.query" in result.stdout + result.stderr


def test_the_table_lists_every_capacity_recording_rule() -> None:
    (group,) = [g for g in rule_groups() if g["name"] == GROUP]
    recorded = {str(rule["record"]) for rule in group["rules"]}  # type: ignore[attr-defined]
    listed = set(re.findall(r"^\| `([a-z_]+:[a-z0-9_]+:[a-z0-9_]+)` \|", section(), re.MULTILINE))
    assert listed == recorded
