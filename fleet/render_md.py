"""`gpu-fleet report --format md`: the report as Markdown tables (times in UTC, ISO 8601)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime

from fleet.usage import Report, Usage


def when(t: float) -> str:
    return datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%d %H:%M")


def hours(seconds: float) -> str:
    return f"{seconds / 3600:.2f} h"


def table(header: Sequence[str], rows: Sequence[Sequence[object]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(str(cell) for cell in row) + " |" for row in rows]
    return [*lines, ""] if rows else ["(none)", ""]


def usage_rows(rows: Sequence[Usage]) -> tuple[list[str], list[list[object]]]:
    costs = any(r.gpu_cost is not None for r in rows) or any(r.energy_cost is not None for r in rows)
    header = ["name", "GPU-hours", "busy GPU-hours", "utilization", "idle GPU-hours",
              "allocated-idle GPU-hours", "energy kWh", *(["GPU cost", "energy cost"] if costs else [])]
    out: list[list[object]] = []
    for r in rows:
        cells: list[object] = [r.name, f"{r.gpu_hours:.1f}", f"{r.busy_gpu_hours:.1f}",
                               f"{r.utilization:.1%}", f"{r.idle_gpu_hours:.1f}",
                               f"{r.allocated_idle_gpu_hours:.1f}", f"{r.energy_kwh:.1f}"]
        if costs:
            cells += [_money(r.gpu_cost), _money(r.energy_cost)]
        out.append(cells)
    return header, out


def _money(value: float | None) -> str:
    return "" if value is None else f"{value:,.2f}"


def render_md(report: Report) -> str:
    w = report.window
    lines = [f"# GPU fleet report {when(w.start)} to {when(w.end)} UTC", "",
             f"Every {w.step:g} s ({w.points:,} steps); idle means an hour averaging below "
             f"{report.threshold:.0%} utilization.", ""]
    for title, rows in (("Total", [report.total]), ("Per node", report.nodes),
                        ("Per namespace", report.namespaces), ("Per workload", report.workloads)):
        lines += [f"## {title}", "", *table(*usage_rows(rows))]
    lines += ["## Allocated but idle (biggest saving first)", "", *table(
        ["namespace", "pod", "workload", "node", "gpu", "held GPU-hours", "idle GPU-hours", "utilization"],
        [[h.namespace, h.pod, h.workload, h.node, h.gpu, f"{h.held_gpu_hours:.1f}", f"{h.idle_gpu_hours:.1f}",
          f"{h.utilization:.1%}"] for h in report.allocated_idle])]
    lines += ["## Health incidents", "", *table(
        ["start", "node", "gpu", "state", "duration"],
        [[when(i.start), i.node, i.gpu, i.state, hours(i.duration_seconds)] for i in report.incidents])]
    lines += ["## Throttling", "", *table(
        ["node", "reason", "GPU-hours"],
        [[t.node, t.reason, f"{t.gpu_hours:.1f}"] for t in report.throttling])]
    lines += ["## XID errors", "", *table(["time", "node", "gpu", "xid", "count"],
                                          [[when(x.time), x.node, x.gpu, x.xid, f"{x.count:g}"]
                                           for x in report.xids])]
    lines += ["## Autoscaler", "", *table(
        ["namespace", "rule", "scale-ups", "scale-downs", "time at max", "decision reasons"],
        [[r.namespace, r.rule, r.scale_ups, r.scale_downs,
          f"{hours(r.seconds_at_max)} ({r.share_at_max:.1%})",
          ", ".join(f"{k} {v:.0%}" for k, v in r.reason_shares.items())] for r in report.rules])]
    return "\n".join(lines)
