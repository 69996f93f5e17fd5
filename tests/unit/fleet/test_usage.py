"""The report's numbers (fleet/reporting/usage.py, docs/fleet.md): the workload rule, then `compute` over
timelines built by hand, each expected number worked out in a comment."""

from __future__ import annotations

import json
from collections.abc import Mapping

import pytest

from fleet.reporting.fetch import Inputs, Timelines
from fleet.reporting.render_json import render_json
from fleet.reporting.render_md import render_md
from fleet.reporting.timeline import Point, Window
from fleet.reporting.usage import UNALLOCATED, Prices, RuleSummary, Usage, compute, mean_below, workload_of


@pytest.mark.parametrize(("pod", "workload"), [
    ("embed-7d9f8c6b5d-x7k2p", "embed"),
    ("embed-7d9f8-0", "embed"),
    ("train-0", "train"),
    ("batch-job-x7k2p", "batch-job"),
    ("vllm-llama-70b-6c5b8d9f47-qzx2m", "vllm-llama-70b"),
    ("notebook", "notebook"),
    ("web-server", "web-server"),
    ("cache-redis-12", "cache-redis"),
], ids=lambda value: value)
def test_workload_of(pod: str, workload: str) -> None:
    assert workload_of(pod) == workload


# compute(): Inputs built by hand. The window is two hours read every 15 minutes, so each point is a quarter
# of a GPU-hour and an hour of the window holds four points: k = 0..3 (hour 0), 4..7 (hour 1); k = 8 is the
# window's end. Every expected number is worked out in the comment beside it.

T0 = 1_800_000_000.0
STEP = 900.0
HOUR = 3600.0
WINDOW = Window(T0, T0 + 2 * HOUR, STEP)
EMBED = "embed-7d9f8c6b5d-x7k2p"  # a Deployment's pod: workload `embed`


def gpu(node: str, index: int, namespace: str = "", pod: str = "") -> dict[str, str]:
    """The labels of one GPU's series; no pod is an unallocated GPU."""
    return {"node": node, "gpu": str(index), "uuid": f"GPU-{node}-{index}",
            "namespace": namespace, "pod": pod}


def key(labels: Mapping[str, str], *extra: str) -> tuple[str, ...]:
    return (labels["node"], labels["uuid"], *extra)


def at(labels: Mapping[str, str], *values: float | None, first: int = 0) -> list[Point]:
    """Points at steps first, first + 1, ...; None is a step without a sample (a gap)."""
    return [Point(T0 + (first + k) * STEP, value, labels)
            for k, value in enumerate(values) if value is not None]


def make(window: Window = WINDOW, *, utilization: Timelines | None = None, energy: Timelines | None = None,
         health: Timelines | None = None, throttling: Timelines | None = None, xid: Timelines | None = None,
         replicas: dict[tuple[str, str], list[tuple[float, float]]] | None = None,
         max_replicas: dict[tuple[str, str], dict[float, float]] | None = None,
         reasons: dict[tuple[str, str], list[tuple[float, str]]] | None = None) -> Inputs:
    return Inputs(window, utilization or {}, energy or {}, health or {}, throttling or {}, xid or {},
                  replicas or {}, max_replicas or {}, reasons or {})


def table(rows: list[Usage]) -> dict[str, tuple[float, float, float]]:
    return {r.name: (r.gpu_hours, r.busy_gpu_hours, r.idle_gpu_hours) for r in rows}


def test_gpu_hours_go_to_the_node_the_namespace_and_the_pods_workload() -> None:
    a0, a1 = gpu("node-a", 0, "ml", EMBED), gpu("node-a", 1, "ml", "embed-7d9f8c6b5d-b2c4d")
    b0, free = gpu("node-b", 0, "research", "train-0"), gpu("node-b", 0)
    report = compute(make(utilization={
        key(a0): at(a0, 0.5, 0.5, 0.5, 0.5),  # 4 x 0.25 = 1.0 GPU-h, busy 4 x 0.5 x 0.25 = 0.5
        key(a1): at(a1, 1.0, 1.0, 1.0, 1.0),  # 1.0 GPU-h, busy 1.0
        # train-0 for hour 0 (1.0 GPU-h, busy 4 x 0.25 x 0.25 = 0.25), then free and unused for hour 1
        key(b0): [*at(b0, 0.25, 0.25, 0.25, 0.25), *at(free, 0.0, 0.0, 0.0, 0.0, first=4)],
    }))
    # both embed pods are one workload: 1.0 + 1.0 = 2.0 GPU-h, busy 0.5 + 1.0 = 1.5; the free hour (average 0)
    # is idle but held by no pod; ties on GPU-hours go by name, "(" before "r"
    assert list(table(report.workloads).items()) == [
        ("ml/embed", (2.0, 1.5, 0.0)), (UNALLOCATED, (1.0, 0.0, 1.0)), ("research/train", (1.0, 0.25, 0.0))]
    assert list(table(report.namespaces).items()) == [
        ("ml", (2.0, 1.5, 0.0)), (UNALLOCATED, (1.0, 0.0, 1.0)), ("research", (1.0, 0.25, 0.0))]
    assert table(report.nodes) == {"node-a": (2.0, 1.5, 0.0), "node-b": (2.0, 0.25, 1.0)}
    # total: 4.0 GPU-h, busy 1.75, utilization 1.75 / 4.0 = 0.4375; per workload 1.5 / 2.0 and 0.25 / 1.0
    assert (report.total.gpu_hours, report.total.busy_gpu_hours) == (4.0, 1.75)
    assert report.total.utilization == pytest.approx(0.4375)
    assert {r.name: r.utilization for r in report.workloads} == pytest.approx(
        {"ml/embed": 0.75, UNALLOCATED: 0.0, "research/train": 0.25})
    assert report.total.allocated_idle_gpu_hours == 0.0 and report.allocated_idle == []
    # the heatmap: each GPU's average per hour of the window, None for an hour without data
    assert report.hourly == {"node-a/0": [0.5, None], "node-a/1": [1.0, None], "node-b/0": [0.25, 0.0]}


def test_a_gpu_hour_is_a_point_times_the_step_including_the_windows_end() -> None:
    a0 = gpu("node-a", 0, "ml", "train-0")
    # 9 points (k = 0..8, the end included) x 0.25 = 2.25 GPU-h; busy 4 x 0.5 x 0.25 + 5 x 1.0 x 0.25 = 1.75
    report = compute(make(utilization={key(a0): at(a0, 0.5, 0.5, 0.5, 0.5, 1.0, 1.0, 1.0, 1.0, 1.0)}))
    assert (report.total.gpu_hours, report.total.busy_gpu_hours) == (2.25, 1.75)
    assert report.hourly == {"node-a/0": [0.5, 1.0]}  # two hours in a two-hour window


def test_idle_is_judged_per_hour_gpu_and_holder_and_ranked_by_the_saving() -> None:
    notebook, job = gpu("node-a", 0, "lab", "notebook"), gpu("node-a", 1, "batch", "batch-job-x7k2p")
    first, second = gpu("node-b", 0, "lab", "shell-0"), gpu("node-b", 0, "lab", "eval-0")
    busy = gpu("node-b", 1, "ml", EMBED)
    report = compute(make(utilization={
        # hour 0 averages 0.1 / 4 = 0.025 < 0.05: idle, 1.0 GPU-h; hour 1 averages 0.25: not idle
        key(notebook): at(notebook, 0.0, 0.1, 0.0, 0.0, 0.25, 0.25, 0.25, 0.25),
        # gaps hold no data (they are not zeros): hour 0 has 3 points averaging 0.03 / 3 = 0.01, idle 0.75
        # GPU-h; hour 1 has 2 averaging 0.12 / 2 = 0.06, not idle (with the gaps as zeros it would be 0.03)
        key(job): at(job, 0.0, 0.0, None, 0.03, 0.04, None, None, 0.08),
        # one GPU, two holders in hour 0: the GPU averages (0 + 0 + 0.5 + 0.5) / 4 = 0.25, but shell-0's
        # own half hour averages 0: idle, 0.5 GPU-h; eval-0's averages 0.5
        key(first): [*at(first, 0.0, 0.0), *at(second, 0.5, 0.5, first=2)],
        key(busy): at(busy, 0.9, 0.9, 0.9, 0.9),
    }))
    assert [(h.namespace, h.pod, h.workload, h.node, h.gpu, h.uuid) for h in report.allocated_idle] == [
        ("lab", "notebook", "notebook", "node-a", "0", "GPU-node-a-0"),
        ("batch", "batch-job-x7k2p", "batch-job", "node-a", "1", "GPU-node-a-1"),
        ("lab", "shell-0", "shell", "node-b", "0", "GPU-node-b-0")]
    # held: 8 x 0.25 = 2.0, 5 x 0.25 = 1.25, 2 x 0.25 = 0.5 GPU-h; utilization = busy / held:
    # notebook (0.1 + 4 x 0.25) x 0.25 / 2.0 = 0.1375, the job (0.03 + 0.04 + 0.08) x 0.25 / 1.25 = 0.03
    assert [(h.held_gpu_hours, h.idle_gpu_hours) for h in report.allocated_idle] == [
        (2.0, 1.0), (1.25, 0.75), (0.5, 0.5)]
    assert [h.utilization for h in report.allocated_idle] == pytest.approx([0.1375, 0.03, 0.0])
    # idle rolls up: 1.0 + 0.5 in lab, 0.75 in batch; all of it allocated; 2.25 in total
    idle = {r.name: (r.idle_gpu_hours, r.allocated_idle_gpu_hours) for r in report.namespaces}
    assert idle == {"lab": (1.5, 1.5), "batch": (0.75, 0.75), "ml": (0.0, 0.0)}
    assert {r.name: r.idle_gpu_hours for r in report.workloads} == {
        "lab/notebook": 1.0, "batch/batch-job": 0.75, "lab/shell": 0.5, "lab/eval": 0.0, "ml/embed": 0.0}
    assert (report.total.idle_gpu_hours, report.total.allocated_idle_gpu_hours) == (2.25, 2.25)
    assert report.hourly["node-b/0"] == [0.25, None]  # the heatmap is per GPU, whoever held it


@pytest.mark.parametrize(("threshold", "idle"), [
    (0.05, 1.0),  # hour 0 averages 0.025: idle; hour 1 averages 0.25: not
    (0.25, 1.0),  # 0.25 is not *below* 0.25
    (0.3, 2.0),   # both hours
    (0.0, 0.0),   # nothing averages below 0
], ids=lambda value: f"{value}")
def test_the_idle_threshold(threshold: float, idle: float) -> None:
    notebook = gpu("node-a", 0, "lab", "notebook")
    timeline = at(notebook, 0.0, 0.1, 0.0, 0.0, 0.25, 0.25, 0.25, 0.25)
    report = compute(make(utilization={key(notebook): timeline}), threshold=threshold)
    assert report.threshold == threshold
    assert report.total.allocated_idle_gpu_hours == idle
    assert [h.idle_gpu_hours for h in report.allocated_idle] == ([idle] if idle else [])


def energy_inputs() -> Inputs:
    held, free = gpu("node-a", 0, "ml", EMBED), gpu("node-a", 0)
    return make(
        # 3 x 0.25 = 0.75 GPU-h held by embed, 0.25 free
        utilization={key(held): [*at(held, 0.5, 0.5, 0.5), *at(free, 0.0, first=3)]},
        # joules: +3.6e6 (1 kWh) to embed; a reset to 1.8e6, which counts whole (0.5 kWh) to embed;
        # +7.2e6 (2 kWh) in the step the GPU was free
        energy={key(held): [*at(held, 1.0e9, 1.0e9 + 3.6e6, 1.8e6), *at(free, 9.0e6, first=3)]})


def test_energy_is_the_counters_increase_given_to_the_holder_of_the_step() -> None:
    report = compute(energy_inputs())
    energy = {r.name: r.energy_kwh for r in report.workloads}
    assert energy == pytest.approx({"ml/embed": 1.5, UNALLOCATED: 2.0})
    energy = {r.name: r.energy_kwh for r in report.namespaces}
    assert energy == pytest.approx({"ml": 1.5, UNALLOCATED: 2.0})
    assert report.nodes[0].energy_kwh == pytest.approx(3.5)
    assert report.total.energy_kwh == pytest.approx(3.5)
    # no prices given: no costs at all (None, not 0)
    assert all(r.gpu_cost is None and r.energy_cost is None for r in [report.total, *report.workloads])


def test_prices_turn_gpu_hours_and_kwh_into_costs() -> None:
    report = compute(energy_inputs(), prices=Prices(per_gpu_hour=2.5, per_kwh=0.3))
    assert report.prices == Prices(2.5, 0.3)
    rows = [report.total, *report.workloads]
    # embed 0.75 GPU-h x 2.5 = 1.875, 1.5 kWh x 0.3 = 0.45; free 0.25 x 2.5 = 0.625, 2 x 0.3 = 0.6;
    # total 1.0 x 2.5 = 2.5, 3.5 x 0.3 = 1.05
    assert {r.name: r.gpu_cost for r in rows} == pytest.approx(
        {"total": 2.5, "ml/embed": 1.875, UNALLOCATED: 0.625})
    assert {r.name: r.energy_cost for r in rows} == pytest.approx(
        {"total": 1.05, "ml/embed": 0.45, UNALLOCATED: 0.6})
    assert report.nodes[0].gpu_cost == pytest.approx(2.5)
    assert report.namespaces[0].energy_cost == pytest.approx(0.45)  # ml, first with 0.75 GPU-h


@pytest.mark.parametrize(("prices", "gpu_cost", "energy_cost"), [
    (Prices(per_gpu_hour=2.5), 2.5, None),
    (Prices(per_kwh=0.3), None, 1.05),
    (Prices(0.0, 0.0), 0.0, 0.0),  # a price of 0 is given: a cost of 0, not "no cost"
], ids=["gpu-only", "energy-only", "free"])
def test_each_cost_only_when_its_price_is_given(prices: Prices, gpu_cost: float | None,
                                                energy_cost: float | None) -> None:
    # 1.0 GPU-h x 2.5 = 2.5; 3.5 kWh x 0.3 = 1.05
    total = compute(energy_inputs(), prices=prices).total
    assert (total.gpu_cost is None, total.energy_cost is None) == (gpu_cost is None, energy_cost is None)
    got, expected = (total.gpu_cost or 0.0, total.energy_cost or 0.0), (gpu_cost or 0.0, energy_cost or 0.0)
    assert got == pytest.approx(expected)


def test_incidents_are_runs_of_steps_split_by_a_gap() -> None:
    a0, b0 = gpu("node-a", 0), gpu("node-b", 0)
    report = compute(make(health={
        # throttled at k = 0, 1, 2, not at 3, again at 4, 5: two incidents, 3 x 900 = 2700 s and 2 x 900 s
        key(b0, "throttled"): at(b0, 1, 1, 1, None, 1, 1),
        key(b0, "critical"): at(b0, 1, first=7),  # one step: 900 s
        key(a0, "critical"): at(a0, 1),  # starts with node-b's first: node-a comes first
    }))
    assert [(i.start - T0, i.node, i.gpu, i.uuid, i.state, i.duration_seconds) for i in report.incidents] == [
        (0.0, "node-a", "0", "GPU-node-a-0", "critical", 900.0),
        (0.0, "node-b", "0", "GPU-node-b-0", "throttled", 2700.0),
        (3600.0, "node-b", "0", "GPU-node-b-0", "throttled", 1800.0),
        (6300.0, "node-b", "0", "GPU-node-b-0", "critical", 900.0)]


def test_throttling_is_gpu_hours_per_node_and_reason() -> None:
    a0, a1, b0 = gpu("node-a", 0), gpu("node-a", 1), gpu("node-b", 0)
    report = compute(make(throttling={
        key(a0, "sw_power_cap"): at(a0, 1, 1, 1, 1),  # 4 x 0.25 = 1.0 GPU-h
        key(a1, "sw_power_cap"): at(a1, 1, 1, first=4),  # 0.5: node-a's power cap is 1.5 GPU-h
        key(a0, "hw_slowdown"): at(a0, 1, first=2),  # 0.25
        key(b0, "sw_thermal_slowdown"): at(b0, 1, None, 1),  # 2 points: 0.5
    }))
    assert [(t.node, t.reason, t.gpu_hours) for t in report.throttling] == [
        ("node-a", "hw_slowdown", 0.25), ("node-a", "sw_power_cap", 1.5),
        ("node-b", "sw_thermal_slowdown", 0.5)]


def test_xids_are_the_counters_increases() -> None:
    a0, b0, b1 = gpu("node-a", 0), gpu("node-b", 0), gpu("node-b", 1)
    report = compute(make(xid={
        # 2 before the window (not counted), +1 at k = 2, a reset to 1 at k = 3 (the new value counts)
        key(a0, "79"): at(a0, 2, 2, 3, 1, 1),
        key(b0, "48"): at(b0, 1, 1, first=5),  # appears inside the window: counts from 0, 1 at k = 5
        key(b1, "13"): at(b1, 4, 4, 4),  # there from the start and never grows: nothing
        key(b1, "31"): at(b1, 2, 5, first=1),  # appears at k = 1: 2 then +3 at k = 2
    }))
    assert [(x.time - T0, x.node, x.gpu, x.uuid, x.xid, x.count) for x in report.xids] == [
        (900.0, "node-b", "1", "GPU-node-b-1", "31", 2.0),
        (1800.0, "node-a", "0", "GPU-node-a-0", "79", 1.0),
        (1800.0, "node-b", "1", "GPU-node-b-1", "31", 3.0),
        (2700.0, "node-a", "0", "GPU-node-a-0", "79", 1.0),
        (4500.0, "node-b", "0", "GPU-node-b-0", "48", 1.0)]


def test_scale_events_and_the_rule_summary() -> None:
    def t(k: int) -> float:
        return T0 + k * STEP

    report = compute(make(
        replicas={("ml", "embed"): [(t(0), 2), (t(1), 2), (t(2), 4), (t(3), 5), (t(4), 3), (t(5), 3)],
                  ("research", "train"): [(t(0), 1), (t(1), 1)]},
        # max 5, lowered to 3 then 2: at max at k = 3 (5 >= 5), 4 (3 >= 3), 5 (3 >= 2)
        max_replicas={("ml", "embed"): {t(0): 5, t(1): 5, t(2): 5, t(3): 5, t(4): 3, t(5): 2},
                      ("research", "train"): {t(0): 1}},  # no max at k = 1: not at max there
        reasons={("ml", "embed"): [(t(0), "DesiredWithinRange"), (t(1), "DesiredWithinRange"),
                                   (t(2), "ScaleUpLimit"), (t(3), "ScaleUpLimit"),
                                   (t(4), "DesiredWithinRange"), (t(5), "ScaleDownStabilized")]}))
    events = [(e.namespace, e.rule, e.time - T0, e.from_replicas, e.to_replicas) for e in report.scale_events]
    assert events == [("ml", "embed", 1800.0, 2, 4), ("ml", "embed", 2700.0, 4, 5),
                      ("ml", "embed", 3600.0, 5, 3)]
    embed, train = report.rules
    # 2 ups, 1 down; 3 steps at max = 2700 s, 3 of 6 steps; reasons 3, 2 and 1 of the 6 steps
    assert (embed.namespace, embed.rule, embed.scale_ups, embed.scale_downs) == ("ml", "embed", 2, 1)
    assert (embed.seconds_at_max, embed.share_at_max) == (2700.0, 0.5)
    assert embed.reason_shares == pytest.approx(
        {"DesiredWithinRange": 0.5, "ScaleDownStabilized": 1 / 6, "ScaleUpLimit": 1 / 3})
    assert list(embed.reason_shares) == ["DesiredWithinRange", "ScaleDownStabilized", "ScaleUpLimit"]
    # no change, at max at k = 0 only (1 of 2 steps), no reason series: no shares, no division by zero
    assert (train.namespace, train.rule, train.scale_ups, train.scale_downs) == ("research", "train", 0, 0)
    assert (train.seconds_at_max, train.share_at_max, train.reason_shares) == (900.0, 0.5, {})


@pytest.mark.parametrize("prices", [None, Prices(2.5, 0.3)], ids=["no-prices", "prices"])
def test_empty_inputs_report_nothing(prices: Prices | None) -> None:
    report = compute(make(), prices=prices)
    assert report.window == WINDOW and report.threshold == 0.05
    total = report.total
    assert (total.name, total.gpu_hours, total.busy_gpu_hours, total.idle_gpu_hours, total.energy_kwh,
            total.utilization) == ("total", 0.0, 0.0, 0.0, 0.0, 0.0)
    cost = None if prices is None else 0.0
    assert (total.gpu_cost, total.energy_cost) == (cost, cost)
    lists = (report.nodes, report.namespaces, report.workloads, report.allocated_idle, report.incidents,
             report.throttling, report.xids, report.rules, report.scale_events)
    assert [len(rows) for rows in lists] == [0] * 9
    assert report.hourly == {}


def test_a_rule_without_points_is_summarised_without_dividing_by_zero() -> None:
    report = compute(make(replicas={("ml", "embed"): []}))
    assert report.scale_events == []
    assert report.rules == [RuleSummary("ml", "embed", 0, 0, 0.0, 0.0, {})]


def test_a_window_shorter_than_an_hour_has_one_hour_in_the_heatmap() -> None:
    a0 = gpu("node-a", 0)
    report = compute(make(Window(T0, T0 + 2 * STEP, STEP), utilization={key(a0): at(a0, 0.2, 0.4, 0.6)}))
    assert report.hourly == {"node-a/0": [pytest.approx(0.4)]}
    assert report.total.gpu_hours == 0.75 and report.total.idle_gpu_hours == 0.0


def test_a_constant_5_percent_is_not_idle_below_5_percent() -> None:
    """Seven samples of 0.05 add up to 0.35000000000000003 in floats, whose mean reads 0.04999...; exactly
    it is 0.05, which is not below 0.05."""
    assert sum([0.05] * 7) / 7 < 0.05  # the float arithmetic this guards against
    assert not mean_below([0.05] * 7, 0.05)
    assert mean_below([0.05] * 6 + [0.0499999999], 0.05)
    notebook = gpu("node-a", 0, "lab", "notebook")
    window = Window(T0, T0 + HOUR, HOUR / 7)
    report = compute(make(window, utilization={key(notebook): at(notebook, *[0.05] * 7)}), threshold=0.05)
    assert report.total.idle_gpu_hours == 0.0 and report.total.gpu_hours == pytest.approx(1.0)


def test_energy_counts_the_same_steps_as_gpu_time() -> None:
    """The energy timeline starts a step before the window: its first increase is the first point's step."""
    held = gpu("node-a", 0, "ml", EMBED)
    report = compute(make(utilization={key(held): at(held, 0.5, 0.5)},
                          energy={key(held): at(held, 1.0e9, 1.0e9 + 3.6e6, 1.0e9 + 7.2e6, first=-1)}))
    assert report.total.gpu_hours == pytest.approx(0.5) and report.total.energy_kwh == pytest.approx(2.0)


def test_a_short_window_shows_gpu_minutes() -> None:
    held = gpu("node-a", 0, "ml", EMBED)
    short = Window(T0, T0 + 1800, 60.0)
    text = render_md(compute(make(short, utilization={key(held): [Point(T0 + k * 60, 0.5, held)
                                                                  for k in range(3)]})))
    assert "| name | GPU-minutes | busy GPU-minutes |" in text and "| total | 3.0 | 1.5 |" in text
    assert "| name | GPU-hours |" in render_md(compute(make(Window(T0, T0 + 12 * HOUR, STEP))))


def test_wide_adds_columns_and_the_scale_events() -> None:
    held = gpu("node-a", 0, "ml", EMBED)
    report = compute(make(
        utilization={key(held): at(held, *[0.0] * 8)},  # 2.0 GPU-h, both hours idle: idle share 100 %
        # 8 increases of 3.6e5 J = 0.8 kWh over 2.0 GPU-h: 400 W per GPU on average
        energy={key(held): at(held, *(1.0e9 + k * 3.6e5 for k in range(9)), first=-1)},
        health={key(held, "critical"): at(held, 1, 1, first=2)},  # 00:30 to 01:00 UTC
        xid={key(held, "79"): at(held, 0, 1)},
        replicas={("ml", "embed"): [(T0, 2), (T0 + STEP, 3)]}))
    plain, wide = render_md(report), render_md(report, wide=True)
    assert "| name | GPU-minutes | busy GPU-minutes | utilization | idle GPU-minutes | allocated-idle " \
           "GPU-minutes | energy kWh | idle share | average W per GPU |" in wide
    assert "| ml | 120.0 | 0.0 | 0.0% | 120.0 | 120.0 | 0.8 | 100.0% | 400 |" in wide
    assert "| ml | 120.0 | 0.0 | 0.0% | 120.0 | 120.0 | 0.8 |\n" in plain
    assert "| 2027-01-15 08:30 | 2027-01-15 09:00 | node-a | 0 | GPU-node-a-0 | critical | 0.50 h |" in wide
    assert "| 2027-01-15 08:30 | node-a | 0 | critical | 0.50 h |" in plain
    assert "| node-a | 0 | GPU-node-a-0 | 79 | 1 |" in wide and "| node-a | 0 | 79 | 1 |" in plain
    assert "| ml | embed-7d9f8c6b5d-x7k2p | embed | node-a | 0 | GPU-node-a-0 | 120.0 | 120.0 |" in wide
    assert "## Scale events" not in plain
    assert wide.endswith("## Scale events\n\n| time | namespace | rule | from | to |\n|---|---|---|---|---|\n"
                         "| 2027-01-15 08:15 | ml | embed | 2 | 3 |\n")


def test_json_gives_gpu_indexes_as_integers() -> None:
    held = gpu("node-a", 3, "ml", EMBED)
    document = json.loads(render_json(compute(make(
        utilization={key(held): at(held, *[0.0] * 8)}, health={key(held, "critical"): at(held, 1)},
        xid={key(held, "79"): at(held, 0, 1)}))))
    tables = ("allocated_idle", "incidents", "xids")
    assert [row["gpu"] for table in tables for row in document[table]] == [3, 3, 3]
