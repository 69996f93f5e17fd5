"""`gpu-fleet report` and `export` (their entry point, run in-process) against a real Prometheus holding 3
days of backfilled history (tests/history.py). Expected numbers are computed here from the generator's own
functions at the report's documented instants (start + k x 60 s, each seeing the last 5-minute sample), never
from a run."""

from __future__ import annotations

import csv
import io
import itertools
import json
import math
import sys
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import pytest

from demo.processes import free_port
from fleet.reporting.usage import workload_of
from tests.history import (
    GPU_STEP,
    GPUS_PER_NODE,
    HOUR,
    IDLE_POWER,
    MAX_REPLICAS,
    NODES,
    POWER_LIMIT,
    XIDS,
    BackfilledPrometheus,
    _health,
    _holder_at,
    _utilization,
    recorded_replicas,
)
from tests.measure import Measured, run_captured

FLEET = str(Path(sys.executable).parent / "gpu-fleet")
STEP = 60


def fleet(*args: str) -> Measured:
    """`gpu-fleet ARGS` through its entry point, in this process."""
    return run_captured([FLEET, *args])


def window(prom: BackfilledPrometheus) -> list[str]:
    return ["--prometheus", prom.url, "--since", "3d", "--until", str(prom.spec.end)]


def sample_at(start: int, t: int) -> int:
    """The offset of the sample a query at `t` sees: the last one at or before it."""
    return (t - start) // GPU_STEP * GPU_STEP


def watts(busy: float) -> float:
    return round(IDLE_POWER + (POWER_LIMIT - IDLE_POWER) * busy, 1)


def joules(node: int, gpu: int, offset: int) -> float:
    """The energy counter as written (6 significant digits) at sample `offset`."""
    total = 1.0e9 + 1.0e7 * (node * GPUS_PER_NODE + gpu)
    for o in range(0, offset + 1, GPU_STEP):
        total += watts(_utilization(node, gpu, o, _holder_at(node, gpu, o / HOUR))) * GPU_STEP
    return float(f"{round(total, 1):g}")


@pytest.fixture(scope="module")
def expected(backfilled_prometheus: BackfilledPrometheus) -> dict[str, Any]:
    spec = backfilled_prometheus.spec
    points = range(spec.start, spec.end + 1, STEP)
    per_step = STEP / 3600
    gpu_hours: Counter[str] = Counter()
    busy: Counter[str] = Counter()
    hourly: dict[tuple[int, int, str, int], list[float]] = defaultdict(list)
    power_cap: Counter[str] = Counter()
    for node in range(NODES):
        for gpu in range(GPUS_PER_NODE):
            for t in points:
                offset = sample_at(spec.start, t)
                holder = _holder_at(node, gpu, offset / HOUR)
                util = _utilization(node, gpu, offset, holder)
                namespace = holder.namespace if holder else "(unallocated)"
                names = [f"nodes:node-{node}", f"namespaces:{namespace}",
                         f"workloads:{holder.namespace}/{workload_of(holder.pod)}" if holder
                         else "workloads:(unallocated)"]
                for name in names:
                    gpu_hours[name] += per_step
                    busy[name] += util * per_step
                hourly[(node, gpu, holder.pod if holder else "", (t - spec.start) // HOUR)].append(util)
                if watts(util) > 0.9 * POWER_LIMIT:
                    power_cap[f"node-{node}"] += per_step
    idle: Counter[str] = Counter()
    for (_, _, pod, _), values in hourly.items():
        if pod and sum(values) / len(values) < 0.05:
            idle[pod] += len(values) * per_step
    last = spec.end - spec.start
    energy = {f"node-{n}": sum(joules(n, g, last) - joules(n, g, 0) for g in range(GPUS_PER_NODE)) / 3.6e6
              for n in range(NODES)}
    replicas = [recorded_replicas(t - spec.start) for t in points]
    changes = [(a, b) for a, b in itertools.pairwise(replicas) if a != b]
    spells: list[tuple[str, int, int]] = []
    for t in points:
        state = _health(2, 1, sample_at(spec.start, t) / HOUR)
        if state != "optimal":
            if spells and spells[-1][0] == state:
                spells[-1] = (state, spells[-1][1], spells[-1][2] + STEP)
            else:
                spells.append((state, t, STEP))
    xids = [(spec.start + math.ceil(at * HOUR / GPU_STEP) * GPU_STEP, code)
            for (_, _), events in XIDS.items() for at, code in events]
    return {"gpu_hours": gpu_hours, "busy": busy, "idle": idle, "energy": energy, "power_cap": power_cap,
            "ups": sum(1 for a, b in changes if b > a), "downs": sum(1 for a, b in changes if b < a),
            "at_max": sum(1 for r in replicas if r >= MAX_REPLICAS) * STEP, "spells": spells, "xids": xids}


@pytest.fixture(scope="module")
def report(backfilled_prometheus: BackfilledPrometheus) -> dict[str, Any]:
    result = fleet("report", *window(backfilled_prometheus), "--format", "json",
                   "--price-per-gpu-hour", "2.5", "--price-per-kwh", "0.3")
    assert result.returncode == 0, result.stderr
    assert result.stderr.count("query ") == 8  # a progress line per query
    document: dict[str, Any] = json.loads(result.stdout)
    return document


def rows(report: dict[str, Any], table: str) -> dict[str, dict[str, Any]]:
    return {row["name"]: row for row in report[table]}


def test_gpu_hours_and_utilization_match_the_generator(report: dict[str, Any],
                                                        expected: dict[str, Any]) -> None:
    for table in ("nodes", "namespaces", "workloads"):
        got = rows(report, table)
        for name, row in got.items():
            key = f"{table}:{name}"
            assert row["gpu_hours"] == pytest.approx(expected["gpu_hours"][key], rel=1e-9), key
            assert row["busy_gpu_hours"] == pytest.approx(expected["busy"][key], rel=1e-6), key
            assert isinstance(row["utilization"], float)
        assert {f"{table}:{name}" for name in got} == {k for k in expected["gpu_hours"]
                                                      if k.startswith(f"{table}:")}
    assert set(rows(report, "workloads")) == {"ml/embed", "research/train", "research/batch-job",
                                              "(unallocated)"}
    # the batch job holds node-2's GPU 2 during the second day only
    assert rows(report, "workloads")["research/batch-job"]["gpu_hours"] == pytest.approx(24.0)
    assert report["total"]["gpu_cost"] == pytest.approx(report["total"]["gpu_hours"] * 2.5)


def test_allocated_but_idle_is_ranked_and_matches(report: dict[str, Any], expected: dict[str, Any]) -> None:
    ranked = report["allocated_idle"]
    assert [h["pod"] for h in ranked] == sorted(expected["idle"], key=lambda p: -expected["idle"][p])
    for hold in ranked:
        assert hold["idle_gpu_hours"] == pytest.approx(expected["idle"][hold["pod"]], rel=1e-9)
    idle = [h["idle_gpu_hours"] for h in ranked]
    assert idle == sorted(idle, reverse=True)


def test_energy_throttling_incidents_xids(report: dict[str, Any], expected: dict[str, Any]) -> None:
    for name, row in rows(report, "nodes").items():
        assert row["energy_kwh"] == pytest.approx(expected["energy"][name], rel=1e-9)
        assert row["energy_cost"] == pytest.approx(row["energy_kwh"] * 0.3)
    capped = {t["node"]: t["gpu_hours"] for t in report["throttling"] if t["reason"] == "sw_power_cap"}
    assert capped == pytest.approx(dict(expected["power_cap"]))
    spells = [(i["state"], i["start"], i["duration_seconds"]) for i in report["incidents"]]
    assert spells == expected["spells"]
    assert {(i["node"], i["gpu"]) for i in report["incidents"]} == {("node-2", 1)}
    assert [(x["time"], x["xid"]) for x in report["xids"]] == expected["xids"]
    assert {(x["node"], x["gpu"], x["count"]) for x in report["xids"]} == {("node-1", 2, 1.0)}


def test_autoscaler_scale_events_and_time_at_max(report: dict[str, Any], expected: dict[str, Any]) -> None:
    (rule,) = report["rules"]
    assert (rule["namespace"], rule["rule"]) == ("ml", "embed")
    assert (rule["scale_ups"], rule["scale_downs"]) == (expected["ups"], expected["downs"])
    assert len(report["scale_events"]) == expected["ups"] + expected["downs"]
    assert rule["seconds_at_max"] == expected["at_max"] > 0
    assert sum(rule["reason_shares"].values()) == pytest.approx(1.0)


def test_md_and_html(tmp_path: Path, backfilled_prometheus: BackfilledPrometheus,
                     expected: dict[str, Any]) -> None:
    md = fleet("report", *window(backfilled_prometheus), "--quiet")
    assert md.returncode == 0 and md.stderr == ""
    for heading in ("## Per node", "## Per namespace", "## Per workload", "## Allocated but idle",
                    "## Health incidents", "## XID errors", "## Autoscaler", "| research/batch-job |"):
        assert heading in md.stdout
    wide = fleet("report", *window(backfilled_prometheus), "-o", "wide", "--quiet")
    assert wide.returncode == 0, wide.stderr
    assert "| idle share | average W per GPU |" in wide.stdout
    events = wide.stdout.split("## Scale events\n\n")[1].splitlines()[2:]
    assert len(events) == expected["ups"] + expected["downs"] and all(" | ml | embed | " in e for e in events)
    assert "## Scale events" not in md.stdout and "| idle share |" not in md.stdout
    html = fleet("report", *window(backfilled_prometheus), "--format", "html", "--out", str(tmp_path / "r"),
                 "--quiet")
    assert html.returncode == 0, html.stderr
    page = (tmp_path / "r" / "report.html").read_text()
    for png in ("utilization.png", "idle-by-namespace.png", "incidents.png"):
        assert f'src="{png}"' in page
        assert (tmp_path / "r" / png).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_export_csv_and_json(backfilled_prometheus: BackfilledPrometheus) -> None:
    spec = backfilled_prometheus.spec
    until = spec.start + 24 * HOUR + 600  # the batch job holds node-2 GPU 2 from hour 24 on
    args = ["--prometheus", backfilled_prometheus.url, "--since", "15m", "--until", str(until)]
    result = fleet("export", *args)
    assert result.returncode == 0, result.stderr
    table = list(csv.DictReader(io.StringIO(result.stdout)))
    assert list(table[0]) == ["time", "node", "gpu", "uuid", "model", "namespace", "pod", "utilization",
                              "memory_used_bytes", "memory_total_bytes", "power_watts", "temperature_celsius",
                              "health"]
    assert len(table) == 16 * NODES * GPUS_PER_NODE
    for row in table:
        t, node, gpu = int(row["time"]), int(row["node"][5:]), int(row["gpu"])
        offset = sample_at(spec.start, t)
        holder = _holder_at(node, gpu, offset / HOUR)
        assert row["pod"] == (holder.pod if holder else "")
        assert float(row["utilization"]) == pytest.approx(_utilization(node, gpu, offset, holder))
        assert row["health"] == _health(node, gpu, offset / HOUR) and row["temperature_celsius"] == ""
    data = fleet("export", *args, "--format", "json", "--series", "utilization,power_watts")
    assert data.returncode == 0, data.stderr
    records = json.loads(data.stdout)
    assert len(records) == len(table)
    assert set(records[0]) == {"time", "node", "gpu", "uuid", "model", "namespace", "pod", "utilization",
                               "power_watts"}
    assert all(isinstance(r["utilization"], float) and isinstance(r["time"], float) for r in records)
    assert [r["gpu"] for r in records] == [int(row["gpu"]) for row in table]  # integer indexes in JSON
    wide = fleet("export", *args, "-o", "wide", "--series", "memory_total_bytes")
    assert wide.returncode == 0, wide.stderr
    header, *lines = wide.stdout.splitlines()
    assert header.split() == ["TIME", "NODE", "GPU", "UUID", "MODEL", "MEMORY", "TOTAL", "POD"]
    assert len(lines) == len(table) and lines[0].split()[2:4] == [table[0]["gpu"], table[0]["uuid"]]
    assert "  80.0 GiB  " in lines[0]


@pytest.mark.parametrize(("command", "args", "flag"), [
    ("report", ["--since", "nope"], "--since"),
    ("report", ["--price-per-gpu-hour", "-1"], "--price-per-gpu-hour"),
    ("report", ["--price-per-kwh", "cheap"], "--price-per-kwh"),
    ("report", ["--format", "pdf"], "--format"),
    ("report", ["--format", "html"], "--out"),
    ("export", ["--format", "xml"], "--format"),
    ("export", ["--series", "nope"], "--series"),
    ("export", ["--since", "30d"], "10,000"),
])
def test_bad_flags_are_one_line_and_exit_2(command: str, args: list[str], flag: str,
                                           backfilled_prometheus: BackfilledPrometheus) -> None:
    result = fleet(command, "--prometheus", backfilled_prometheus.url, *args)
    assert result.returncode == 2
    assert result.stdout == ""
    assert result.stderr.count("\n") == 1 and flag in result.stderr, result.stderr


@pytest.mark.parametrize("command", ["report", "export"])
def test_an_unreachable_prometheus_is_one_line(command: str) -> None:
    result = fleet(command, "--prometheus", f"http://127.0.0.1:{free_port()}", "--quiet"
                   if command == "report" else "--since=5m")
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1 and "cannot reach Prometheus" in result.stderr, result.stderr
