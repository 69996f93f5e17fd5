"""What the demo prints and writes: the live line, timeline.csv, demo.png and summary.md."""

from __future__ import annotations

import csv
import dataclasses
from pathlib import Path

import pytest

from autoscaler.config.rules import load_rules, parse_rules
from autoscaler.controller.loop import RuleOutcome
from autoscaler.policy import MetricObservation
from demo.cluster import ClusterSettings, SimulatedDeployment
from demo.llm_server import ServedTally
from demo.report import DemoRecorder
from demo.scenarios import MONDAY_OPENING
from tests import REPO_ROOT

ROOT = REPO_ROOT
RULE = load_rules(ROOT / "demo" / "demo-rules.yaml").rules[0]


def outcome(current: int, desired: int, patched: bool, util: float | None, reason: str = "DesiredWithinRange",
            rps: float | None = 30.0) -> RuleOutcome:
    observations = (MetricObservation("requests_per_second", rps, None if rps is not None else "NoSeries: x"),
                    MetricObservation("gpu_utilization", util, None if util is not None else "NoSeries: x"))
    return RuleOutcome(
        rule=RULE,
        current=current,
        desired=desired,
        reason=reason,
        message=f"scale {current} -> {desired}",
        observations=observations,
        patched=patched,
        ok=True,
    )


def recorder_with_a_run() -> DemoRecorder:
    recorder = DemoRecorder(RULE, "demo/demo-rules.yaml", startup_delay=10.0, interval=2.0)
    deployment = SimulatedDeployment("demo", "inference", 2, lambda: 0.0)
    snap = deployment.snapshot(3.0)
    recorder.tick(snap, 2.0)  # 2 ready under 3 GPUs of work: overloaded
    recorder.sync(0.0, snap, outcome(2, 4, True, 100.0))
    deployment.scale_to(4)
    snap = deployment.snapshot(3.0)
    recorder.tick(snap, 2.0)  # 2 of 4 loading
    recorder.sync(2.0, snap, outcome(4, 4, False, None, "MetricsFailed", rps=None))
    recorder.sync(4.0, snap, outcome(4, 3, True, 40.0, "ScaleDownLimit"))
    return recorder


def test_the_live_line_shows_time_load_replicas_metrics_against_targets_and_the_reason() -> None:
    recorder = DemoRecorder(RULE, "r.yaml", 10.0, 2.0)
    snap = SimulatedDeployment("demo", "inference", 2, lambda: 0.0).snapshot(1.5)
    line = recorder.sync(12.0, snap, outcome(2, 3, True, 75.0, "ScaleUpLimit"))
    for part in ("[  12.0s]", "load  1.50", "pods 2->3", "(ready 2)", "GPU  75%",
                 "*requests_per_second 15.0/7 each", " gpu_utilization 75.0/90", "ScaleUpLimit"):
        assert part in line, line
    assert len(line) <= 120, line
    assert recorder.rows[-1]["message"] == "scale 2 -> 3"
    assert recorder.rows[-1]["driver"] == "requests_per_second"
    line = recorder.sync(14.0, snap, outcome(10, 10, False, 75.0, "DesiredWithinRange"))
    assert len(line) <= 120 and line.endswith("gpu_utilization 75.0/90"), line  # GPU figure dropped


def test_the_live_line_fits_120_columns_whatever_the_metric_names() -> None:
    rule = parse_rules(
        """\
rules:
  - name: r
    target: {kind: Deployment, namespace: demo, name: inference}
    minReplicas: 1
    maxReplicas: 10
    metrics:
      - {name: a_very_long_metric_name_for_the_request_rate_of_the_service, query: x, type: Total, target: 9}
      - {name: another_very_long_metric_name_for_gpu_utilization, query: y, type: Average, target: 90}
""",
        "r.yaml",
    ).rules[0]
    recorder = DemoRecorder(rule, "r.yaml", 10.0, 2.0)
    snap = SimulatedDeployment("demo", "inference", 7, lambda: 0.0).snapshot(5.7)
    observed = (MetricObservation(rule.metrics[0].name, 57.3), MetricObservation(rule.metrics[1].name, 80.0))
    line = recorder.sync(
        0.0,
        snap,
        RuleOutcome(
            rule=rule,
            current=7,
            desired=7,
            reason="DesiredWithinRange",
            message="",
            observations=observed,
            ok=True,
        ),
    )
    assert len(line) == 120 and line.endswith("..."), line


def test_the_plot_and_summary_follow_the_metric_that_drove_the_decisions(tmp_path: Path) -> None:
    """The request rate (15/7 per replica) asks for more than the GPUs (40/90) in two syncs of three: it is
    the metric plotted, whatever the rule lists first or calls gpu_utilization."""
    recorder = DemoRecorder(RULE, "r.yaml", 10.0, 2.0)
    snap = SimulatedDeployment("demo", "inference", 2, lambda: 0.0).snapshot(1.5)
    recorder.sync(0.0, snap, outcome(2, 3, True, 40.0, rps=30.0))
    recorder.sync(2.0, snap, outcome(2, 2, False, 95.0, rps=10.0))  # the GPUs drive this one
    recorder.sync(4.0, snap, outcome(2, 3, True, 40.0, rps=30.0))
    assert recorder.plotted_metric == "requests_per_second"
    assert [r["driver"] for r in recorder.rows] == ["requests_per_second", "gpu_utilization",
                                                    "requests_per_second"]
    recorder.write(tmp_path)
    assert "requests_per_second 2, gpu_utilization 1" in (tmp_path / "summary.md").read_text()
    recorder.sync(6.0, snap, outcome(2, 2, False, 99.0, rps=1.0))
    recorder.sync(8.0, snap, outcome(2, 2, False, 99.0, rps=1.0))
    assert recorder.plotted_metric == "gpu_utilization"


def test_figures_accumulate_per_tick() -> None:
    recorder = recorder_with_a_run()
    assert recorder.gpu_seconds == 2 * 2 + 4 * 2
    assert recorder.overloaded_seconds == 4.0  # 3 GPUs of work on 2 ready GPUs, both ticks
    assert recorder.not_ready_seconds == 2.0
    assert recorder.failed_syncs == 1
    assert [(c.from_replicas, c.to_replicas) for c in recorder.changes] == [(2, 4), (4, 3)]


def test_write_leaves_timeline_plot_and_summary(tmp_path: Path) -> None:
    written = recorder_with_a_run().write(tmp_path / "out")
    assert sorted(p.name for p in written) == ["demo.png", "summary.md", "timeline.csv", "trace.csv"]
    rows = list(csv.DictReader((tmp_path / "out" / "timeline.csv").read_text().splitlines()))
    assert [(r["current"], r["desired"], r["reason"]) for r in rows] == [
        ("2", "4", "DesiredWithinRange"), ("4", "4", "MetricsFailed"), ("4", "3", "ScaleDownLimit")]
    assert rows[1]["gpu_utilization"] == ""  # a failed query is empty, never 0
    # the simulated mean over the GPUs held: 2 saturated, then 2 saturated and 2 loading at 0 %
    assert [r["gpu_util_simulated"] for r in rows] == ["100.000", "50.000", "50.000"]
    trace = list(csv.reader((tmp_path / "out" / "trace.csv").read_text().splitlines()))
    assert trace[0] == ["t", *[m.name for m in RULE.metrics]]  # what simulate reads: t and the metrics only
    assert [row[0] for row in trace[1:]] == [r["t"] for r in rows]
    assert [row[1:] for row in trace[1:]] == [[r[m.name] for m in RULE.metrics] for r in rows]
    summary = (tmp_path / "out" / "summary.md").read_text()
    assert "between 2 and 4; 1 scale-ups, 1 scale-downs" in summary
    assert "mean utilization of the GPUs held: 67%" in summary  # (2 x 100 % + 4 x 50 %) x 2 s / 12 GPU-s
    assert "Syncs with every metric failed: 1" in summary
    assert "| MetricsFailed | 1 |" in summary


def test_an_interrupted_run_with_no_sync_still_writes_a_summary(tmp_path: Path) -> None:
    recorder = DemoRecorder(RULE, "r.yaml", 10.0, 2.0, ended_by="stopped by SIGINT")
    written = recorder.write(tmp_path)
    assert sorted(p.name for p in written) == ["summary.md", "timeline.csv", "trace.csv"]
    assert "stopped by SIGINT" in (tmp_path / "summary.md").read_text()


def test_a_total_metric_is_shown_and_plotted_per_replica_against_its_per_replica_target() -> None:
    """57.3 req/s on 7 replicas against 9 per replica is 8.2 each, not six times the target."""
    rule = parse_rules(
        """\
rules:
  - name: r
    target: {kind: Deployment, namespace: demo, name: inference}
    minReplicas: 1
    maxReplicas: 10
    metrics:
      - {name: requests_per_second, query: x, type: Total, target: 9}
""",
        "r.yaml",
    ).rules[0]
    recorder = DemoRecorder(rule, "r.yaml", 10.0, 2.0)
    snap = SimulatedDeployment("demo", "inference", 7, lambda: 0.0).snapshot(5.7)
    observed = (MetricObservation("requests_per_second", 57.3),)
    line = recorder.sync(
        0.0,
        snap,
        RuleOutcome(
            rule=rule,
            current=7,
            desired=7,
            reason="DesiredWithinRange",
            message="",
            observations=observed,
            ok=True,
        ),
    )
    assert "requests_per_second 8.2/9 each" in line and "57.3/9" not in line
    assert recorder.points[-1].utilization == pytest.approx(57.3 / 7)
    line = recorder.sync(
        2.0,
        snap,
        RuleOutcome(
            rule=rule,
            current=0,
            desired=1,
            reason="DesiredWithinRange",
            message="",
            observations=observed,
            ok=True,
        ),
    )
    assert "requests_per_second 57.3 total/9 each" in line
    assert recorder.points[-1].utilization is None


def test_the_simulated_gpu_utilization_is_shown_and_plotted_even_when_the_rule_does_not_query_it(
    tmp_path: Path,
) -> None:
    """A rule on the request rate alone still shows (and plots) what the GPUs do."""
    rule = parse_rules(
        """\
rules:
  - name: r
    target: {kind: Deployment, namespace: demo, name: inference}
    minReplicas: 0
    maxReplicas: 10
    metrics:
      - {name: requests_per_second, query: x, type: Total, target: 9}
""",
        "r.yaml",
    ).rules[0]
    recorder = DemoRecorder(rule, "r.yaml", 10.0, 2.0)
    snap = SimulatedDeployment("demo", "inference", 7, lambda: 0.0).snapshot(5.6)
    observed = (MetricObservation("requests_per_second", 56.0),)
    line = recorder.sync(
        0.0,
        snap,
        RuleOutcome(
            rule=rule,
            current=7,
            desired=7,
            reason="DesiredWithinRange",
            message="",
            observations=observed,
            ok=True,
        ),
    )
    assert "GPU  80%" in line and "requests_per_second 8.0/9 each" in line, line
    idle = SimulatedDeployment("demo", "inference", 0, lambda: 0.0).snapshot(0.0)
    line = recorder.sync(
        2.0,
        idle,
        RuleOutcome(
            rule=rule,
            current=0,
            desired=0,
            reason="DesiredWithinRange",
            message="",
            observations=observed,
            ok=True,
        ),
    )
    assert "GPU   - " in line, line  # no GPU held: no utilization, not 0 %
    assert [p.gpu_utilization for p in recorder.points] == [pytest.approx(80.0), None]
    written = recorder.write(tmp_path)
    assert "demo.png" in [p.name for p in written] and (tmp_path / "demo.png").stat().st_size > 0


CAPACITY_RULE = load_rules(ROOT / "demo" / "capacity-rules.yaml").rules[0]
BEFORE = MONDAY_OPENING - 4.0
"""Monday 08:59:56 in Berlin: the weekday window of capacity-rules.yaml opens 4 s later."""


def capacity_outcome(current: int, desired: int, reason: str, message: str = "") -> RuleOutcome:
    observations = (MetricObservation("requests_per_second", 90.0),
                    MetricObservation("gpu_utilization", 100.0))
    return RuleOutcome(
        rule=CAPACITY_RULE,
        current=current,
        desired=desired,
        reason=reason,
        message=message,
        observations=observations,
        patched=desired != current,
        ok=True,
    )


def test_a_capacity_rule_shows_pending_and_free_gpus_and_the_schedule_opening(tmp_path: Path) -> None:
    clock = [0.0]
    deployment = SimulatedDeployment("demo", "inference", 2, lambda: clock[0],
                                     ClusterSettings(nodes=1, gpus_per_node=4))
    deployment.set_others(1)
    recorder = DemoRecorder(CAPACITY_RULE, "demo/capacity-rules.yaml", 10.0, 2.0)
    line = recorder.sync(0.0, deployment.snapshot(3.0), capacity_outcome(2, 2, "WithinTolerance"), BEFORE)
    assert "\n" not in line and "(ready 2) free 1 WithinTolerance" in line, line
    deployment.scale_to(4)  # one too many for the pool: Pending
    recorder.tick(deployment.snapshot(3.0), 2.0)
    text = recorder.sync(4.0, deployment.snapshot(3.0), capacity_outcome(4, 4, "CapacityLimited"), BEFORE + 4)
    note, line = text.split("\n")
    assert note == ("          schedules[0] ('0 9 * * 1-5' Europe/Berlin) is open at "
                    "Mon 2026-03-02 09:00:00 Europe/Berlin: minReplicas 4"), note
    assert len(note) <= 120
    assert "pods 4->4 (ready 2, 1 pending) free 0 CapacityLimited" in line and len(line) <= 120, line
    assert recorder.sync(6.0, deployment.snapshot(3.0), capacity_outcome(4, 4, "CapacityLimited"),
                         BEFORE + 6).count("\n") == 0  # still open: said once
    recorder.write(tmp_path)
    rows = list(csv.DictReader((tmp_path / "timeline.csv").read_text().splitlines()))
    assert [(r["pending"], r["free_gpus"], r["clock"][:23]) for r in rows] == [
        ("0", "1", "Mon 2026-03-02 08:59:56"), ("1", "0", "Mon 2026-03-02 09:00:00"),
        ("1", "0", "Mon 2026-03-02 09:00:02")]
    assert rows[0]["schedule"] == "" and rows[1]["schedule"].startswith("schedules[0] ('0 9 * * 1-5'")
    summary = (tmp_path / "summary.md").read_text()
    assert ("- Capacity guard (1 GPU(s) per replica, pool of 4 GPUs): 2 syncs CapacityLimited; Pending "
            "replicas: at most 1, 2 replica-seconds.") in summary, summary
    assert ("- Schedules: 4.0 s: schedules[0] ('0 9 * * 1-5' Europe/Berlin) is open at Mon 2026-03-02 "
            "09:00:00 Europe/Berlin: minReplicas 4.") in summary


def test_a_schedule_closing_is_told_too() -> None:
    recorder = DemoRecorder(CAPACITY_RULE, "r.yaml", 10.0, 2.0)
    snap = SimulatedDeployment("demo", "inference", 4, lambda: 0.0).snapshot(1.0)
    closing = MONDAY_OPENING + 36_000.0
    recorder.sync(0.0, snap, capacity_outcome(4, 4, "TooFewReplicas"), closing - 1)
    text = recorder.sync(2.0, snap, capacity_outcome(4, 2, "ScaleDownLimit"), closing + 1)
    note = text.split("\n")[0]
    assert note.endswith("schedules[0] ('0 9 * * 1-5' Europe/Berlin) closed at Mon 2026-03-02 19:00:01 "
                         "Europe/Berlin: minReplicas 2 again"), note


def test_the_default_demo_rule_keeps_its_timeline_columns(tmp_path: Path) -> None:
    recorder_with_a_run().write(tmp_path)
    header = (tmp_path / "timeline.csv").read_text().splitlines()[0]
    assert header == ("t,load,current,desired,ready,gpu_util_simulated,requests_per_second,gpu_utilization,"
                      "reason,driver,message")


LLM_RULE = load_rules(ROOT / "demo" / "llm-rules.yaml").rules[0]


def llm_outcome(current: int, desired: int, patched: bool) -> RuleOutcome:
    observations = (MetricObservation("requests_per_second", 14.0), MetricObservation("running", 60.0))
    return RuleOutcome(rule=LLM_RULE, current=current, desired=desired, reason="DesiredWithinRange",
                       message=f"scale {current} -> {desired}", observations=observations, patched=patched,
                       ok=True)


def test_the_llm_servers_requests_are_scored_per_sync_and_for_the_run(tmp_path: Path) -> None:
    """What the server finished before the scenario is not scored; each row counts the requests since the
    previous sync, the summary the whole run: a cut request is scored, and misses the objective; beside the
    cuts, what an abort would have cut with the costs and by the default order, and what the drain served."""
    recorder = DemoRecorder(LLM_RULE, "demo/llm-rules.yaml", 10.0, 2.0)
    snap = SimulatedDeployment("demo", "inference", 2, lambda: 0.0).snapshot(1.5)
    recorder.start_serving(ServedTally(finished=50, met=50), drain_seconds=60.0)
    recorder.sync(0.0, snap, llm_outcome(2, 4, True), served=ServedTally(finished=150, met=149))
    scaled_down = ServedTally(finished=250, met=239, cut=1, cut_without_drain=7, cut_without_drain_or_costs=9,
                              drained=5, scale_downs=1, scale_downs_with_costs=1)
    recorder.sync(2.0, snap, llm_outcome(4, 3, True), served=scaled_down)
    recorder.record_served(dataclasses.replace(scaled_down, finished=260, met=249))  # the run's end
    recorder.write(tmp_path)
    rows = list(csv.DictReader((tmp_path / "timeline.csv").read_text().splitlines()))
    assert [(r["requests"], r["slo_met"], r["cut"], r["cut_without_drain"], r["cut_without_drain_or_costs"],
             r["drained"]) for r in rows] == [("100", "99.0", "0", "0", "0", "0"),
                                              ("101", "89.1", "1", "7", "9", "5")]
    summary = (tmp_path / "summary.md").read_text()
    assert "- Requests served by the emulated LLM server: 211, 94.3% within the objective" in summary
    assert ("- Requests cut by the scale-downs (1): 1; each removed pod drained for up to 60 s "
            "(`--drain`): it took no new request and served 5 in flight to their end") in summary
    assert ("- Without the drain (requests in flight at each scale-down, cut at once), the scale-downs would "
            "have cut 7 with the pod-deletion costs the controller set (in effect at 1 of them: on the pods "
            "removed), 9 by the ReplicaSet's default order") in summary
    header = (tmp_path / "trace.csv").read_text().splitlines()[0]
    assert header == "t,requests_per_second,running"  # what simulate replays: the rule's metrics only


def test_without_a_drain_the_summary_says_the_requests_in_flight_were_cut_at_once() -> None:
    recorder = DemoRecorder(LLM_RULE, "demo/llm-rules.yaml", 10.0, 2.0)
    recorder.start_serving(ServedTally(), drain_seconds=0.0)
    recorder.record_served(ServedTally(finished=10, met=10, cut=3, cut_without_drain=3,
                                       cut_without_drain_or_costs=4, scale_downs=1, scale_downs_with_costs=1))
    summary = recorder.summary()
    assert ("- Requests cut by the scale-downs (1): 3; no drain (`--drain 0`): a removed pod's "
            "requests in flight were cut at once") in summary
    assert "would have cut 3 with the pod-deletion costs the controller set (in effect at 1 of" in summary


def test_a_rule_without_deletion_costs_says_the_default_order_chose(tmp_path: Path) -> None:
    recorder = recorder_with_a_run()
    recorder.start_serving(ServedTally())
    recorder.record_served(ServedTally(finished=10, met=10, cut=0, cut_without_drain=2,
                                       cut_without_drain_or_costs=2, drained=2, scale_downs=1))
    summary = recorder.summary()
    assert "- Requests cut by the scale-downs (1): 0; each removed pod drained for up to 60 s" in summary
    assert ("the scale-downs would have cut 2 (the rule sets no pod-deletion cost: the ReplicaSet's default "
            "order, newest first, chose the pods).") in summary
