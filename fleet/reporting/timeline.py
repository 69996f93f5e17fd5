"""The time window of `gpu-fleet report`/`export` (`--since`, `--until`, the step) and per-GPU timelines.

A window is `[end - since, end]` sampled every `step` seconds at `start + k * step`. The report's step is
`max(60 s, window / 11,000)` (Prometheus answers at most 11,000 points per series), so a week is read every
60 s and a year every ~48 min. A range query returns one series per label set; a GPU whose pod labels change
(a new holder) has two series, and for up to the lookback (5 min by default) both answer at the same instant.
`merge` keeps one point per GPU and instant: the series whose current run began later (the newer labels)
wins.
"""

from __future__ import annotations

import argparse
import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime

from fleet.errors import UsageError
from fleet.querying.prom import Series
from plumbing.prometheus.answer import RangeGrid

MIN_STEP = 60.0
"""Seconds: the exporter is scraped every 15-60 s, a finer step only repeats samples."""
MAX_POINTS = 11_000
"""Prometheus' own limit of points per series in one range query."""
POINT_BUDGET = 100_000
"""Points of one report query, GPUs x steps: parsed, merged and kept, the 8 queries of a report then stay
under 256 MiB whatever the fleet's size; a larger fleet gets a coarser step."""
MAX_WINDOW = 400 * 86400.0
_SINCE = re.compile(r"\s*([0-9]+(?:\.[0-9]+)?)\s*(s|m|h|d|w)\s*")
_UNIT = {"s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0, "w": 7 * 86400.0}


def add_window_arguments(parser: argparse.ArgumentParser, since: str) -> None:
    """`--since DURATION` (default `since`) and `--until TIME`: the window of `report` and `export`."""
    parser.add_argument("--since", default=since, metavar="DURATION",
                        help=f"the window's length, e.g. 7d, 12h, 2w (default {since})")
    parser.add_argument("--until", metavar="TIME", help="the window's end: unix seconds or ISO 8601 with a "
                        "zone (default now)")


def parse_span(text: str, flag: str = "--since") -> float:
    """'7d', '12h', '30m', '2w', '90s' -> seconds; UsageError naming `flag` otherwise."""
    match = _SINCE.fullmatch(text)
    seconds = float(match.group(1)) * _UNIT[match.group(2)] if match else 0.0
    if not 0 < seconds <= MAX_WINDOW or not math.isfinite(seconds):
        raise UsageError(f"{flag}: expected a duration like 7d, 12h, 30m or 2w, at most 400d (got {text!r})")
    return seconds


LATEST_UNIX_SECONDS = 253_402_300_799.0
"""9999-12-31T23:59:59Z: the last instant a datetime, and Prometheus' API, can name."""


def parse_time(text: str | None, now: float) -> float:
    """`--until`: unix seconds or an ISO 8601 time with a zone; None is `now`."""
    if text is None:
        return now
    try:
        when = float(text) if re.fullmatch(r"[0-9]{1,12}(?:\.[0-9]{1,9})?", text.strip()) else _iso(text)
        if not 0 <= when <= LATEST_UNIX_SECONDS:
            raise ValueError("outside 1970-9999")
        return when
    except (ValueError, OverflowError) as exc:
        raise UsageError("--until: expected unix seconds or an ISO 8601 time like 2026-11-02T08:00:00Z, "
                         f"from 1970 to 9999 (got {text[:40]!r})") from exc


def _iso(text: str) -> float:
    moment = datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    if moment.tzinfo is None:
        raise ValueError("no time zone")
    return moment.timestamp()


@dataclass(frozen=True)
class Window(RangeGrid):
    """`[start, end]` read every `step` seconds: the range queries' grid (`points` instants
    `start + k * step`) and how long it lasts."""

    @property
    def seconds(self) -> float:
        return self.end - self.start


def report_window(since: float, end: float, gpus: int = 1) -> Window:
    """The report's window: step = max(60 s, since / 11,000, since * gpus / POINT_BUDGET), so it fits one
    range query per series and a query of every GPU holds at most POINT_BUDGET points."""
    step = max(MIN_STEP, math.ceil(since / MAX_POINTS), math.ceil(since * max(gpus, 1) / POINT_BUDGET))
    return Window(end - since, end, float(step))


GpuKey = tuple[str, str]
"""(node, uuid): one physical GPU."""


def gpu_key(labels: Mapping[str, str]) -> GpuKey:
    return labels.get("node", ""), labels.get("uuid", "") or labels.get("gpu", "")


@dataclass(frozen=True)
class Point:
    """One GPU at one instant: the value and the labels of the series it came from."""

    t: float
    value: float
    labels: Mapping[str, str]


def merge(series: Iterable[Series], step: float,
          extra: tuple[str, ...] = ()) -> dict[tuple[str, ...], list[Point]]:
    """One time-ordered list of points per GPU (and per `extra` label, e.g. `xid`); at an instant answered by
    two series of the same GPU, the one whose current run of points (no gap over 1.5 steps) began later
    wins: labels that come back (free, held, free again) are one series with a gap."""
    chosen: dict[tuple[str, ...], dict[float, tuple[float, Point]]] = {}
    for one in series:
        if not one.points:
            continue
        ident = (*gpu_key(one.labels), *(one.labels.get(name, "") for name in extra))
        slots = chosen.setdefault(ident, {})
        begun = previous = one.points[0][0]
        for t, value in one.points:
            if t - previous > 1.5 * step:
                begun = t
            previous = t
            held = slots.get(t)
            if held is None or begun > held[0]:
                slots[t] = (begun, Point(t, value, one.labels))
    return {ident: [slots[t][1] for t in sorted(slots)] for ident, slots in chosen.items()}
