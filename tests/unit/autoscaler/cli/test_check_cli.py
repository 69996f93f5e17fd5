"""`gpu-autoscaler check` without Prometheus, as a subprocess: 0 when valid, else every problem and 2."""

from __future__ import annotations

import json
from pathlib import Path

from tests.measure import Run


def test_valid_file(cli: Run, two_rules_file: Path) -> None:
    result = cli("check", str(two_rules_file))
    assert (result.returncode, result.stderr) == (0, "")
    assert result.stdout == f"{two_rules_file}: OK: 2 rule(s), 3 metric(s)\n"


def test_json_of_a_valid_and_an_invalid_file(cli: Run, two_rules_file: Path, tmp_path: Path) -> None:
    result = cli("check", "--rules", str(two_rules_file), "-o", "json")
    assert (result.returncode, result.stderr) == (0, "")
    assert json.loads(result.stdout) == {"schemaVersion": 1, "file": str(two_rules_file), "ok": True,
                                         "rules": 2, "metrics": 3, "endpoints": [], "answered": [],
                                         "problems": []}
    (tmp_path / "bad.yaml").write_text("rules:\n  - name: a\n    maxReplicas: x\n")
    result = cli("check", "--rules", "bad.yaml", "-o", "json")
    document = json.loads(result.stdout)
    assert result.returncode == 2 and document["ok"] is False and document["rules"] is None
    assert document["problems"] and all(p["file"] == "bad.yaml" and p["line"] >= 1
                                        for p in document["problems"])


def test_every_problem_printed_then_exit_2(cli: Run, tmp_path: Path) -> None:
    (tmp_path / "bad.yaml").write_text(
        "rules:\n"
        "  - name: a\n"
        "    target: {kind: Deployment, namespace: ml, name: a}\n"
        "    minReplicas: 4\n"
        "    maxReplicas: 2\n"
        "    metrics: [{name: u, query: up, type: Avg, target: 1}]\n"
        "    behavior: {scaleUp: {policies: [{type: Pods, value: 1, periodSeconds: 3600}]}}\n"
    )
    result = cli("check", "bad.yaml")
    assert result.returncode == 2
    assert result.stdout.splitlines() == [
        "bad.yaml:5: rules[0].maxReplicas: expected maxReplicas >= minReplicas (got 2 < 4)",
        "bad.yaml:6: rules[0].metrics[0].type: expected one of Average, Total (got 'Avg')",
        "bad.yaml:7: rules[0].behavior.scaleUp.policies[0].periodSeconds: expected an integer in [1, 1800] "
        "(got 3600)",
        "bad.yaml: 3 problem(s)",
    ]
    assert "Traceback" not in result.stderr


def test_missing_file(cli: Run) -> None:
    result = cli("check", "absent.yaml")
    assert result.returncode == 2
    assert (
        result.stdout.splitlines()[0]
        == "absent.yaml: not found"
    )


def test_usage_error_is_exit_2(cli: Run) -> None:
    result = cli("check")
    assert result.returncode == 2
    assert "the following arguments are required: --rules FILE" in result.stderr
