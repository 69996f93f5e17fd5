"""The controller's worker pool: rules go to it in runs, and there it makes the calls that wait on the API.

Deciding is pure Python and runs on the sync's own thread: 16 threads deciding 10,000 rules spent more time
taking turns at the GIL than deciding (1.3 s a sync against 0.6 s on one thread). The pool reads each rule's
scale (and, for a rule with a capacity guard, its Pending pods) before the decision, and posts its Events and
patches it after. Rules go in runs of consecutive rules, four runs per worker: a future per rule costs more
than a rule's decision at 10,000 rules, and a slow call delays only the rest of its run.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TypeVar

from autoscaler.controller.outcome import ShuttingDown
from autoscaler.kube.backend import ScaleBackend, ScaleState
from autoscaler.policy import Rule

__all__ = ["Gathered", "gather", "runs"]

T = TypeVar("T")


def runs(items: Sequence[T], workers: int) -> list[Sequence[T]]:
    """`items` in order, cut into about four runs per worker (each at least one item)."""
    size = max(1, -(-len(items) // (4 * workers)))
    return [items[i:i + size] for i in range(0, len(items), size)]


@dataclass(frozen=True, slots=True)
class Gathered:
    """What the pool read for one rule before its decision; a failure is kept for the rule's sync to tell."""

    scale: ScaleState | Exception
    pending: tuple[float, ...] | Exception = ()
    """Since when each Pending-unschedulable pod of the target has been so: asked only for a rule with a
    capacity guard whose scale was read."""


def gather(backend: ScaleBackend, rules: Sequence[Rule], stopping: threading.Event,
           tick: Callable[[], None]) -> list[Gathered]:
    """One run's reads, in order. A queued read starts only while not stopping, so SIGTERM during a slow sync
    exits quickly; `tick` tells the loop's liveness that each read finished."""
    return [_gather(backend, rule, stopping, tick) for rule in rules]


def _gather(backend: ScaleBackend, rule: Rule, stopping: threading.Event, tick: Callable[[], None],
            ) -> Gathered:
    try:
        if stopping.is_set():
            raise ShuttingDown("shutting down: scale not read")
        scale = backend.read_scale(rule.target)
    except Exception as e:  # a backend's failure for one target; reported by that rule's sync
        return Gathered(e)
    finally:
        tick()
    if rule.capacity is None:
        return Gathered(scale)
    try:
        return Gathered(scale, backend.unschedulable_since(rule.target, scale.selector))
    except Exception as e:  # told by gather_capacity (a KubeError) or as the rule's failed sync (any other)
        return Gathered(scale, e)
