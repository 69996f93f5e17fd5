"""dashboards/: the committed JSON is what scripts/gen_dashboards.py produces, and each dashboard imports the
same through the UI and through file provisioning: bare object, no `id`, stable lowercase uid, current
schemaVersion, `${datasource}` on every panel and target, units everywhere, only existing series queried."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.unit.shipping.promql_names import ROOT, known_names, metric_names
from tests.unit.shipping.test_rules import load_script

DASHBOARD_DIR = ROOT / "dashboards"
DASHBOARD_FILES = sorted(DASHBOARD_DIR.glob("*.json"))
DATASOURCE = {"type": "prometheus", "uid": "${datasource}"}
EXPECTED_VARIABLES = {
    "gpu-fleet.json": {"datasource", "node", "gpu"},
    "gpu-workloads.json": {"datasource", "namespace"},
    "gpu-autoscaler.json": {"datasource", "rule"},
}
GRAFANA_VARIABLES = {"__rate_interval", "__range", "__range_s", "__interval"}


def load(path: Path) -> dict[str, Any]:
    return json.loads(path.read_text())


def data_panels(dashboard: dict[str, Any]) -> list[dict[str, Any]]:
    """The panels that show data: every panel but the row headers."""
    return [panel for panel in dashboard["panels"] if panel["type"] != "row"]


def all_targets(dashboard: dict[str, Any]) -> list[dict[str, Any]]:
    return [t for panel in data_panels(dashboard) for t in panel["targets"]]


def test_the_three_dashboards_exist() -> None:
    assert {p.name for p in DASHBOARD_FILES} == set(EXPECTED_VARIABLES)


def test_committed_json_is_generated() -> None:
    generator = load_script("gen_dashboards")
    rendered = generator.render_all()
    for name, text in rendered.items():
        assert (DASHBOARD_DIR / name).read_text() == text, f"{name}: run python scripts/gen_dashboards.py"
    result = subprocess.run([sys.executable, str(ROOT / "scripts" / "gen_dashboards.py"), "--check"],
                            capture_output=True, text=True, timeout=60, check=False)
    assert result.returncode == 0, result.stderr


def test_sync_check_detects_a_hand_edit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    generator = load_script("gen_dashboards")
    for name, text in generator.render_all().items():
        (tmp_path / name).write_text(text.replace('"celsius"', '"fahrenheit"'))
    monkeypatch.setattr(generator, "OUT_DIR", tmp_path)
    assert generator.main(["--check"]) == 1


@pytest.mark.parametrize("path", DASHBOARD_FILES, ids=lambda p: p.name)
def test_dashboard_is_a_bare_importable_object(path: Path) -> None:
    dashboard = load(path)
    assert "id" not in dashboard and "dashboard" not in dashboard and "__inputs" not in dashboard
    assert re.fullmatch(r"[a-z0-9-]{1,40}", dashboard["uid"])
    assert dashboard["schemaVersion"] == 39
    assert "${DS_" not in path.read_text()


def test_uids_are_unique() -> None:
    uids = [load(p)["uid"] for p in DASHBOARD_FILES]
    assert len(set(uids)) == len(uids)


@pytest.mark.parametrize("path", DASHBOARD_FILES, ids=lambda p: p.name)
def test_every_panel_and_target_uses_the_datasource_variable(path: Path) -> None:
    dashboard = load(path)
    variables = {v["name"]: v for v in dashboard["templating"]["list"]}
    datasource = variables["datasource"]
    assert datasource["type"] == "datasource" and datasource["query"] == "prometheus"
    for variable in variables.values():
        if variable["type"] == "query":
            assert variable["datasource"] == DATASOURCE
    for panel in data_panels(dashboard):
        assert panel["datasource"] == DATASOURCE, panel["title"]
        assert panel["targets"], panel["title"]
        for target in panel["targets"]:
            assert target["datasource"] == DATASOURCE, panel["title"]


@pytest.mark.parametrize("path", DASHBOARD_FILES, ids=lambda p: p.name)
def test_every_panel_has_a_unit_an_id_and_fits_the_grid(path: Path) -> None:
    dashboard = load(path)
    ids = [panel["id"] for panel in dashboard["panels"]]
    assert len(set(ids)) == len(ids)
    for panel in data_panels(dashboard):
        assert panel["fieldConfig"]["defaults"]["unit"], panel["title"]
        grid = panel["gridPos"]
        assert grid["x"] >= 0 and grid["x"] + grid["w"] <= 24, panel["title"]
        refs = [t["refId"] for t in panel["targets"]]
        assert len(set(refs)) == len(refs)


@pytest.mark.parametrize("path", DASHBOARD_FILES, ids=lambda p: p.name)
def test_variables_are_declared_and_used(path: Path) -> None:
    dashboard = load(path)
    declared = {v["name"] for v in dashboard["templating"]["list"]}
    assert declared == EXPECTED_VARIABLES[path.name]
    used = set()
    for target in all_targets(dashboard):
        used |= set(re.findall(r"\$\{?(\w+)", target["expr"]))
    assert used - GRAFANA_VARIABLES <= declared
    assert declared - {"datasource"} <= used, "a declared variable no panel filters on"


@pytest.mark.parametrize("path", DASHBOARD_FILES, ids=lambda p: p.name)
def test_queries_read_only_existing_series(path: Path) -> None:
    known = known_names()
    dashboard = load(path)
    queries = [t["expr"] for t in all_targets(dashboard)]
    queries += [v["query"]["query"] for v in dashboard["templating"]["list"] if v["type"] == "query"]
    for expr in queries:
        unknown = metric_names(re.sub(r"label_values\((.*?),\s*\w+\)", r"\1", expr)) - known
        assert not unknown, f"{path.name}: {expr} reads unknown series {unknown}"


def test_fleet_dashboard_covers_the_issue() -> None:
    exprs = " ".join(t["expr"] for t in all_targets(load(DASHBOARD_DIR / "gpu-fleet.json")))
    for name in ("gpu_utilization_ratio", "gpu_memory_used_bytes", "gpu_temperature_celsius",
                 "gpu_power_usage_watts", "gpu_energy_consumption_joules_total", "gpu_sm_clock_hertz",
                 "gpu_clocks_event_reason_active", "gpu_ecc_errors_total", "gpu_xid_errors_total",
                 "gpu_health_state", "gpu_availability_score"):
        assert name in exprs, name


def test_provisioning_provider_points_at_a_directory() -> None:
    provider = yaml.safe_load((DASHBOARD_DIR / "provisioning" / "dashboards.yaml").read_text())
    assert provider["apiVersion"] == 1
    (entry,) = provider["providers"]
    assert entry["type"] == "file" and entry["options"]["path"].startswith("/")


def test_fleet_dashboard_has_the_profiling_row_per_gpu_and_per_pod() -> None:
    panels = load(DASHBOARD_DIR / "gpu-fleet.json")["panels"]
    rows = [i for i, p in enumerate(panels) if p["type"] == "row"]
    assert [panels[i]["title"] for i in rows] == ["Profiling (GPM: Hopper and newer)"]
    header = panels[rows[0]]
    assert header["gridPos"]["w"] == 24 and header["gridPos"]["x"] == 0 and not header["collapsed"]
    below = panels[rows[0] + 1:]
    assert len(below) == 6 and all(p["gridPos"]["y"] > header["gridPos"]["y"] for p in below)
    by_title = {p["title"]: p for p in panels}
    for activity, series in (("SM active", "gpu_sm_active_ratio"),
                             ("Tensor pipe active", "gpu_tensor_active_ratio"),
                             ("DRAM active", "gpu_dram_active_ratio")):
        for scope in ("GPU", "pod"):
            (target,) = by_title[f"{activity} per {scope}"]["targets"]
            assert series in target["expr"]
            assert ("by (namespace, pod)" in target["expr"]) == (scope == "pod")
