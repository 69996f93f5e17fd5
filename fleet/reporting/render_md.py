"""`gpu-fleet report -o table|md`: the report as Markdown tables (times in UTC, ISO 8601); `-o wide` adds
columns (each usage row's idle share and average power per GPU; the GPU's UUID beside its index; an
incident's end) and the scale events, one row each.

GPU time is shown in GPU-hours, or in GPU-minutes for a window shorter than SHORT_WINDOW_SECONDS, where one
GPU's hour-fractions would read 0.0 GPU-hours (the JSON keeps hours, unrounded). Label values are shown with
their control characters as escapes and `|` escaped (`md_cell`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from fleet.reporting.timeline import Window
from fleet.reporting.usage import Report, Usage
from plumbing.display import visible

SHORT_WINDOW_SECONDS = 12 * 3600.0


@dataclass(frozen=True)
class GpuTime:
    """The unit GPU time is shown in: its column name and how many of it make a GPU-hour."""

    name: str
    per_hour: float

    def __call__(self, hours: float) -> str:
        return f"{hours * self.per_hour:.1f}"


def gpu_time(window: Window) -> GpuTime:
    short = window.seconds < SHORT_WINDOW_SECONDS
    return GpuTime("GPU-minutes", 60.0) if short else GpuTime("GPU-hours", 1.0)


def kwh(value: float) -> str:
    """One decimal from 10 kWh up; three significant digits below, so a short window's energy is not 0.0."""
    return f"{value:.1f}" if value >= 10 else f"{value:.3g}"


def when(t: float) -> str:
    return datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%d %H:%M")


def hours(seconds: float) -> str:
    return f"{seconds / 3600:.2f} h"


def table(header: Sequence[str], rows: Sequence[Sequence[object]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(md_cell(cell) for cell in row) + " |" for row in rows]
    return [*lines, ""] if rows else ["(none)", ""]


def md_cell(value: object) -> str:
    """A cell of a Markdown table: control characters shown as escapes (the table is read on a terminal too),
    a `|` escaped so a label cannot add a column."""
    return visible(str(value)).replace("|", "\\|")


def usage_rows(rows: Sequence[Usage], unit: GpuTime = GpuTime("GPU-hours", 1.0), wide: bool = False
               ) -> tuple[list[str], list[list[object]]]:
    """A usage table; `wide` adds the idle share of GPU time and the average power per GPU (kWh / GPU-h)."""
    costs = any(r.gpu_cost is not None for r in rows) or any(r.energy_cost is not None for r in rows)
    u = unit.name
    header = ["name", u, f"busy {u}", "utilization", f"idle {u}", f"allocated-idle {u}", "energy kWh",
              *(["idle share", "average W per GPU"] if wide else []),
              *(["GPU cost", "energy cost"] if costs else [])]
    out: list[list[object]] = []
    for r in rows:
        cells: list[object] = [r.name, unit(r.gpu_hours), unit(r.busy_gpu_hours),
                               f"{r.utilization:.1%}", unit(r.idle_gpu_hours),
                               unit(r.allocated_idle_gpu_hours), kwh(r.energy_kwh)]
        if wide:
            cells += [f"{r.idle_gpu_hours / r.gpu_hours:.1%}" if r.gpu_hours else "-",
                      f"{r.energy_kwh * 1000 / r.gpu_hours:.0f}" if r.gpu_hours else "-"]
        if costs:
            cells += [_money(r.gpu_cost), _money(r.energy_cost)]
        out.append(cells)
    return header, out


def _money(value: float | None) -> str:
    return "" if value is None else f"{value:,.2f}"


def render_md(report: Report, wide: bool = False) -> str:
    """The report's Markdown; `wide` adds columns and the scale events (module docstring)."""
    w = report.window
    unit = gpu_time(w)
    uuid = ["uuid"] if wide else []
    lines = [f"# GPU fleet report {when(w.start)} to {when(w.end)} UTC", "",
             f"Every {w.step:g} s ({w.points:,} steps); idle means an hour averaging below "
             f"{report.threshold:.0%} utilization.", ""]
    for title, rows in (("Total", [report.total]), ("Per node", report.nodes),
                        ("Per namespace", report.namespaces), ("Per workload", report.workloads)):
        lines += [f"## {title}", "", *table(*usage_rows(rows, unit, wide))]
    lines += ["## Allocated but idle (biggest saving first)", "", *table(
        ["namespace", "pod", "workload", "node", "gpu", *uuid, f"held {unit.name}", f"idle {unit.name}",
         "utilization"],
        [[h.namespace, h.pod, h.workload, h.node, h.gpu, *([h.uuid] if wide else []), unit(h.held_gpu_hours),
          unit(h.idle_gpu_hours), f"{h.utilization:.1%}"] for h in report.allocated_idle])]
    lines += ["## Health incidents", "", *table(
        ["start", *(["end"] if wide else []), "node", "gpu", *uuid, "state", "duration"],
        [[when(i.start), *([when(i.start + i.duration_seconds)] if wide else []), i.node, i.gpu,
          *([i.uuid] if wide else []), i.state, hours(i.duration_seconds)] for i in report.incidents])]
    lines += ["## Throttling", "", *table(
        ["node", "reason", unit.name],
        [[t.node, t.reason, unit(t.gpu_hours)] for t in report.throttling])]
    lines += ["## XID errors", "", *table(["time", "node", "gpu", *uuid, "xid", "count"],
                                          [[when(x.time), x.node, x.gpu, *([x.uuid] if wide else []), x.xid,
                                            f"{x.count:g}"] for x in report.xids])]
    lines += ["## Autoscaler", "", *table(
        ["namespace", "rule", "scale-ups", "scale-downs", "time at max", "decision reasons"],
        [[r.namespace, r.rule, r.scale_ups, r.scale_downs,
          f"{hours(r.seconds_at_max)} ({r.share_at_max:.1%})",
          ", ".join(f"{k} {v:.0%}" for k, v in r.reason_shares.items())] for r in report.rules])]
    if wide:
        lines += ["## Scale events", "", *table(
            ["time", "namespace", "rule", "from", "to"],
            [[when(e.time), e.namespace, e.rule, f"{e.from_replicas:g}", f"{e.to_replicas:g}"]
             for e in report.scale_events])]
    return "\n".join(lines)
