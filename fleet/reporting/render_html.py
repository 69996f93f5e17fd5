"""`gpu-fleet report --format html`: an HTML page with PNG plots written beside it in `--out DIR`
(`utilization.png` a heatmap per GPU and hour, `idle-by-namespace.png`, `incidents.png` a timeline), then
the tables. matplotlib (the `report` extra) is imported here, lazily, only for this format.
"""

from __future__ import annotations

import html
from pathlib import Path
from typing import Any

from fleet.errors import UsageError
from fleet.reporting.render_md import gpu_time, usage_rows, when
from fleet.reporting.usage import Report

PLOTS = ("utilization.png", "idle-by-namespace.png", "incidents.png")


def _pyplot() -> Any:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as exc:
        raise UsageError("-o html needs matplotlib: pip install 'gpu-autoscaler[report]' "
                         "(or use -o table or json)") from exc
    return plt


def write_html(report: Report, out: Path) -> Path:
    """Write the PNGs and `report.html` into `out`; returns the HTML's path."""
    plt = _pyplot()
    out.mkdir(parents=True, exist_ok=True)
    _heatmap(plt, report, out / PLOTS[0])
    _idle_bars(plt, report, out / PLOTS[1])
    _incidents(plt, report, out / PLOTS[2])
    page = out / "report.html"
    page.write_text(_page(report))
    return page


def _heatmap(plt: Any, report: Report, path: Path) -> None:
    names = sorted(report.hourly)
    grid = [[float("nan") if v is None else v * 100 for v in report.hourly[n]] for n in names] or [[0.0]]
    fig, ax = plt.subplots(figsize=(12, 1.2 + 0.3 * len(grid)))
    image = ax.imshow(grid, aspect="auto", cmap="viridis", vmin=0, vmax=100, interpolation="nearest")
    ax.set_yticks(range(len(names)), names, fontsize=8)
    ax.set_xlabel(f"hours since {when(report.window.start)} UTC")
    ax.set_title("Utilization per GPU and hour (%)")
    fig.colorbar(image, ax=ax, label="%")
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


def _idle_bars(plt: Any, report: Report, path: Path) -> None:
    rows = report.namespaces
    fig, ax = plt.subplots(figsize=(8, 1.5 + 0.4 * max(1, len(rows))))
    names = [r.name for r in rows]
    ax.barh(names, [r.idle_gpu_hours - r.allocated_idle_gpu_hours for r in rows], label="idle, unallocated",
            color="#9ab")
    ax.barh(names, [r.allocated_idle_gpu_hours for r in rows], left=[r.idle_gpu_hours
                                                                     - r.allocated_idle_gpu_hours
                                                                     for r in rows],
            label="allocated but idle", color="#d62")
    ax.set_xlabel("idle GPU-hours")
    ax.set_title("Idle GPU-hours by namespace")
    ax.legend(loc="lower right")
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


def _incidents(plt: Any, report: Report, path: Path) -> None:
    colors = {"throttled": "#e90", "critical": "#c00"}
    gpus = sorted({f"{i.node}/{i.gpu}" for i in report.incidents})
    fig, ax = plt.subplots(figsize=(12, 1.5 + 0.4 * max(1, len(gpus))))
    start = report.window.start
    for incident in report.incidents:
        ax.broken_barh([((incident.start - start) / 3600, incident.duration_seconds / 3600)],
                       (gpus.index(f"{incident.node}/{incident.gpu}") - 0.4, 0.8),
                       color=colors.get(incident.state, "#888"))
    for xid in report.xids:
        row = f"{xid.node}/{xid.gpu}"
        if row not in gpus:
            gpus.append(row)
        ax.plot((xid.time - start) / 3600, gpus.index(row), marker="x", color="black")
    ax.set_yticks(range(len(gpus)), gpus)
    ax.set_xlim(0, report.window.seconds / 3600)
    ax.set_xlabel(f"hours since {when(start)} UTC (orange throttled, red critical, x an XID)")
    ax.set_title("Health incidents and XID errors")
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


def _table(header: list[str], rows: list[list[object]]) -> str:
    if not rows:
        return "<p>(none)</p>"
    head = "".join(f"<th>{html.escape(h)}</th>" for h in header)
    body = "".join("<tr>" + "".join(f"<td>{html.escape(str(c))}</td>" for c in row) + "</tr>" for row in rows)
    return f"<table><tr>{head}</tr>{body}</table>"


def _page(report: Report) -> str:
    w = report.window
    unit = gpu_time(w)
    parts = [f"<h1>GPU fleet report</h1><p>{when(w.start)} to {when(w.end)} UTC, every {w.step:g} s; idle: "
             f"an hour averaging below {report.threshold:.0%}.</p>",
             f'<img src="{PLOTS[0]}" alt="utilization heatmap">',
             '<h2>Allocated but idle (biggest saving first)</h2>',
             _table(["namespace", "pod", "workload", "node", "gpu", f"held {unit.name}", f"idle {unit.name}",
                     "utilization"],
                    [[h.namespace, h.pod, h.workload, h.node, h.gpu, unit(h.held_gpu_hours),
                      unit(h.idle_gpu_hours), f"{h.utilization:.1%}"] for h in report.allocated_idle]),
             f'<img src="{PLOTS[1]}" alt="idle GPU-hours by namespace">']
    for title, rows in (("Total", [report.total]), ("Per node", report.nodes),
                        ("Per namespace", report.namespaces), ("Per workload", report.workloads)):
        parts += [f"<h2>{title}</h2>", _table(*usage_rows(rows, unit))]
    parts += ["<h2>Health incidents and XID errors</h2>", f'<img src="{PLOTS[2]}" alt="incidents timeline">',
              _table(["start", "node", "gpu", "state", "hours"],
                     [[when(i.start), i.node, i.gpu, i.state, f"{i.duration_seconds / 3600:.2f}"]
                      for i in report.incidents]),
              _table(["time", "node", "gpu", "xid", "count"],
                     [[when(x.time), x.node, x.gpu, x.xid, f"{x.count:g}"] for x in report.xids]),
              "<h2>Throttling</h2>",
              _table(["node", "reason", unit.name],
                     [[t.node, t.reason, unit(t.gpu_hours)] for t in report.throttling]),
              "<h2>Autoscaler</h2>",
              _table(["namespace", "rule", "scale-ups", "scale-downs", "hours at max", "decision reasons"],
                     [[r.namespace, r.rule, r.scale_ups, r.scale_downs, f"{r.seconds_at_max / 3600:.2f}",
                       ", ".join(f"{k} {v:.0%}" for k, v in r.reason_shares.items())] for r in report.rules])]
    style = ("body{font-family:sans-serif;max-width:1200px;margin:auto}table{border-collapse:collapse;"
             "margin:1em 0}td,th{border:1px solid #ccc;padding:2px 8px;text-align:right}img{max-width:100%}")
    return (f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>GPU fleet report</title>"
            f"<style>{style}</style></head><body>{''.join(parts)}</body></html>\n")
