"""rules/: promtool accepts the rule files and their unit tests pass; every alert is complete, documented in
the runbook and in the alert table of docs/alerts-dashboards-manifests.md, and unit-tested both firing and
silent; recording rules never collide with scraped series; the PrometheusRule of the operator overlay is
generated from the same source."""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import yaml

from demo.processes import promtool
from tests.unit.shipping.markdown import github_anchor
from tests.unit.shipping.promql_names import (
    CONTRACT_EXPORTER_NAMES,
    LLM_SERVER_NAMES,
    ROOT,
    RULE_FILES,
    exporter_names,
    known_names,
    metric_names,
    recorded_names,
    rule_groups,
)

RULE_TESTS = sorted((ROOT / "rules" / "tests").glob("*.test.yaml"))
RUNBOOK = ROOT / "docs" / "runbook.md"
ALERTS_DOC = ROOT / "docs" / "alerts-dashboards-manifests.md"
RUNBOOK_URL = "https://github.com/gpu-autoscaler/gpu-autoscaler/blob/main/docs/runbook.md#"
SEVERITIES = {"critical", "warning", "info"}
COMPAT_NAMES = {"gpu_utilization_percent", "gpu_memory_usage_mb", "gpu_memory_total_mb", "gpu_memory_free_mb"}
# dcgm-exporter's names, recorded by rules/gpu-dcgm-compat.rules.yaml (its etc/default-counters.csv spelling).
DCGM_NAME = re.compile(r"DCGM_FI_(DEV|PROF)_[A-Z0-9_]+")
# Our users' alert names and thresholds (from the project's gpu-resource-optimizer seed), kept as they are.
SEED_ALERTS = {"HighGPUMemoryUsage": ("5m", "warning"), "GPUTemperatureHigh": ("2m", "critical")}
# Alerts on per-GPU counters are keyed on the device (holder labels aggregated away) and name the holder from
# gpu_allocation_info when they are evaluated.
HOLDER_LOOKUP = 'query (printf `max by (namespace, pod) (gpu_allocation_info{node="%s", uuid="%s"})`'
DEVICE_KEYED_ALERTS = ("GPUFallenOffBus", "GPUXidErrors", "GPUUncorrectableECCErrors")


def alerts() -> list[dict[str, Any]]:
    return [rule for group in rule_groups() for rule in group["rules"] if "alert" in rule]  # type: ignore[attr-defined]


def load_script(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, ROOT / "scripts" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def test_promtool_check_rules_is_clean() -> None:
    result = promtool("check", "rules", *map(str, RULE_FILES))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS" in result.stdout and "WARNING" not in result.stdout + result.stderr


@pytest.mark.parametrize("test_file", RULE_TESTS, ids=lambda p: p.name)
def test_promtool_unit_tests_pass(test_file: Path) -> None:
    result = promtool("test", "rules", str(test_file))
    assert result.returncode == 0, result.stdout + result.stderr


def test_promtool_unit_tests_can_fail(tmp_path: Path) -> None:
    """The unit tests are not vacuous: a firing expectation with the wrong severity fails promtool."""
    doc = yaml.safe_load((ROOT / "rules" / "tests" / "gpu-alerts.test.yaml").read_text())
    doc["rule_files"] = [str(ROOT / "rules" / "gpu-autoscaler-alerts.rules.yaml")]
    for group in doc["tests"]:
        for case in group.get("alert_rule_test", []):
            for expected in case.get("exp_alerts") or []:
                expected["exp_labels"]["severity"] = "page"
    broken = tmp_path / "broken.test.yaml"
    broken.write_text(yaml.safe_dump(doc))
    assert promtool("test", "rules", str(broken)).returncode != 0


def test_every_alert_is_unit_tested_firing_and_silent() -> None:
    firing: set[str] = set()
    silent: set[str] = set()
    for path in RULE_TESTS:
        for group in yaml.safe_load(path.read_text())["tests"]:
            for case in group.get("alert_rule_test", []):
                (firing if case.get("exp_alerts") else silent).add(case["alertname"])
    names = {a["alert"] for a in alerts()}
    assert names - firing == set(), "alerts never tested firing"
    assert names - silent == set(), "alerts never tested silent"
    assert (firing | silent) - names == set(), "tests of alerts that do not exist"


@pytest.mark.parametrize("alert", alerts(), ids=lambda a: a["alert"])
def test_alert_is_complete(alert: dict[str, Any]) -> None:
    assert alert["labels"]["severity"] in SEVERITIES
    annotations = alert["annotations"]
    assert {"summary", "description", "runbook_url"} <= set(annotations)
    text = annotations["summary"] + annotations["description"]
    assert "$value" in text, "the annotations must show the value"
    gpu_scoped = any(name.startswith("gpu_") and not name.startswith(("gpu_autoscaler_", "gpu_exporter_"))
                     for name in metric_names(alert["expr"]))
    if gpu_scoped and "gpus" not in alert["expr"]:
        for label in ("$labels.gpu", "$labels.node"):
            assert label in text, f"{label} missing from the annotations"
        # The holder: its label, or looked up at alert time (alerts keyed on the device, robust to churn).
        assert "$labels.pod" in text or HOLDER_LOOKUP in text, "the annotations must name the holding pod"
    assert re.fullmatch(r"\d+[smh]", alert.get("for", "0s")), "for: must be a plain duration"


def test_runbook_has_a_section_per_alert() -> None:
    lines = RUNBOOK.read_text().splitlines()
    headings = {github_anchor(line[3:]) for line in lines if line.startswith("## ")}
    for alert in alerts():
        url = alert["annotations"]["runbook_url"]
        assert url.startswith(RUNBOOK_URL), url
        anchor = url[len(RUNBOOK_URL):]
        assert anchor == alert["alert"].lower(), url
        assert anchor in headings, f"{alert['alert']}: no runbook section {anchor}"


def test_docs_alert_table_lists_every_alert_with_its_severity_and_for() -> None:
    text = ALERTS_DOC.read_text()
    start = text.index("## Alerting rules")
    section = text[start:text.index("\n## ", start + 1)]
    rows = re.findall(r"^\| `(\w+)` \| (\w+) \| (\w+) \|", section, re.MULTILINE)
    table = {name: (severity, for_) for name, severity, for_ in rows}
    shipped = {a["alert"]: (a["labels"]["severity"], a.get("for", "0s")) for a in alerts()}
    assert table == shipped


@pytest.mark.parametrize(("name", "expected"), SEED_ALERTS.items())
def test_seed_alerts_keep_their_name_for_and_severity(name: str, expected: tuple[str, str]) -> None:
    (alert,) = [a for a in alerts() if a["alert"] == name]
    assert (alert["for"], alert["labels"]["severity"]) == expected


def test_every_queried_series_exists() -> None:
    """A misspelt metric name is not a PromQL error: it silently matches nothing. Catch it here."""
    known = known_names()
    for group in rule_groups():
        for rule in group["rules"]:  # type: ignore[attr-defined]
            unknown = metric_names(rule["expr"]) - known
            assert not unknown, f"{rule.get('alert') or rule.get('record')} reads unknown series {unknown}"


def test_the_exporter_serves_every_contract_name_the_rules_use() -> None:
    assert exporter_names() >= CONTRACT_EXPORTER_NAMES


def test_recording_rules_never_collide_with_scraped_series() -> None:
    recorded = recorded_names()
    assert recorded & exporter_names() == set()
    # Served by the exporter under the users' names with the same meaning and unit: not recorded again.
    assert {"gpu_temperature_celsius", "gpu_power_usage_watts"} <= exporter_names()
    assert recorded >= COMPAT_NAMES


def test_aggregation_rules_follow_the_naming_convention() -> None:
    for name in recorded_names() - COMPAT_NAMES:
        if name.startswith("DCGM_"):
            assert DCGM_NAME.fullmatch(name), name
            continue
        assert re.fullmatch(r"[a-z_]+:[a-z0-9_]+:[a-z0-9_]+", name), name


def test_prometheusrule_is_in_sync_with_the_rule_files() -> None:
    generator = load_script("gen_prometheusrule")
    assert generator.OUTPUT.read_text() == generator.render(), "run python scripts/gen_prometheusrule.py"
    result = subprocess.run([sys.executable, str(ROOT / "scripts" / "gen_prometheusrule.py"), "--check"],
                            capture_output=True, text=True, timeout=60, check=False)
    assert result.returncode == 0, result.stderr
    spec_groups = yaml.safe_load(generator.OUTPUT.read_text())["spec"]["groups"]
    by_name = lambda groups: sorted(groups, key=lambda g: g["name"])  # noqa: E731
    assert by_name(spec_groups) == by_name(rule_groups())


def test_prometheusrule_spec_passes_promtool(tmp_path: Path) -> None:
    generator = load_script("gen_prometheusrule")
    spec = yaml.safe_load(generator.OUTPUT.read_text())["spec"]
    path = tmp_path / "from-prometheusrule.yaml"
    path.write_text(yaml.safe_dump({"groups": spec["groups"]}))
    result = promtool("check", "rules", str(path))
    assert result.returncode == 0, result.stdout + result.stderr


def test_sync_check_detects_drift(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    generator = load_script("gen_prometheusrule")
    stale = tmp_path / "prometheusrule.yaml"
    stale.write_text(generator.render().replace("for: 2m", "for: 3m"))
    monkeypatch.setattr(generator, "OUTPUT", stale)
    assert generator.main(["--check"]) == 1


@pytest.mark.parametrize("name", DEVICE_KEYED_ALERTS)
def test_counter_alerts_are_keyed_on_the_device(name: str) -> None:
    """A new holder or a kubelet flap starts a new series carrying the old count: an expression that keeps
    namespace/pod/container, or compares a raw series with its own offset, re-fires for old errors. The
    promtool cases in rules/tests/label-churn.test.yaml prove the behaviour; this pins the shape."""
    (alert,) = [a for a in alerts() if a["alert"] == name]
    expr = " ".join(alert["expr"].split())
    groupings = re.findall(r"\b(by|on) \(([^()]*)\)", expr)
    assert {kind for kind, _ in groupings} == {"by", "on"}, f"{name}: no max by (...) / unless on (...)"
    for kind, grouping in groupings:
        labels = {label.strip() for label in grouping.split(",")}
        assert {"node", "uuid"} <= labels, f"{name}: {kind} ({grouping}) is not keyed on the device"
        holder = labels & {"namespace", "pod", "container"}
        assert not holder, f"{name}: {kind} ({grouping}) keeps holder labels {holder}"
    assert "unless on (" in expr, f"{name}: the first-error branch must match on the device"
    assert HOLDER_LOOKUP in alert["annotations"]["description"]


DCGM_RULES_FILE = ROOT / "rules" / "gpu-dcgm-compat.rules.yaml"
DCGM_TEST_FILE = ROOT / "rules" / "tests" / "dcgm-compat.test.yaml"
# dcgm-exporter's label (target) from ours (source), as every DCGM series must carry it.
DCGM_LABELS = (("UUID", "$1", "uuid"), ("modelName", "$1", "model"), ("Hostname", "$1", "node"),
               ("hostname", "$1", "node"), ("kubernetes_node", "$1", "node"), ("device", "nvidia$1", "gpu"),
               ("GPU_I_ID", "$1", "gpu_instance_id"), ("GPU_I_PROFILE", "$1", "mig_profile"))


def dcgm_rules() -> list[dict[str, str]]:
    return [rule for group in rule_groups([DCGM_RULES_FILE]) for rule in group["rules"]  # type: ignore[attr-defined]
            if rule["record"].startswith("DCGM_")]


@pytest.mark.parametrize("rule", dcgm_rules(), ids=lambda r: r["record"])
def test_dcgm_series_carry_every_dcgm_exporter_label(rule: dict[str, str]) -> None:
    expr = " ".join(rule["expr"].split())
    for target, replacement, source in DCGM_LABELS:
        assert f'"{target}", "{replacement}", "{source}", "(.+)")' in expr, f"{rule['record']}: no {target}"


def test_every_dcgm_series_is_pinned_by_a_promtool_test() -> None:
    tested = {case["expr"] for group in yaml.safe_load(DCGM_TEST_FILE.read_text())["tests"]
              for case in group["promql_expr_test"]}
    assert {rule["record"] for rule in dcgm_rules()} - tested == set()


def test_the_llm_signals_page_names_every_server_series_the_rules_read() -> None:
    page = (ROOT / "docs" / "llm-signals.md").read_text()
    for name in LLM_SERVER_NAMES:
        assert f"`{name.removesuffix('_bucket')}" in page, name
