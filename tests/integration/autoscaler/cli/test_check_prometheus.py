"""`gpu-autoscaler check --prometheus` (its entry point, in-process) against a real Prometheus: each query
once, every kind of problem."""

from __future__ import annotations

import contextlib
import json
import sys
from pathlib import Path

import pytest

from demo.processes import ManagedProcess, free_port
from tests.integration.autoscaler.cli.conftest import instant
from tests.measure import Measured, run_captured
from tests.support import wait_for

pytestmark = pytest.mark.integration

CLI = str(Path(sys.executable).parent / "gpu-autoscaler")


def rules_with(*metrics: tuple[str, str]) -> str:
    lines = [
        "rules:",
        "  - name: svc",
        "    target: {kind: Deployment, namespace: ml, name: svc}",
        "    maxReplicas: 4",
        "    metrics:",
    ]
    for name, query in metrics:
        lines.append(f"      - {{name: {name}, query: '{query}', type: Average, target: 1}}")
    return "\n".join(lines) + "\n"


def check(tmp_path: Path, text: str, url: str) -> Measured:
    """`gpu-autoscaler check rules.yaml --prometheus URL` through its entry point, in this process."""
    (tmp_path / "rules.yaml").write_text(text)
    with contextlib.chdir(tmp_path):
        return run_captured([CLI, "check", "rules.yaml", "--prometheus", url, "--timeout", "10"])


def test_good_queries_report_their_value(prometheus: ManagedProcess, tmp_path: Path) -> None:
    text = rules_with(
        ("one", "vector(1)"),
        ("self", 'up{job="prometheus"}'),
        ("count", "count(up)"),
        ("scalar", "scalar(count(up))"),
        ("again", "vector(1)"),
    )
    result = check(tmp_path, text, prometheus.url)
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.splitlines() == [
        "rules.yaml:6: rules[0].metrics[0].query: ok: svc/one = 1 (target 1, Average)",
        "rules.yaml:7: rules[0].metrics[1].query: ok: svc/self = 1 (target 1, Average)",
        "rules.yaml:8: rules[0].metrics[2].query: ok: svc/count = 2 (target 1, Average)",
        "rules.yaml:9: rules[0].metrics[3].query: ok: svc/scalar = 2 (target 1, Average)",
        "rules.yaml:10: rules[0].metrics[4].query: ok: svc/again = 1 (target 1, Average)",
        f"rules.yaml: OK: 1 rule(s), 5 metric(s), every query returned one value from {prometheus.url}",
    ]


def test_json_has_the_answers_and_problems_and_prometheus_url_is_read(
        prometheus: ManagedProcess, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`-o json` with the URL from $PROMETHEUS_URL alone: every query was sent there."""
    (tmp_path / "rules.yaml").write_text(rules_with(("one", "vector(1)"), ("none", "absent(up)")))
    monkeypatch.setenv("PROMETHEUS_URL", prometheus.url)
    with contextlib.chdir(tmp_path):
        result = run_captured([CLI, "check", "--rules", "rules.yaml", "-o", "json"])
    document = json.loads(result.stdout)
    assert result.returncode == 2 and document["schemaVersion"] == 1 and document["ok"] is False
    assert (document["rules"], document["metrics"], document["endpoints"]) == (1, 2, [prometheus.url])
    assert document["answered"] == [{"file": "rules.yaml", "line": 6, "field": "rules[0].metrics[0].query",
                                     "message": "svc/one = 1 (target 1, Average)"}]
    assert [(p["line"], p["field"]) for p in document["problems"]] == [(7, "rules[0].metrics[1].query")]


def test_every_bad_query_is_a_problem_with_its_line(prometheus: ManagedProcess, tmp_path: Path) -> None:
    text = rules_with(
        ("two", "up"),
        ("none", 'up{job="nope"}'),
        ("nan", "vector(0) / 0"),
        ("range", "up[1m]"),
        ("good", "vector(3)"),
    )
    result = check(tmp_path, text, prometheus.url)
    assert result.returncode == 2
    lines = result.stdout.splitlines()
    assert lines[0] == "rules.yaml:10: rules[0].metrics[4].query: ok: svc/good = 3 (target 1, Average)"
    problems = lines[1:-1]
    assert problems[0] == (
        'rules.yaml:6: rules[0].metrics[0].query: query returned 2 series ({__name__="up", instance="'
        + prometheus.url.removeprefix("http://")
        + '", job="prometheus"}, {__name__="up", instance="'
        + prometheus.url.removeprefix("http://")
        + '", job="prometheus-again"}), expected one (wrap it in sum() or avg())'
    )
    assert problems[1] == (
        "rules.yaml:7: rules[0].metrics[1].query: query returned no series (does its selector match any "
        "series now? check the metric name and labels; if no series means 0, set the metric's whenEmpty: "
        "zero)"
    )
    assert problems[2] == (
        "rules.yaml:8: rules[0].metrics[2].query: query returned NaN; the autoscaler treats NaN "
        "and Inf as a failed metric"
    )
    assert problems[3] == (
        "rules.yaml:9: rules[0].metrics[3].query: query returned a range vector; the autoscaler "
        "needs an instant value (drop the [range] or wrap it in e.g. avg_over_time())"
    )
    assert len(problems) == 4
    assert lines[-1] == "rules.yaml: 4 problem(s)"


def test_capacity_query_and_when_empty(prometheus: ManagedProcess, tmp_path: Path) -> None:
    text = rules_with(("none", 'up{job="nope"}')).replace("target: 1}", "target: 1, whenEmpty: zero}")
    text += "    capacity: {query: 'count(up) * 3', gpusPerReplica: 2}\n"
    result = check(tmp_path, text, prometheus.url)
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.splitlines()[:2] == [
        "rules.yaml:6: rules[0].metrics[0].query: ok: svc/none = 0 (target 1, Average) (empty result, read "
        "as 0: whenEmpty zero)",
        "rules.yaml:7: rules[0].capacity.query: ok: svc/capacity = 6 free GPU(s), 2 per replica",
    ]
    failing = text.replace("count(up) * 3", 'up{job="nope"}')
    result = check(tmp_path, failing, prometheus.url)
    assert result.returncode == 2
    problem = result.stdout.splitlines()[1]
    assert problem.startswith("rules.yaml:7: rules[0].capacity.query: query returned no series"), problem
    broken = text.replace("count(up) * 3", "count(up")
    result = check(tmp_path, broken, prometheus.url)
    assert result.returncode == 2
    assert result.stdout.startswith("rules.yaml:7: capacity.query: PromQL syntax error")


def test_unreachable_prometheus_is_one_clear_error(tmp_path: Path) -> None:
    url = f"http://127.0.0.1:{free_port()}"
    result = check(tmp_path, rules_with(("one", "vector(1)")), url)
    assert result.returncode == 2
    assert result.stderr.startswith(f"cannot reach Prometheus at {url}: ")
    assert len(result.stderr.splitlines()) == 1
    assert "Traceback" not in result.stderr


def test_url_that_is_not_prometheus(prometheus: ManagedProcess, tmp_path: Path) -> None:
    result = check(tmp_path, rules_with(("one", "vector(1)")), prometheus.url + "/nothing-here")
    assert result.returncode == 2
    assert result.stdout.splitlines()[0] == (
        f"rules.yaml:6: rules[0].metrics[0].query: 404 from {prometheus.url}/nothing-here/api/v1/query: no "
        "Prometheus API there (check the url and its path prefix)")


def test_invalid_rules_are_reported_without_querying(prometheus: ManagedProcess, tmp_path: Path) -> None:
    result = check(tmp_path, rules_with(("t", "vector(1)")), prometheus.url)
    assert result.returncode == 2
    assert result.stdout.splitlines() == [
        "rules.yaml:6: rules[0].metrics[0].name: 't' is reserved (it is the time column of simulate traces)",
        "rules.yaml: 1 problem(s)",
    ]


def test_the_panic_window_query_runs_too_and_a_window_too_short_for_it_is_a_problem(
        prometheus: ManagedProcess, tmp_path: Path) -> None:
    good = rules_with(("up", "max(max_over_time(up[5m]))")) + "    behavior: {panic: {windowSeconds: 60}}\n"
    result = check(tmp_path, good, prometheus.url)
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.splitlines()[1] == (
        "rules.yaml:6: rules[0].behavior.panic.windowSeconds: ok: svc/up over 60s = 1")
    # three samples need two scrape intervals (1 s here): the 5 m window has them, a 1 s window never does
    samples = "sum(count_over_time(up[5m]) >= 3)"
    wait_for(lambda: instant(prometheus.url, samples), timeout=30)
    short = rules_with(("samples", samples)) + "    behavior: {panic: {windowSeconds: 1}}\n"
    result = check(tmp_path, short, prometheus.url)
    assert result.returncode == 2, result.stdout + result.stderr
    problem = result.stdout.splitlines()[1]
    assert problem.startswith("rules.yaml:6: rules[0].behavior.panic.windowSeconds: metric samples over 1s "
                              "(sum(count_over_time(up[1s]) >= 3)) failed: "), problem
    assert "twice the scrape interval" in problem


@pytest.mark.parametrize(("latency", "line"), [
    ("vector(0.3)",
     "rules.yaml:7: rules[0].slo.latency: ok: svc/latency = 0.3s (objective 0.5s, learns one)"),
    ("vector(0) / 0",
     "rules.yaml:7: rules[0].slo.latency: ok: svc/latency = NaN (no requests in its window) (objective "
     "0.5s, learns one)"),
])
def test_the_slo_latency_query_runs_once(prometheus: ManagedProcess, tmp_path: Path, latency: str,
                                         line: str) -> None:
    text = rules_with(("one", "vector(1)")) + (
        f"    slo: {{latency: '{latency}', objectiveSeconds: 0.5, learn: one, bounds: {{min: 1, max: 9}}}}\n")
    result = check(tmp_path, text, prometheus.url)
    assert result.returncode == 0, result.stdout + result.stderr
    assert line in result.stdout.splitlines()


def test_an_slo_latency_query_of_several_series_is_a_problem(prometheus: ManagedProcess,
                                                            tmp_path: Path) -> None:
    text = rules_with(("one", "vector(1)")) + (
        "    slo: {latency: 'up or vector(2)', objectiveSeconds: 0.5, learn: one,"
        " bounds: {min: 1, max: 9}}\n")
    result = check(tmp_path, text, prometheus.url)
    assert result.returncode == 2
    assert "rules.yaml:7: rules[0].slo.latency: " in result.stdout


def test_the_pod_deletion_cost_query_is_read_series_by_series(prometheus: ManagedProcess, tmp_path: Path,
                                                              ) -> None:
    text = rules_with(("up", "count(up)"))
    text += "    podDeletionCost: {query: 'sum by (job) (up)', podLabel: job}\n"
    result = check(tmp_path, text, prometheus.url)
    assert result.returncode == 0, result.stdout + result.stderr
    (line,) = [line for line in result.stdout.splitlines() if "podDeletionCost" in line]
    assert line.startswith("rules.yaml:7: rules[0].podDeletionCost.query: ok: svc/podDeletionCost = ")
    assert " pod(s) by job, busiest " in line
    result = check(tmp_path, text.replace("podLabel: job", "podLabel: pod"), prometheus.url)
    assert result.returncode == 2
    assert "rules.yaml:7: rules[0].podDeletionCost.query: none of its " in result.stdout
    assert "series has a finite value and a label 'pod'" in result.stdout
    failing = text.replace("sum by (job) (up)", 'label_replace(up, "pod", "$1", "job", "(")')
    result = check(tmp_path, failing, prometheus.url)
    assert result.returncode == 2
    assert "rules.yaml:7: rules[0].podDeletionCost.query: BadQuery: " in result.stdout, result.stdout
