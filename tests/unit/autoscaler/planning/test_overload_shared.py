"""One run counted by tune, simulate and the benchmark: the same overloaded minutes
(autoscaler.planning.overload, docs/rules.md#overloaded-minutes)."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from autoscaler.config.rules import parse_rules
from autoscaler.planning.counterfactual import HistoryStep, ReplaySetup, score
from autoscaler.planning.overload import is_overloaded, overloaded_minutes
from autoscaler.policy import MetricObservation
from demo.replay import Sample
from demo.replay import score as benchmark_score
from tests.measure import Run

RULES = """\
rules:
  - name: web
    target: {kind: Deployment, namespace: ml, name: web}
    minReplicas: 4
    maxReplicas: 4
    metrics:
      - {name: requests_per_second, query: 'sum(rate(r[1m]))', type: Total, target: 9}
"""
STEP = 15.0
STARTUP = 120.0
# GPUs' worth of work every 15 s: 10 requests/s per GPU, a replica at its target of 9 is 90 % busy
LOADS = [3.0, 3.5, 4.5, 2.0, 3.9, 3.7, 3.8, 3.81, 3.0, 3.0, 5.0, 3.79, 4.0, 1.0, 3.85, 2.0, 6.0, 3.0]


def ready_at(index: int) -> int:
    """The run starts at 2 replicas; the first sync asks for minReplicas 4, which serve 120 s later."""
    return 2 if index * STEP < STARTUP else 4


def expected_minutes() -> float:
    over = sum(1 for i, load in enumerate(LOADS) if load / ready_at(i) > 0.95)
    return over * STEP / 60.0


def test_the_run_holds_overloaded_steps_before_and_after_the_start_up() -> None:
    assert 0 < expected_minutes() < len(LOADS) * STEP / 60
    assert is_overloaded(3.81, 4) and not is_overloaded(3.8, 4) and is_overloaded(0.1, 0)
    assert not is_overloaded(0.0, 0)
    assert overloaded_minutes([0.5, 0.96, math.inf], 30.0) == 1.0


def test_tune_simulate_and_the_benchmark_count_the_same_overloaded_minutes(cli: Run, tmp_path: Path) -> None:
    rule = parse_rules(RULES, "rules.yaml").rules[0]
    # the benchmark: its scoring of the replayed samples
    samples = [Sample(i * STEP, load, 4, 4, ready_at(i), None, load / ready_at(i))
               for i, load in enumerate(LOADS)]
    benchmark = benchmark_score(samples, [], STEP, 0.95).overloaded_minutes
    # tune: the rule replayed on the history Prometheus would hold (the request rate), from 2 replicas
    history = [HistoryStep(i * STEP, (MetricObservation("requests_per_second", 10.0 * load),))
               for i, load in enumerate(LOADS)]
    tune = score(rule, rule, history, ReplaySetup(STEP, start_replicas=2, startup_seconds=STARTUP))
    # simulate: the same values as a trace
    (tmp_path / "rules.yaml").write_text(RULES)
    rows = "".join(f"{i * STEP:g},{10.0 * load:g}\n" for i, load in enumerate(LOADS))
    (tmp_path / "trace.csv").write_text("t,requests_per_second\n" + rows)
    result = cli("simulate", "rules.yaml", "trace.csv", "--replicas", "2", "--startup-seconds", "120")
    assert result.returncode == 0, result.stderr
    simulated = float(result.stderr.split("overloaded minutes: ")[1].split(" ")[0])
    assert benchmark == tune.overloaded_minutes == pytest.approx(expected_minutes())
    assert simulated == pytest.approx(expected_minutes(), abs=0.05)  # printed to a tenth


@pytest.mark.parametrize("value", ["-1", "x", "3601"])
def test_simulates_startup_seconds_must_be_seconds(cli: Run, tmp_path: Path, value: str) -> None:
    (tmp_path / "rules.yaml").write_text(RULES)
    (tmp_path / "trace.csv").write_text("t,requests_per_second\n0,10\n")
    result = cli("simulate", "rules.yaml", "trace.csv", "--startup-seconds", value)
    assert result.returncode == 2
    assert "--startup-seconds" in result.stderr
