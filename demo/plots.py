"""PNG plots of the benchmark (one per trace) and of the demo run, with matplotlib's Agg canvas.

Figures are built on `matplotlib.figure.Figure` directly (no pyplot, no global state, no display needed) at
900x450 pixels, and long series are thinned to at most `MAX_POINTS` so the PNGs stay small. matplotlib (0.8 s
to import) loads when the first figure is drawn, at the end of a run, not when the demo starts.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from demo.replay import ReplayResult
from demo.traces import Trace

if TYPE_CHECKING:
    from matplotlib.figure import Figure

MAX_POINTS = 1_500
SIZE_INCHES = (9.0, 4.5)
DPI = 100
COLORS = ("#d62728", "#7f7f7f", "#1f77b4", "#2ca02c", "#9467bd")


def _thin(count: int) -> int:
    return max(1, count // MAX_POINTS)


def _time_axis(seconds: Sequence[float], duration: float) -> tuple[list[float], str]:
    if duration > 3 * 3_600:
        return [s / 3_600 for s in seconds], "hours"
    if duration > 600:
        return [s / 60 for s in seconds], "minutes"
    return list(seconds), "seconds"


def _figure() -> Figure:
    from matplotlib.figure import Figure

    return Figure(figsize=SIZE_INCHES, layout="constrained")


def _save(figure: Figure, path: Path) -> None:
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    path.parent.mkdir(parents=True, exist_ok=True)
    FigureCanvasAgg(figure)
    figure.savefig(path, dpi=DPI)


def plot_comparison(trace: Trace, results: Sequence[tuple[str, ReplayResult]], path: Path,
                    overload_line: float, pool_gpus: int | None = None) -> None:
    """Top: the load and each configuration's replicas (and, with `pool_gpus` on a trace with other tenants,
    the GPUs they leave). Bottom: load per ready GPU vs the overload line."""
    figure = _figure()
    top, bottom = figure.subplots(2, 1, sharex=True, height_ratios=(3, 2))
    first = results[0][1].samples
    step = _thin(len(first))
    times, unit = _time_axis([s.t for s in first[::step]], trace.duration_seconds)
    top.fill_between(times, [s.load for s in first[::step]], color="#dddddd", label="load (GPUs of work)",
                     step="post")
    for (label, result), color in zip(results, COLORS, strict=False):
        samples = result.samples[::step]
        top.step(times, [s.replicas for s in samples], where="post", color=color, linewidth=1.3,
                 label=f"{label}: {result.figures.gpu_hours:.1f} GPU-h")
        bottom.step(times, [min(s.demand_per_ready, 1.5) * 100 for s in samples], where="post", color=color,
                    linewidth=0.9)
    if pool_gpus is not None and trace.others is not None:
        top.step(times, [pool_gpus - trace.others_at(s.t) for s in first[::step]], where="post",
                 color="black", linestyle=":", linewidth=1.0, label="GPUs the other tenant leaves")
    highest = max(max(s.replicas for _, r in results for s in r.samples), max(s.load for s in first))
    top.set_ylim(0, highest * 1.45)  # room for the legend above the curves
    bottom.axhline(overload_line * 100, color="black", linestyle="--", linewidth=0.8,
                   label=f"overload line {overload_line:.0%}")
    top.set_ylabel("replicas / load")
    top.set_title(f"{trace.name}: {trace.description}", fontsize=10)
    top.legend(loc="upper left", fontsize=7, ncols=2)
    bottom.set_ylabel("load per ready GPU %")
    bottom.set_ylim(0, 155)
    bottom.set_xlabel(unit)
    bottom.legend(loc="upper left", fontsize=7)
    _save(figure, path)


@dataclass(frozen=True)
class DemoPoint:
    """One sync of the demo as the plot and the summary need it."""

    t: float
    load: float
    replicas: int
    ready: int
    desired: int | None
    utilization: float | None
    """The plotted metric as the engine compares it with its target (a Total one per replica), None when it
    failed."""
    gpu_utilization: float | None = None
    """The simulated Deployment's mean GPU utilization (%), whatever the rule queries; None: no GPU held."""


def plot_demo(points: Sequence[DemoPoint], path: Path, metric_name: str, target: float | None,
              title: str, gpu_on_own_axis: bool = False) -> None:
    """Top: load and replicas (desired, ready). Bottom: the rule's plotted metric against its target, and the
    simulated mean GPU utilization (on a right-hand % axis when the metric is not a utilization)."""
    figure = _figure()
    top, bottom = figure.subplots(2, 1, sharex=True, height_ratios=(3, 2))
    times = [p.t for p in points]
    top.fill_between(times, [p.load for p in points], color="#dddddd", label="load (GPUs of work)",
                     step="post")
    top.step(times, [p.replicas for p in points], where="post", color=COLORS[2], linewidth=1.5,
             label="replicas")
    top.step(times, [p.ready for p in points], where="post", color=COLORS[3], linewidth=1.0,
             linestyle="--", label="ready")
    highest = max([p.replicas for p in points] + [p.load for p in points] + [1])
    top.set_ylim(0, highest * 1.3)
    top.set_ylabel("replicas / load")
    top.set_title(title, fontsize=10)
    top.legend(loc="upper left", fontsize=7, ncols=3)
    bottom.plot(times, [p.utilization if p.utilization is not None else float("nan") for p in points],
                color=COLORS[0], linewidth=1.0, label=metric_name)
    if target is not None:
        bottom.axhline(target, color="black", linestyle="--", linewidth=0.8, label=f"target {target:g}")
    gpu_axis = bottom.twinx() if gpu_on_own_axis else bottom
    simulated = [p.gpu_utilization if p.gpu_utilization is not None else float("nan") for p in points]
    gpu_axis.plot(times, simulated, color=COLORS[1], linewidth=0.8,
                  label="mean GPU utilization % (simulated)")
    if gpu_on_own_axis:
        gpu_axis.set_ylim(0, 105)
        gpu_axis.set_ylabel("GPU utilization %")
        gpu_axis.legend(loc="upper right", fontsize=7)
    bottom.set_xlabel("seconds")
    bottom.legend(loc="upper left", fontsize=7)
    _save(figure, path)
