"""Fixtures for the CLI tests: a valid rules file and a runner of the installed `gpu-autoscaler` script."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from benchmarks.example_rules import GPU_UTILIZATION_METRIC, embedding_service_rules

CLI = str(Path(sys.executable).parent / "gpu-autoscaler")

VALID_RULES = embedding_service_rules(GPU_UTILIZATION_METRIC + """\
      - name: queue
        query: sum(inference_queue_depth{service="embedding"})
        type: Total
        target: 50
""", behavior="""\
    behavior:
      scaleUp:   {stabilizationWindowSeconds: 0, selectPolicy: Max, tolerance: 0.1,
                  policies: [{type: Pods, value: 4, periodSeconds: 15},
                             {type: Percent, value: 100, periodSeconds: 15}]}
      scaleDown: {stabilizationWindowSeconds: 300, selectPolicy: Max, tolerance: 0.1,
                  policies: [{type: Percent, value: 100, periodSeconds: 15}]}
""")

SECOND_RULE = """\
  - name: reranker
    target: {kind: StatefulSet, namespace: medical-kg, name: reranker}
    maxReplicas: 4
    metrics:
      - {name: util, query: 'avg(gpu_utilization_ratio{pod=~"reranker-.*"})', type: Average, target: 0.8}
"""

Run = Callable[..., subprocess.CompletedProcess[str]]


@pytest.fixture
def cli(tmp_path: Path) -> Run:
    """Run `gpu-autoscaler ARGS...` in tmp_path; returns the completed process (text stdout/stderr)."""

    def run(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [CLI, *args], cwd=tmp_path, capture_output=True, text=True, timeout=timeout, check=False
        )

    return run


@pytest.fixture
def rules_file(tmp_path: Path) -> Path:
    path = tmp_path / "rules.yaml"
    path.write_text(VALID_RULES)
    return path


@pytest.fixture
def two_rules_file(tmp_path: Path) -> Path:
    path = tmp_path / "two.yaml"
    path.write_text(VALID_RULES + SECOND_RULE)
    return path
