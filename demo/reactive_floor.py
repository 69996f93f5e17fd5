"""What a policy that only reacts could do at best on a trace: an idealized reactive autoscaler.

Why: demo.clairvoyant bounds every policy, including one that knows the trace ahead; it says how much room
there is, not how much of it a policy that sees only the past can take. This module replays the best such
policy one can write down, in the replay's own model (demo.replay, demo.cluster): at every scored sample it
sees the load the instant it comes (no rate window, no sync period, no stabilization) and asks for exactly
`ceil(load x (1 + headroom) / overload_line)` replicas (or that plus a few spare ones), within the rule's
bounds; the replicas it no longer needs go at once. What it cannot skip is the start-up: a replica serves
`startup_delay_seconds` after it was asked for, holding its GPU while it loads. Removing the newest replicas
first, the ready count at sample i is the smallest count asked for over the start-up before it.

On a step of load (the burst trace) its overload is the start-up exactly, whatever the headroom: a floor no
rule that reacts can go under. It is not a bound on every reactive policy: a rule that keeps a swing's
replicas for a while (a scale-down window) can do better on loads whose swings come in clusters.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from autoscaler.planning.overload import is_overloaded
from demo.replay import ReplaySettings
from demo.traces import Trace, sample

HEADROOMS = tuple(percent / 100.0 for percent in range(0, 61, 2))
"""Headroom over the load tried: 0 to 60 % in steps of 2 %."""
SPARE_REPLICAS = (1, 2, 3)
"""Spare replicas over the exact count tried."""


@dataclass(frozen=True)
class FloorPoint:
    """One idealized reactive policy's figures on a trace."""

    policy: str
    gpu_hours: float
    overloaded_minutes: float


def idealized_reactive(trace: Trace, min_replicas: int, max_replicas: int,
                       settings: ReplaySettings | None = None) -> list[FloorPoint]:
    """The idealized reactive policy at each headroom and spare count, on `trace`."""
    settings = settings or ReplaySettings()
    loads = [load for _, load in sample(trace, settings.step_seconds)]
    line = settings.overload_line
    points = []
    for headroom in HEADROOMS:
        points.append(_replay(loads, lambda x, h=headroom: _exact(x * (1.0 + h), line), min_replicas,
                              max_replicas, settings, f"headroom {headroom:.0%}"))
    for spare in SPARE_REPLICAS:
        points.append(_replay(loads, lambda x, k=spare: _exact(x, line) + k, min_replicas, max_replicas,
                              settings, f"+{spare} replica{'s' if spare > 1 else ''}"))
    return points


def fewest_overloaded(points: Sequence[FloorPoint], max_gpu_hours: float) -> FloorPoint | None:
    """The point with the fewest overloaded minutes within `max_gpu_hours` (None: none is)."""
    within = [p for p in points if p.gpu_hours <= max_gpu_hours]
    return min(within, key=lambda p: (p.overloaded_minutes, p.gpu_hours)) if within else None


def _exact(load: float, line: float) -> int:
    """The fewest replicas that carry `load` at or under the overload line."""
    return max(0, math.ceil(load / line - 1e-9))


def _replay(loads: Sequence[float], asked_for: Callable[[float], int], min_replicas: int, max_replicas: int,
            settings: ReplaySettings, policy: str) -> FloorPoint:
    high = min(max_replicas, settings.cluster.gpu_count)
    asked = [min(high, max(min_replicas, asked_for(load))) for load in loads]
    startup = int(settings.cluster.startup_delay_seconds // settings.step_seconds)
    overloaded = 0
    for i, load in enumerate(loads):
        ready = min(asked[max(0, i - startup):i + 1])  # before the trace, as many as at its start
        if is_overloaded(load, ready, settings.overload_line):  # as demo.replay scores
            overloaded += 1
    step = settings.step_seconds
    return FloorPoint(policy, sum(asked) * step / 3600.0, overloaded * step / 60.0)
