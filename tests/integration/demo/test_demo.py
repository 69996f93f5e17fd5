"""`python -m demo` end to end: real exporters, real Prometheus, the real controller, a simulated cluster.

Each run plays the compressed day in 40 s (3 s model loading, a sync per second) and must leave nothing
running behind it, whether it ends by itself, by SIGINT / SIGTERM / SIGHUP (a closed terminal), even during
start-up, or is killed.
"""

from __future__ import annotations

import csv
import re
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from demo.__main__ import REQUESTS_PER_GPU_SECOND
from tests import REPO_ROOT
from tests.support import LineProcess

pytestmark = [pytest.mark.integration, pytest.mark.slow]

ROOT = REPO_ROOT
FAST = ["--startup-delay", "3", "--interval", "1"]


class DemoProcess(LineProcess):
    """`python -m demo` in a subprocess (tests/support.py's LineProcess): -X faulthandler, so a demo that
    hangs prints every thread's stack when finish() sends SIGABRT."""

    def __init__(self, output: Path, *flags: str) -> None:
        super().__init__([sys.executable, "-X", "faulthandler", "-m", "demo", "--output", str(output), *FAST,
                          *flags], cwd=ROOT)


def prometheus_port(output: str) -> int:
    match = re.search(r"Prometheus at http://127\.0\.0\.1:(\d+)", output)
    assert match, output
    return int(match.group(1))


def processes_listening_on(port: int) -> list[int]:
    """PIDs whose command line names 127.0.0.1:<port> (Prometheus' --web.listen-address)."""
    found = []
    for proc_dir in Path("/proc").iterdir():
        if not proc_dir.name.isdigit():
            continue
        try:
            cmdline = (proc_dir / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if f"127.0.0.1:{port}" in cmdline and "prometheus" in cmdline:
            found.append(int(proc_dir.name))
    return found


def assert_nothing_left(port: int) -> None:
    """No Prometheus of this run is left (checked by command line: a free port may be reused by others)."""
    assert processes_listening_on(port) == []


SUMMARY_SERVED = re.compile(r"^- Requests served by the emulated LLM server: (\d+), ([\d.]+)% within the "
                            r"objective", re.MULTILINE)
SUMMARY_CUT = re.compile(r"^- Requests cut by the scale-downs \((\d+)\): (\d+); ", re.MULTILINE)
SUMMARY_DRAINED = re.compile(r"drained for up to [\d.]+ s \(`--drain`\): it took no new request and "
                             r"served (\d+) in flight")
SUMMARY_WITHOUT_DRAIN = re.compile(
    r"^- Without the drain \(requests in flight at each scale-down, cut at once\), the scale-downs would "
    r"have cut (\d+) with the pod-deletion costs the controller set \(in effect at (\d+) of them: on the "
    r"pods removed\), (\d+) by the ReplicaSet's default order", re.MULTILINE)


@dataclass(frozen=True)
class Cuts:
    """The summary's scale-downs and cuts, each checked against the timeline's rows."""

    scale_downs: int
    costs_set_at: int
    cut: int
    without_drain: int
    drained: int


def assert_scored_as_the_timeline(summary: str, rows: list[dict[str, str]]) -> Cuts:
    """The summary's requests and cuts are the timeline's: each row counts those scored since the previous
    sync (the summary adds those that ended after the last one), and scale-downs happen only at syncs."""
    served, cut, without = (SUMMARY_SERVED.search(summary), SUMMARY_CUT.search(summary),
                            SUMMARY_WITHOUT_DRAIN.search(summary))
    assert served and cut and without, summary
    assert 0 < sum(int(r["requests"]) for r in rows) <= int(served.group(1))
    assert 0 < float(served.group(2)) <= 100
    scale_downs, cuts = int(cut.group(1)), int(cut.group(2))
    without_drain, set_at, by_default = (int(group) for group in without.groups())
    drained_match = SUMMARY_DRAINED.search(summary)
    drained = int(drained_match.group(1)) if drained_match else 0
    # cuts and drained requests may come after the last sync (the summary counts them, no row does)
    assert sum(int(r["cut"]) for r in rows) <= cuts and sum(int(r["drained"]) for r in rows) <= drained
    assert (without_drain, by_default) == (sum(int(r["cut_without_drain"]) for r in rows),
                                           sum(int(r["cut_without_drain_or_costs"]) for r in rows))
    assert scale_downs == sum(1 for r in rows if r["desired"] and int(r["desired"]) < int(r["current"]))
    return Cuts(scale_downs, set_at, cuts, without_drain, drained)


def test_the_demo_scales_up_with_the_load_and_cleans_up(tmp_path: Path) -> None:
    """The default rule on a 40 s day; the summary scores the emulated server's requests from the run."""
    code, output = DemoProcess(tmp_path, "--duration", "40").finish(timeout=100)
    assert code == 0, output
    for name in ("demo.png", "summary.md", "timeline.csv", "trace.csv"):
        assert (tmp_path / name).stat().st_size > 0, name
    rows = list(csv.DictReader((tmp_path / "timeline.csv").read_text().splitlines()))
    # trace.csv replays through `simulate` as it is: a row per sync, the metrics the controller read.
    replay = subprocess.run([str(Path(sys.executable).parent / "gpu-autoscaler"), "simulate", "--rules",
                             str(ROOT / "demo" / "llm-rules.yaml"), "--replicas", rows[0]["current"],
                             str(tmp_path / "trace.csv")], capture_output=True, text=True, timeout=60,
                            check=False)
    assert replay.returncode == 0, replay.stderr
    replayed = list(csv.DictReader(replay.stdout.splitlines()))
    assert [r["t"] for r in replayed] == [r["t"] for r in rows]
    assert max(int(r["desired"]) for r in replayed) >= 6  # the same peak needs the same replicas
    assert len(rows) >= 30  # about one sync per second for 40 s
    desired = [int(r["desired"]) for r in rows if r["desired"]]
    assert max(desired) >= 6, desired  # the day's peak and its bursts need 6+ replicas
    # the default rule scales as an LLM service is: up on the arrival rate beyond 7 a replica, or on batches
    # beyond 48 requests a replica
    ups = [r for r in rows if r["desired"] and int(r["desired"]) > int(r["current"])]
    assert ups and all(float(r["requests_per_second"] or 0) > 7 * int(r["current"])
                       or float(r["running"] or 0) > 48 * int(r["current"]) for r in ups), ups
    assert any(float(r["load"]) > 6 for r in rows)  # a burst happened ...
    assert max(float(r["load"]) for r in rows if int(r["current"]) >= 6) > 5  # ... and was met with replicas
    summary = (tmp_path / "summary.md").read_text()
    assert "(completed)" in summary and "scale-ups" in summary
    assert summary.strip() in output  # the summary on the terminal too
    assert_scored_as_the_timeline(summary, rows)
    assert re.search(r"^\[\s*\d+\.\d+s\] load +\d+\.\d+ pods \d+->\d+ ", output, re.MULTILINE), output
    assert_nothing_left(prometheus_port(output))


COSTS_RULES = """\
rules:
  - name: inference
    target: {kind: Deployment, namespace: demo, name: inference}
    minReplicas: 1
    maxReplicas: 10
    metrics:
      - name: requests_per_second
        query: sum(rate(service_requests_total{namespace="demo", service="inference"}[3s]))
        type: Total
        target: 7
    podDeletionCost:
      query: sum by (pod) (vllm:num_requests_running{namespace="demo", pod=~"inference-.*"})
    behavior:
      scaleUp: {stabilizationWindowSeconds: 0}
      scaleDown: {stabilizationWindowSeconds: 2, policies: [{type: Percent, value: 100, periodSeconds: 1}]}
"""


@pytest.mark.parametrize("drain", ["60s", "0"], ids=["drain 60 s", "no drain"])
def test_deletion_costs_are_in_effect_at_the_scale_downs_and_the_cuts_counted_with_and_without(
        tmp_path: Path, drain: str) -> None:
    """A rule on the arrival rate that scales down within 2 s, with the default rule's podDeletionCost: the
    day's falls scale it down within a 30 s run, and at each scale-down the pods carried the costs the
    controller set from their running requests just before. With the drain nothing is cut (no request here
    lasts 60 s) and what was in flight on the pods removed is served; without it, all of that is cut."""
    rules = tmp_path / "costs.yaml"
    rules.write_text(COSTS_RULES)
    out = tmp_path / "out"
    code, output = DemoProcess(out, "--duration", "30", "--rules", str(rules),
                               "--drain", drain).finish(timeout=100)
    assert code == 0, output
    rows = list(csv.DictReader((out / "timeline.csv").read_text().splitlines()))
    summary = (out / "summary.md").read_text()
    cuts = assert_scored_as_the_timeline(summary, rows)
    # (at least once: on a busy machine a cost query may time out, and the scale-down goes ahead without)
    assert cuts.scale_downs >= 1 and cuts.costs_set_at >= 1, summary
    assert cuts.without_drain > 0, summary  # the scale-downs removed pods that were serving
    if drain == "0":
        assert (cuts.cut, cuts.drained) == (cuts.without_drain, 0), summary
    else:  # drained in full, unless the run ended first (requests in flight then are not scored)
        assert cuts.cut == 0 and 0 < cuts.drained <= cuts.without_drain, summary
    assert_nothing_left(prometheus_port(output))


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM, signal.SIGHUP], ids=lambda s: s.name)
def test_a_signal_stops_everything_and_still_writes_what_it_has(tmp_path: Path, sig: signal.Signals) -> None:
    demo = DemoProcess(tmp_path, "--duration", "120")
    try:
        demo.wait_for_line(r"^\[\s*\d+\.\d+s\]", timeout=60)  # the first sync
        demo.wait_for_line(r"^\[\s*[3-9]\.\d+s\]", timeout=30)  # a few more
        demo.proc.send_signal(sig)
    finally:
        code, output = demo.finish(timeout=60)  # stop Prometheus, draw the plot
    assert code == 128 + sig.value, output
    assert f"stopped by {sig.name}" in (tmp_path / "summary.md").read_text()
    assert (tmp_path / "demo.png").stat().st_size > 0
    assert len((tmp_path / "timeline.csv").read_text().splitlines()) >= 4
    assert_nothing_left(prometheus_port(output))


def test_a_killed_demo_takes_its_prometheus_with_it(tmp_path: Path) -> None:
    """SIGKILL skips every cleanup: Prometheus (own session, so Ctrl-C reaches only the demo) goes because the
    kernel sends it SIGTERM when its parent dies (PR_SET_PDEATHSIG, set by setpriv before exec)."""
    demo = DemoProcess(tmp_path, "--duration", "120")
    try:
        port = prometheus_port(demo.wait_for_line(r"Prometheus at http://", timeout=60))
        [pid] = processes_listening_on(port)
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().decode().split("\0")
        [config] = [a.removeprefix("--config.file=") for a in cmdline if a.startswith("--config.file=")]
        demo.proc.kill()
    finally:
        demo.finish(timeout=30)
    deadline = time.monotonic() + 20
    while processes_listening_on(port) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert_nothing_left(port)
    shutil.rmtree(Path(config).parent, ignore_errors=True)  # the temp dir the killed demo could not remove


def test_the_first_sync_already_reads_every_metric_and_the_real_rate(tmp_path: Path) -> None:
    """The demo waits until each query returns a series (rate() needs two scrapes): no FailedGetMetrics;
    then until the [5s] window holds samples: a rate() extrapolated over a window not yet filled reads far
    below the real one (8.5 req/s for 24.7 before), so the first decision saw a third of the demand."""
    code, output = DemoProcess(tmp_path, "--duration", "6", "--rules",
                               str(ROOT / "demo" / "demo-rules.yaml")).finish(timeout=80)
    assert code == 0, output
    assert re.search(r"waiting \d+ s until the rule's largest range window \[5s\] holds", output), output
    first = next(line for line in output.splitlines() if re.match(r"^\[\s*\d+\.\d+s\]", line))
    assert "failed" not in first and "requests_per_second" in first and "/7 each" in first, first
    assert "FailedGetMetrics" not in output and "warning" not in output, output
    rows = list(csv.DictReader((tmp_path / "timeline.csv").read_text().splitlines()))
    real = float(rows[0]["load"]) * REQUESTS_PER_GPU_SECOND  # the scenario's first load
    assert float(rows[0]["requests_per_second"]) == pytest.approx(real, rel=0.15), rows[0]
    assert_nothing_left(prometheus_port(output))


def test_a_users_rules_file_runs_against_its_own_target(tmp_path: Path) -> None:
    """--rules with docs/demo.md's example (its rate window cut from [1m] to [10s], or the demo waits a minute
    for it to fill): its queries find the simulated pods and service by their labels."""
    example = (ROOT / "examples" / "gpu-inference-rules.yaml").read_text()
    assert "[1m]" in example
    rules = tmp_path / "users-rules.yaml"
    rules.write_text(example.replace("[1m]", "[10s]"))
    out = tmp_path / "out"
    code, output = DemoProcess(out, "--duration", "15", "--rules", str(rules)).finish(timeout=100)
    assert code == 0, output
    assert "embedding-service scales Deployment/medical-kg/embedding-service" in output
    assert "window [10s] holds scraped samples" in output, output
    rows = list(csv.DictReader((out / "timeline.csv").read_text().splitlines()))
    assert rows and all(r["requests_per_second"] and r["gpu_utilization"] for r in rows), rows
    assert all(float(r["gpu_utilization"]) > 0 for r in rows)
    real = float(rows[0]["load"]) * REQUESTS_PER_GPU_SECOND  # the window filled with the first load first
    assert float(rows[0]["requests_per_second"]) == pytest.approx(real, rel=0.15), rows[0]
    assert_nothing_left(prometheus_port(output))


OPENING = re.compile(r"^ +schedules\[0\] \('0 9 \* \* 1-5' Europe/Berlin\) is open at "
                     r"Mon 2026-03-02 09:00:0\d Europe/Berlin: minReplicas 4$", re.MULTILINE)


def test_the_capacity_scenario_opens_the_weekday_window_and_limits_scale_ups_to_the_pool(
        tmp_path: Path) -> None:
    """demo/capacity-rules.yaml on 8 GPUs (2 held by a training job until 60 % of the run) against a load
    asking for 10 replicas; the controller's clock starts on Monday 12 s (a fifth of the run) before 09:00
    Berlin time, so the schedule raises minReplicas to 4 during the run. The free GPUs are read from the
    exporters through Prometheus, as a rules file would in a cluster.

    60 s, not less: the rule's scale-up stabilization window is 6 s whatever the run's length, so the count
    it lets through passes the 6 GPUs the job leaves some 6 s after the load asks for it (the ramp tops at
    27 s, the job lets go at 36 s). At 30 s the two came within a second, and in one run the job let go
    first and the guard's limit was never met."""
    code, output = DemoProcess(tmp_path, "--scenario", "capacity", "--duration", "60").finish(timeout=150)
    assert code == 0, output
    assert "the controller's clock starts at Mon 2026-03-02 08:59:48 Europe/Berlin" in output, output
    assert OPENING.search(output), output
    assert "FailedGetCapacity" not in output and "event Warning CapacityLimited: " in output, output
    rows = list(csv.DictReader((tmp_path / "timeline.csv").read_text().splitlines()))
    assert rows[0]["clock"].startswith("Mon 2026-03-02 08:59:4") and rows[0]["schedule"] == ""
    opened = next(r for r in rows if r["schedule"])
    assert rows.index(opened) > 0 and opened["clock"].startswith("Mon 2026-03-02 09:00:0"), opened
    assert (opened["current"], opened["desired"], opened["reason"]) == ("2", "4", "BelowMinReplicas"), opened
    assert "minReplicas 4 from schedules[0]" in opened["message"]
    limited = [r for r in rows if r["reason"] == "CapacityLimited"]
    assert limited, rows
    assert all("free GPU(s)" in r["message"] or "Pending as unschedulable" in r["message"] for r in limited)
    held_back = [r for r in limited if (m := re.search(r"-> (\d+) \(not (\d+)\)$", r["message"]))
                 and int(m.group(1)) == int(r["desired"]) < int(m.group(2))]
    assert held_back, limited  # the guard asked for fewer replicas than the metrics wanted
    assert all(int(r["free_gpus"]) >= 0 for r in rows)
    summary = (tmp_path / "summary.md").read_text()
    assert "- Capacity guard (1 GPU(s) per replica, pool of 8 GPUs): " in summary
    assert re.search(r"- Schedules: +\d+\.\d s: schedules\[0\] .* minReplicas 4\.", summary), summary
    assert_nothing_left(prometheus_port(output))


UNKNOWN_METRICS = """\
rules:
  - name: vllm
    target: {kind: Deployment, namespace: llm, name: vllm}
    maxReplicas: 4
    metrics:
      - name: queue
        query: sum(tgi_queue_size{namespace="llm"})
        type: Total
        target: 5
      - name: gpu
        query: avg(DCGM_FI_DEV_GPU_UTIL{namespace="llm", pod=~"vllm-.*"})
        type: Average
        target: 80
"""


def test_a_rules_file_whose_metrics_the_demo_cannot_simulate_exits_2_saying_what_it_serves(
        tmp_path: Path) -> None:
    """Not 30 silent seconds, then a whole scenario of failed syncs and exit 0: a bounded wait (5 scrape
    intervals), then what is missing and what the demo serves for this target."""
    rules = tmp_path / "vllm.yaml"
    rules.write_text(UNKNOWN_METRICS)
    out = tmp_path / "out"
    code, output = DemoProcess(out, "--rules", str(rules), "--scrape-interval", "0.2").finish(timeout=60)
    assert code == 2, output
    assert output.index("waiting for each query of rule vllm to return a series") < output.index("none of")
    for part in (f"none of the 2 metrics of rule vllm ({rules}:2)", f"queue ({rules}:6)",
                 f"gpu ({rules}:10)", "names no series the demo serves", "Deployment llm/vllm",
                 'pod=~"vllm-.*"', 'service_requests_total{namespace="llm", service="vllm"}',
                 "Nothing to demo"):
        assert part in output, (part, output)
    assert not re.search(r"^\[\s*\d+\.\d+s\]", output, re.MULTILINE)  # no scenario played
    assert not out.exists()
    assert_nothing_left(prometheus_port(output))


def test_ctrl_c_during_start_up_stops_at_once_without_false_warnings(tmp_path: Path) -> None:
    """SIGINT while the demo waits for the [1m] window to fill (up to a minute): it stops now, says nothing
    about Prometheus not having scraped, prints the summary and leaves nothing behind."""
    example = ROOT / "examples" / "gpu-inference-rules.yaml"
    demo = DemoProcess(tmp_path, "--duration", "15", "--rules", str(example))
    try:
        demo.wait_for_line(r"holds scraped samples", timeout=60)
        demo.proc.send_signal(signal.SIGINT)
    finally:
        code, output = demo.finish(timeout=20)
    assert code == 128 + signal.SIGINT, output
    assert "warning" not in output and "Traceback" not in output, output
    assert not re.search(r"^\[\s*\d+\.\d+s\]", output, re.MULTILINE)  # the scenario never started
    assert "stopped by SIGINT" in output and "# gpu-autoscaler demo: summary" in output, output
    assert_nothing_left(prometheus_port(output))


THREADED_STARTER = """\
import threading
from demo.processes import start_prometheus
threading.Thread(target=threading.Event().wait, daemon=True).start()  # where a preexec_fn would be unsafe
prometheus = start_prometheus({"global": {"scrape_interval": "1s"}})
print(prometheus.url, prometheus.workdir, flush=True)
threading.Event().wait()
"""


def test_a_prometheus_started_by_a_threaded_process_dies_with_it(tmp_path: Path) -> None:
    """No Python runs between fork and exec (setpriv sets the parent-death signal), so a process with other
    threads (test fixtures, servers) starts Prometheus safely, and SIGKILL still takes it along."""
    starter = subprocess.Popen([sys.executable, "-c", THREADED_STARTER], cwd=ROOT, stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True)
    try:
        assert starter.stdout is not None
        url, workdir = starter.stdout.readline().split()  # bounded: start_prometheus times out in 30 s
        port = int(url.rsplit(":", 1)[1])
        assert len(processes_listening_on(port)) == 1
    finally:
        starter.kill()
        starter.wait(timeout=10)
        assert starter.stdout is not None
        starter.stdout.close()
    deadline = time.monotonic() + 20
    while processes_listening_on(port) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert_nothing_left(port)
    shutil.rmtree(workdir, ignore_errors=True)
