"""What the demo shows and leaves behind: one live line per sync, then timeline.csv, demo.png, summary.md.

`DemoRecorder` is fed by the demo loop (every driver tick for the accounting, every sync for the decisions)
and writes whatever it has when the run ends, however it ends (Ctrl-C included). For a rule with a capacity
guard it also shows the pool (Pending replicas, free GPUs), for a rule with schedules the controller's clock
and each window opening or closing, as the controller evaluates them at the sync's `now`.
"""

from __future__ import annotations

import csv
import dataclasses
import re
from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from zoneinfo import ZoneInfo

from autoscaler.config.schedules import open_bounds
from autoscaler.controller.loop import RuleOutcome
from autoscaler.planning.overload import OVERLOAD_LINE
from autoscaler.policy import MetricSpec, Reason, Rule
from demo.cluster import ClusterSnapshot
from demo.llm_server import DRAIN_SECONDS, ServedTally
from demo.plots import DemoPoint, plot_demo
from demo.slo_replay import Objective

LINE_WIDTH = 120
"""The live line fits a 120-column terminal: the decision's message is in timeline.csv and summary.md."""
SIMULATED_GPU_COLUMN = "gpu_util_simulated"
"""timeline.csv's column of the Deployment's mean GPU utilization (%), as simulated: shown whatever the rule
queries, next to the rule's own metrics as Prometheus returned them."""
SERVED_COLUMNS = ("requests", "slo_met", "cut", "cut_without_drain", "cut_without_drain_or_costs", "drained")
"""timeline.csv's columns of the emulated LLM server's requests since the previous sync: how many were scored,
the share (%) that met the objective, those a scale-down cut, what the scale-downs would have cut without the
drain (in flight on the pods removed) and also without the pod-deletion costs (in flight on the pods the
default order would have removed), and those removed pods served to their end while draining."""


@dataclass
class ScaleChange:
    t: float
    from_replicas: int
    to_replicas: int
    reason: str
    message: str


@dataclass
class DemoRecorder:
    """Accumulates the run: per-sync points and decisions, and time-integrated figures per driver tick."""

    rule: Rule
    rules_path: str
    startup_delay: float
    interval: float
    points: list[DemoPoint] = field(default_factory=list)
    rows: list[dict[str, str]] = field(default_factory=list)
    changes: list[ScaleChange] = field(default_factory=list)
    reasons: Counter[str] = field(default_factory=Counter)
    failed_syncs: int = 0
    gpu_seconds: float = 0.0
    overloaded_seconds: float = 0.0
    not_ready_seconds: float = 0.0
    busy_gpu_seconds: float = 0.0
    """GPU-seconds of the held GPUs' utilization (their mean utilization x GPUs held, integrated)."""
    elapsed: float = 0.0
    ended_by: str = "completed"
    started_with: int | None = None
    """Replicas before the first sync."""
    against_target: list[dict[str, float | None]] = field(default_factory=list)
    """Per sync, each metric as the engine compares it with its target (a Total one per replica)."""
    drivers: Counter[str] = field(default_factory=Counter)
    """How many syncs each metric drove: the one furthest above (or least below) its target asks for the
    most replicas, and the HPA takes the largest proposal."""
    pending_seconds: float = 0.0
    """Replica-seconds spent Pending (no free GPU in the pool)."""
    peak_pending: int = 0
    pool_gpus: int = 0
    schedule_changes: list[str] = field(default_factory=list)
    """Each window opening or closing, as the summary tells it."""
    _open: str | None = None
    """The label of the schedule window whose minReplicas is in effect (None: none open)."""
    served_since: ServedTally | None = None
    """The emulated LLM server's tally when the scenario started (None: no server figures recorded)."""
    served: ServedTally = field(default_factory=ServedTally)
    """Its requests since then: what the summary scores."""
    objective: Objective = field(default_factory=Objective)
    """The objective the server scored its requests by (the summary states it)."""
    drain_seconds: float = DRAIN_SECONDS
    """The server's grace period for a removed pod (the summary states it)."""

    def clock_text(self, unix: float) -> str:
        """The controller's time as its schedules read it: in the first schedule's zone (UTC without one)."""
        zone = self.rule.schedules[0].timezone if self.rule.schedules else "UTC"
        local = datetime.fromtimestamp(unix, UTC if zone == "UTC" else ZoneInfo(zone))
        return f"{local:%a %Y-%m-%d %H:%M:%S} {zone}"

    @property
    def plotted_metric(self) -> str:
        """The metric drawn against its target: the one that drove the most syncs (the rule's first before
        any sync, or when every query failed)."""
        order = [m.name for m in self.rule.metrics]
        if not self.drivers:
            return order[0]
        return max(order, key=lambda name: (self.drivers[name], -order.index(name)))

    def tick(self, snapshot: ClusterSnapshot, seconds: float) -> None:
        self.gpu_seconds += snapshot.gpus_held * seconds
        self.busy_gpu_seconds += (snapshot.mean_utilization() or 0.0) * snapshot.gpus_held * seconds
        if snapshot.overloaded(OVERLOAD_LINE):
            self.overloaded_seconds += seconds
        if snapshot.ready < snapshot.spec_replicas:
            self.not_ready_seconds += seconds
        self.pending_seconds += snapshot.pending * seconds
        self.peak_pending = max(self.peak_pending, snapshot.pending)
        self.pool_gpus = len(snapshot.gpus)

    def start_serving(self, tally: ServedTally, objective: Objective | None = None,
                      drain_seconds: float = DRAIN_SECONDS) -> None:
        """The scenario starts: the server's requests count from `tally` on (the wait before is not
        scored), scored by `objective` (the default one when not given), a removed pod draining for up to
        `drain_seconds`."""
        self.served_since = tally
        self.objective = objective or Objective()
        self.drain_seconds = drain_seconds

    def record_served(self, tally: ServedTally) -> ServedTally:
        """The server's tally now; returns the requests scored since the previous call."""
        if self.served_since is None:
            self.served_since = tally
        total = tally - self.served_since
        interval, self.served = total - self.served, total
        return interval

    def sync(self, t: float, snapshot: ClusterSnapshot, outcome: RuleOutcome,
             now: float | None = None, served: ServedTally | None = None) -> str:
        """Record one sync of the rule; returns the live line to print, after a line saying that a schedule
        window opened or closed when one did (`now`: the controller's time of the sync; `served`: the LLM
        server's tally, for timeline.csv's SERVED_COLUMNS)."""
        self.elapsed = max(self.elapsed, t)
        self.peak_pending = max(self.peak_pending, snapshot.pending)
        self.pool_gpus = len(snapshot.gpus)
        note = self._schedule_note(t, now)
        if self.started_with is None:
            self.started_with = outcome.current if outcome.current is not None else snapshot.spec_replicas
        values = {o.name: o.value for o in outcome.observations}
        self.reasons[outcome.reason] += 1
        if outcome.observations and all(v is None for v in values.values()):
            self.failed_syncs += 1
        replicas = snapshot.spec_replicas
        if outcome.patched and outcome.current is not None and outcome.desired is not None:
            replicas = outcome.desired
            self.changes.append(ScaleChange(t, outcome.current, outcome.desired, outcome.reason,
                                            outcome.message))
        against = {m.name: _against_target(m, values.get(m.name), outcome.current) for m in self.rule.metrics}
        self.against_target.append(against)
        ratios = {m.name: value / m.target for m in self.rule.metrics
                  if (value := against[m.name]) is not None and m.target > 0}
        driver = max(ratios, key=lambda name: ratios[name]) if ratios else None
        if driver is not None:
            self.drivers[driver] += 1
        mean = snapshot.mean_utilization()
        gpu_percent = None if mean is None else 100.0 * mean
        self.points.append(DemoPoint(t, snapshot.load, replicas, snapshot.ready, outcome.desired,
                                     against[self.plotted_metric], gpu_percent))
        row = {"t": f"{t:.2f}", "load": f"{snapshot.load:.3f}", "current": _num(outcome.current),
               "desired": _num(outcome.desired), "ready": str(snapshot.ready),
               SIMULATED_GPU_COLUMN: _num(gpu_percent), "reason": outcome.reason}
        row.update({m.name: _num(values.get(m.name)) for m in self.rule.metrics})
        if self.rule.capacity is not None:
            row.update({"pending": str(snapshot.pending), "free_gpus": str(snapshot.free_gpus)})
        if self.rule.schedules:
            row.update({"clock": "" if now is None else self.clock_text(now), "schedule": self._open or ""})
        if served is not None:
            interval = self.record_served(served)
            attainment = interval.attainment
            row.update({"requests": str(interval.requests),
                        "slo_met": "" if attainment is None else f"{100.0 * attainment:.1f}",
                        "cut": str(interval.cut), "cut_without_drain": str(interval.cut_without_drain),
                        "cut_without_drain_or_costs": str(interval.cut_without_drain_or_costs),
                        "drained": str(interval.drained)})
        row.update({"driver": driver or "", "message": outcome.message})
        self.rows.append(row)
        metrics = " ".join(("*" if m.name == driver else "")
                           + _shown_against_target(m, values.get(m.name), outcome.current)
                           for m in self.rule.metrics)
        gpus = " GPU   - " if gpu_percent is None else f" GPU {gpu_percent:3.0f}%"
        pods = f"{_num(outcome.current)}->{_num(outcome.desired)}"
        head = f"[{t:6.1f}s] load {snapshot.load:5.2f} pods {pods} (ready {snapshot.ready})"
        if self.rule.capacity is not None:
            pending = f", {snapshot.pending} pending" if snapshot.pending else ""
            head = f"{head[:-1]}{pending}) free {snapshot.free_gpus}"
        line = f"{head}{gpus} {outcome.reason} {metrics}"
        if len(line) > LINE_WIDTH:  # the simulated GPU figure goes first: the rule's own metrics matter more
            line = f"{head} {outcome.reason} {metrics}"
        line = line if len(line) <= LINE_WIDTH else line[:LINE_WIDTH - 3] + "..."
        return line if note is None else f"{note}\n{line}"

    def _schedule_note(self, t: float, now: float | None) -> str | None:
        """'schedule opened ...' when the window in effect changed since the last sync (None: it did not)."""
        if not self.rule.schedules or now is None:
            return None
        bounds = open_bounds(self.rule.schedules, now)
        label = None if bounds is None else bounds.min_from
        if label == self._open:
            return None
        before, self._open = self._open, label
        if bounds is None:
            text = (f"{_short_label(before)} closed at {self.clock_text(now)}: minReplicas "
                    f"{self.rule.min_replicas} again")
        else:
            text = (f"{_short_label(label)} is open at {self.clock_text(now)}: minReplicas "
                    f"{bounds.min_replicas}")
            if bounds.max_replicas is not None:
                text += f", maxReplicas {bounds.max_replicas}"
        self.schedule_changes.append(f"{t:6.1f} s: {text}")
        return f"          {text}"

    def write(self, output: Path) -> list[Path]:
        """timeline.csv, trace.csv, demo.png (when there are points) and summary.md; returns the paths
        written."""
        output.mkdir(parents=True, exist_ok=True)
        written = [self._write_csv(output / "timeline.csv"), self._write_trace(output / "trace.csv")]
        if self.points:
            plotted = next(m for m in self.rule.metrics if m.name == self.plotted_metric)
            label = f"{plotted.name} per replica" if plotted.type == "Total" else plotted.name
            label += f" (drove {self.drivers[plotted.name]} of {len(self.points)} syncs)"
            points = [dataclasses.replace(p, utilization=a[plotted.name])
                      for p, a in zip(self.points, self.against_target, strict=True)]
            png = output / "demo.png"
            plot_demo(points, png, label, plotted.target,
                      f"gpu-autoscaler demo: {self.rule.name} ({self.rules_path})",
                      gpu_on_own_axis=plotted.name != "gpu_utilization")
            written.append(png)
        summary = output / "summary.md"
        summary.write_text(self.summary())
        written.append(summary)
        return written

    def _guard_lines(self) -> list[str]:
        """The capacity guard's and the schedules' part of the summary (none for a rule without them)."""
        lines = []
        if self.rule.capacity is not None:
            lines.append(f"- Capacity guard ({self.rule.capacity.gpus_per_replica} GPU(s) per replica, pool "
                         f"of {self.pool_gpus} GPUs): {self.reasons[Reason.CapacityLimited.value]} syncs "
                         f"{Reason.CapacityLimited.value}; Pending replicas: at most {self.peak_pending}, "
                         f"{self.pending_seconds:.0f} replica-seconds.")
        if self.rule.schedules:
            lines.append("- Schedules: " + ("; ".join(change.strip() for change in self.schedule_changes)
                                            or "no window open during the run") + ".")
        return lines

    def _served_lines(self) -> list[str]:
        """The emulated LLM server's part of the summary: how users would judge the run."""
        if self.served_since is None:
            return []
        served, objective = self.served, self.objective
        attainment = served.attainment
        met = "-" if attainment is None else f"{attainment:.1%}"
        cut = f"- Requests cut by the scale-downs ({served.scale_downs}): {served.cut}"
        if self.drain_seconds > 0:
            cut += (f"; each removed pod drained for up to {self.drain_seconds:g} s (`--drain`): it "
                    f"took no new request and served {served.drained} in flight to their end, what the grace "
                    "period left unfinished was cut.")
        else:
            cut += ("; no drain (`--drain 0`): a removed pod's requests in flight were cut at once, "
                    "as vLLM's default `--shutdown-timeout=0` aborts them.")
        without = ("- Without the drain (requests in flight at each scale-down, cut at once), the "
                   f"scale-downs would have cut {served.cut_without_drain}")
        if self.rule.pod_deletion_cost is None:
            without += (" (the rule sets no pod-deletion cost: the ReplicaSet's default order, newest first, "
                        "chose the pods).")
        else:
            without += (" with the pod-deletion costs the controller set (in effect at "
                        f"{served.scale_downs_with_costs} of them: on the pods removed), "
                        f"{served.cut_without_drain_or_costs} by the ReplicaSet's default order (on the pods "
                        "it would have removed instead, newest first).")
        return [
            f"- Requests served by the emulated LLM server: {served.requests}, {met} within the objective "
            f"(time to first token <= {objective.ttft_seconds:g} s and mean inter-token latency <= "
            f"{objective.itl_seconds * 1000:g} ms; a cut request misses it).",
            cut,
            without,
        ]

    def _mean_busy(self) -> float:
        """Mean utilization of the GPUs held over the run, weighted by GPU-seconds (idle loaders count)."""
        return self.busy_gpu_seconds / self.gpu_seconds if self.gpu_seconds > 0 else 0.0

    def _write_csv(self, path: Path) -> Path:
        columns = ["t", "load", "current", "desired", "ready", SIMULATED_GPU_COLUMN,
                   *[m.name for m in self.rule.metrics]]
        if self.rule.capacity is not None:
            columns += ["pending", "free_gpus"]
        if self.rule.schedules:
            columns += ["clock", "schedule"]
        if self.served_since is not None:
            columns += list(SERVED_COLUMNS)
        columns += ["reason", "driver", "message"]
        with path.open("w", newline="") as handle:
            writer = csv.DictWriter(handle, fieldnames=columns)
            writer.writeheader()
            writer.writerows(self.rows)
        return path

    def _write_trace(self, path: Path) -> Path:
        """What the controller read at each sync, as `gpu-autoscaler simulate` reads a trace: `t`, one column
        per metric of the rule (empty: the query failed) and `capacity` (free GPUs) for a guarded rule.
        timeline.csv is not one: its other columns (load, replicas, reasons) are no metric of the rule."""
        columns = ["t", *[m.name for m in self.rule.metrics]]
        capacity = self.rule.capacity is not None
        with path.open("w", newline="") as handle:
            writer = csv.writer(handle)
            writer.writerow([*columns, "capacity"] if capacity else columns)
            for row in self.rows:
                cells = [row.get(column, "") for column in columns]
                writer.writerow([*cells, row.get("free_gpus", "")] if capacity else cells)
        return path

    def summary(self) -> str:
        first = self.started_with
        replicas = ([first] if first is not None else []) + [p.replicas for p in self.points]
        ups = sum(1 for c in self.changes if c.to_replicas > c.from_replicas)
        lines = [
            "# gpu-autoscaler demo: summary", "",
            f"- Rule `{self.rule.name}` from `{self.rules_path}`, scaling {self.rule.target} "
            f"(min {self.rule.min_replicas}, max {self.rule.max_replicas}).",
            f"- Ran {self.elapsed:.0f} s ({self.ended_by}), {len(self.points)} syncs every "
            f"{self.interval:g} s; new replicas load their model for {self.startup_delay:g} s.",
            f"- Replicas: started at {first if first is not None else '-'}, between "
            f"{min(replicas, default=0)} and {max(replicas, default=0)}; {ups} scale-ups, "
            f"{len(self.changes) - ups} scale-downs.",
            f"- GPU time held: {self.gpu_seconds:.0f} GPU-seconds; overloaded (load per ready GPU above "
            f"{OVERLOAD_LINE:.0%}): {self.overloaded_seconds:.0f} s; replicas still loading: "
            f"{self.not_ready_seconds:.0f} s; mean utilization of the GPUs held: {self._mean_busy():.0%}.",
            f"- Syncs with every metric failed: {self.failed_syncs}.",
            "- Syncs each metric drove (asked for the most replicas): "
            + (", ".join(f"{name} {count}" for name, count in self.drivers.most_common()) or "none") + ".",
            *self._guard_lines(),
            *self._served_lines(),
            "",
            "| decision reason | syncs |", "|---|---:|",
            *[f"| {reason} | {count} |" for reason, count in self.reasons.most_common()], "",
            "## Scale changes", "",
        ]
        lines += [f"- {c.t:6.1f} s: {c.from_replicas} -> {c.to_replicas} ({c.reason}) {c.message}"
                  for c in self.changes] or ["- none"]
        lines += ["", "Files: `demo.png` (load, replicas, the metric that drove most syncs vs its target), "
                  "`timeline.csv` (one row per sync).", ""]
        return "\n".join(lines)


def _short_label(label: str | None) -> str:
    """"schedules[0] ('0 9 * * 1-5' Europe/Berlin)": the window's label without its opening time, so the note
    fits the 120 columns of the live line (timeline.csv keeps the whole label)."""
    return _OPEN_SINCE.sub("", label or "")


_OPEN_SINCE = re.compile(r", open since [^)]*")


def _against_target(metric: MetricSpec, value: float | None, replicas: int | None) -> float | None:
    """The value the engine compares with the target: a Total metric's service-wide value is divided by the
    current replicas (its target is per replica), an Average metric's value is already per replica."""
    if value is None or metric.type != "Total":
        return value
    return value / replicas if replicas else None


def _shown_against_target(metric: MetricSpec, value: float | None, replicas: int | None) -> str:
    """`gpu_utilization 75.0/90`; a Total metric per replica, `requests_per_second 8.2/9 each`, so 57.3 req/s
    on 7 replicas does not read as six times the target (`57.3 total/9 each` when no replica runs)."""
    if metric.type != "Total" or value is None:
        return f"{metric.name} {_short(value)}/{metric.target:g}"
    if not replicas:
        return f"{metric.name} {value:.1f} total/{metric.target:g} each"
    return f"{metric.name} {value / replicas:.1f}/{metric.target:g} each"


def _num(value: float | int | None) -> str:
    if value is None:
        return ""
    return str(value) if isinstance(value, int) else f"{value:.3f}"


def _short(value: float | None) -> str:
    return "failed" if value is None else f"{value:.1f}"
