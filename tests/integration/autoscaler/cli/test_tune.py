"""`gpu-autoscaler tune` (its entry point, run in-process) against a real Prometheus holding 3 days of
backfilled history (tests/history.py): a slow rule gets a cheaper recommendation, a fast one is already
best, and every bad input is one message with exit status 2. The steps are coarse (5 min; 1 min where the
start-up is measured): a finer one tests nothing more and costs seconds per run."""

from __future__ import annotations

import itertools
import json
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
import requests

from autoscaler.config.rules import parse_rules
from autoscaler.controller.past import recorded_query
from demo.processes import free_port
from tests.history import (
    EMBED_RULES,
    FAILOVER_HOURS,
    HOUR,
    STARTUP_SECONDS,
    BackfilledPrometheus,
    recorded_replicas,
)
from tests.measure import Measured, run_in_process

CLI = str(Path(sys.executable).parent / "gpu-autoscaler")
FAST_RULES = EMBED_RULES.replace("stabilizationWindowSeconds: 3600", "stabilizationWindowSeconds: 0").replace(
    "{type: Pods, value: 1, periodSeconds: 600}", "{type: Percent, value: 100, periodSeconds: 15}")


Tune = Callable[..., Measured]


@pytest.fixture
def tune(tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> Tune:
    """`gpu-autoscaler tune --rules rules.yaml ARGS...` run in `tmp_path`, the rules file holding `rules`."""
    monkeypatch.chdir(tmp_path)

    def run(rules: str, *args: str) -> Measured:
        (tmp_path / "rules.yaml").write_text(rules)
        return run_in_process([CLI, "tune", "--rules", "rules.yaml", *args], capsys)

    return run


def test_a_slow_scale_down_gets_a_cheaper_recommendation(tune: Tune,
                                                         backfilled_prometheus: BackfilledPrometheus) -> None:
    result = tune(EMBED_RULES, "--since", "3d", "--step", "5m", "--prometheus",
                  backfilled_prometheus.url, "-o", "json")
    assert result.returncode == 0 and result.stderr == "", result.stderr
    answer = json.loads(result.stdout)
    assert answer["schemaVersion"] == 1
    assert answer["current_is_best"] is False
    best, current = answer["recommended"], answer["current"]
    assert best["gpu_hours"] < current["gpu_hours"]
    assert best["overloaded_minutes"] <= current["overloaded_minutes"]
    assert "-        stabilizationWindowSeconds: 3600" in answer["diff"]
    assert len(answer["candidates"]) > 10
    # three days: chosen on the first two, checked on the last
    assert answer["held_out"] is not None and answer["held_out"]["kept_current"] is False
    front = answer["pareto"]
    assert [s["gpu_hours"] for s in front] == sorted(s["gpu_hours"] for s in front)
    assert all(a["overloaded_minutes"] > b["overloaded_minutes"] for a, b in itertools.pairwise(front))


def test_start_up_time_and_an_overload_budget(tune: Tune, backfilled_prometheus: BackfilledPrometheus,
                                             ) -> None:
    """Replicas that take two minutes to serve overload the service longer than instant ones; a budget of
    overloaded minutes larger than the current rule's lets the pick trade them for GPU-hours."""
    base = ["--since", "1d", "--step", "5m", "--prometheus", backfilled_prometheus.url, "--json"]
    instant = json.loads(tune(EMBED_RULES, *base, "--startup-seconds", "0").stdout)
    loading = json.loads(tune(EMBED_RULES, *base, "--startup-seconds", "2m").stdout)
    assert (instant["startup"], loading["startup"]["seconds"]) == (
        {"seconds": 0.0, "source": "--startup-seconds"}, 120.0)
    assert loading["current"]["overloaded_minutes"] > instant["current"]["overloaded_minutes"]
    assert loading["current"]["gpu_hours"] == instant["current"]["gpu_hours"]
    loose = json.loads(tune(EMBED_RULES, *base, "--max-overloaded-minutes", "100000").stdout)
    assert loose["budget_minutes"] == 100000
    assert loose["recommended"]["gpu_hours"] <= min(c["gpu_hours"] for c in loose["candidates"])
    refused = tune(EMBED_RULES, *base, "--max-overloaded-minutes", "-1")
    assert refused.returncode == 2 and "--max-overloaded-minutes" in refused.stderr


def test_the_table_and_the_diff(tune: Tune, backfilled_prometheus: BackfilledPrometheus) -> None:
    result = tune(EMBED_RULES, "--since", "2d", "--step", "5m", "--prometheus",
                  backfilled_prometheus.url)
    assert result.returncode == 0, result.stderr
    assert "GPU-hours  overloaded min  changes  candidate" in result.stdout
    assert "recommended: " in result.stdout
    assert "--- a/rules.yaml\n+++ b/rules.yaml\n" in result.stdout
    wide = tune(EMBED_RULES, "--since", "2d", "--step", "5m", "--prometheus", backfilled_prometheus.url,
                "-o", "wide")
    rows = [line for line in wide.stdout.splitlines() if line[:10].strip().replace(".", "").isdigit()]
    table_rows = [line for line in result.stdout.splitlines() if line[:10].strip().replace(".", "").isdigit()]
    assert wide.returncode == 0 and "every candidate" in wide.stdout and len(rows) > len(table_rows)
    old = tune(EMBED_RULES, "--since", "2d", "--step", "5m", "--prometheus", backfilled_prometheus.url,
               "--json")  # the old flag: the same document, and a line on stderr saying what to write
    assert old.returncode == 0 and json.loads(old.stdout)["schemaVersion"] == 1
    assert old.stderr == "gpu-autoscaler tune: --json is deprecated: use -o json\n"


def test_a_fast_rule_is_already_best(tune: Tune, backfilled_prometheus: BackfilledPrometheus) -> None:
    result = tune(FAST_RULES, "--since", "3d", "--step", "5m", "--prometheus",
                  backfilled_prometheus.url)
    assert result.returncode == 0, result.stderr
    assert "the current configuration is kept" in result.stdout
    assert "---" not in result.stdout


def test_unknown_rule(tune: Tune, backfilled_prometheus: BackfilledPrometheus) -> None:
    result = tune(EMBED_RULES, "--rule", "nope", "--prometheus", backfilled_prometheus.url)
    assert result.returncode == 2
    assert "no rule named 'nope'" in result.stderr and result.stdout == ""


def test_bad_since(tune: Tune) -> None:
    result = tune(EMBED_RULES, "--since", "seven days")
    assert result.returncode == 2
    assert "expected a duration such as 7d" in result.stderr and result.stdout == ""


def test_unreachable_prometheus(tune: Tune) -> None:
    result = tune(EMBED_RULES, "--since", "1h", "--prometheus", f"http://127.0.0.1:{free_port()}")
    assert result.returncode == 2
    assert result.stdout == ""
    assert len(result.stderr.strip().splitlines()) == 1 and "Traceback" not in result.stderr


def test_empty_history(tune: Tune, backfilled_prometheus: BackfilledPrometheus) -> None:
    rules = EMBED_RULES.replace('sum(rate(inference_requests_total{namespace="ml", service="embed"}[5m]))',
                                "sum(no_such_metric)")
    result = tune(rules, "--since", "1d", "--step", "5m", "--prometheus", backfilled_prometheus.url)
    assert result.returncode == 2
    assert "no sample of rule 'embed'" in result.stderr and result.stdout == ""


def test_the_recorded_replicas_are_the_leaders(backfilled_prometheus: BackfilledPrometheus) -> None:
    """After the history's failover the replica that lost its lease still shows its last count: the recorded
    replicas tune starts from (and rescales Average metrics by) are those of the replica that leads."""
    spec = backfilled_prometheus.spec
    at = spec.start + (FAILOVER_HOURS + 6) * HOUR
    rule = parse_rules(EMBED_RULES, "rules.yaml").get("embed")
    answer = requests.get(f"{backfilled_prometheus.url}/api/v1/query",
                          params={"query": recorded_query(rule), "time": at}, timeout=10).json()
    (series,) = answer["data"]["result"]
    assert float(series["value"][1]) == recorded_replicas(at - spec.start)
    stale = recorded_replicas(FAILOVER_HOURS * HOUR - 60)  # the old leader's last count
    assert stale > recorded_replicas(at - spec.start)  # max() over both replicas would read the stale one


def test_the_start_up_is_measured_from_kube_state_metrics_when_not_given(
        tune: Tune, backfilled_prometheus: BackfilledPrometheus) -> None:
    """Without --startup-seconds, the time from a rise of the Deployment's spec count to its ready replicas
    (tests/history.py: 180 s), the median over the range's scale-ups; a kind kube-state-metrics does not
    export is said, and tune still runs with replicas ready at once."""
    base = ["--since", "1d", "--step", "1m", "--prometheus", backfilled_prometheus.url]
    measured = json.loads(tune(EMBED_RULES, *base, "--json").stdout)
    assert measured["startup"]["seconds"] == STARTUP_SECONDS
    assert measured["startup"]["source"].startswith("measured: the median of ")
    rollout = EMBED_RULES.replace(
        "{kind: Deployment, namespace: ml, name: embed}",
        "{kind: Rollout, apiVersion: argoproj.io/v1alpha1, namespace: ml, name: embed}")
    result = tune(rollout, "--since", "1d", "--step", "5m", "--prometheus", backfilled_prometheus.url)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("start-up 0s (not measured: ") and "--startup-seconds" in result.stdout


def test_less_than_a_day_of_history_is_refused_with_what_there_is(
        tune: Tune, backfilled_prometheus: BackfilledPrometheus) -> None:
    """12 hours of samples at every step: what there is, what tune needs and the flag to change, exit 2."""
    result = tune(EMBED_RULES, "--since", "12h", "--step", "5m", "--prometheus", backfilled_prometheus.url)
    assert result.returncode == 2 and result.stdout == "", result.stderr
    assert "rule 'embed': too little history to recommend from: samples at 145 of 145 steps (100 %)" \
        in result.stderr
    assert "tune needs a day of history" in result.stderr and "give --since 1d or more" in result.stderr
