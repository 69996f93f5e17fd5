"""The demo's scenarios: which rules file, pool, load and clock each plays.

- `day` (the default): a day of load compressed into the run on a pool large enough for maxReplicas; the
  controller's clock is the wall clock.
- `capacity`: a pool of 8 GPUs, fewer than the rule's maxReplicas (10) at one GPU per replica, shared with a
  training job that holds 2 of them until 60 % of the run; the load ramps past what the pool serves. The rule
  (demo/capacity-rules.yaml) has a capacity guard and a weekday schedule opening at 09:00 Europe/Berlin; the
  controller's clock starts shortly before that, on a Monday, and runs at normal speed, so the window opens
  during the run and raises minReplicas.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from zoneinfo import ZoneInfo

from autoscaler.policy import Rule
from demo.cluster import ClusterSettings
from demo.traces import Trace, demo_day, demo_morning

HERE = Path(__file__).resolve().parent
DEMO_RULES = HERE / "llm-rules.yaml"
"""The day scenario's rule: the service scaled as an LLM service is, on its queue and KV cache."""
RATE_RULES = HERE / "demo-rules.yaml"
"""The recommended GPU inference configuration (request rate and GPU utilization), shortened for the demo."""
CAPACITY_RULES = HERE / "capacity-rules.yaml"
MONDAY_OPENING = datetime(2026, 3, 2, 9, 0, tzinfo=ZoneInfo("Europe/Berlin")).timestamp()
"""Monday 2 March 2026, 09:00 in Berlin: when capacity-rules.yaml's weekday schedule opens."""
OPENING_LEAD_SECONDS = 30.0
OPENING_LEAD_FRACTION = 0.2
"""The capacity scenario's clock starts 30 s before the opening (08:59:30), or a fifth of a shorter run
before it, so the window opens within any run."""


class ShiftedClock:
    """The controller's clock: the Deployment's monotonic clock plus an offset, so the scenario can start at a
    chosen (virtual) Unix time and still run at normal speed, never jumping once the syncs started."""

    def __init__(self, base: Callable[[], float] = time.monotonic, start: float | None = None) -> None:
        self.base = base
        self.offset = (time.time() if start is None else start) - base()

    def __call__(self) -> float:
        return self.base() + self.offset

    def start_at(self, unix: float) -> None:
        """Read `unix` now (call it before the first sync)."""
        self.offset = unix - self.base()

    def from_base(self, t: float) -> float:
        """A reading of the base clock (the Deployment's) on this clock."""
        return t + self.offset


@dataclass(frozen=True)
class Scenario:
    name: str
    rules: Path
    """The rules file run when --rules is not given."""
    trace: Callable[[float], Trace]
    """The load (and the other tenant's GPUs) played in a run of the given seconds."""
    pool: Callable[[Rule], ClusterSettings]
    """The pool for the rule, without its start-up delay (the flag's)."""
    start: Callable[[float], float | None]
    """The Unix time the controller's clock reads at the first sync, for a run of the given seconds (None:
    the wall clock)."""


def _day_pool(rule: Rule) -> ClusterSettings:
    """Two nodes with room for maxReplicas: the day scenario is never short of GPUs."""
    return ClusterSettings(nodes=2, gpus_per_node=max(6, (rule.max_replicas + 1) // 2))


def _capacity_pool(rule: Rule) -> ClusterSettings:
    """Two nodes of 4 GPUs: 8, fewer than capacity-rules.yaml's maxReplicas 10."""
    return ClusterSettings(nodes=2, gpus_per_node=4)


def _before_opening(duration: float) -> float:
    return MONDAY_OPENING - min(OPENING_LEAD_SECONDS, OPENING_LEAD_FRACTION * duration)


SCENARIOS = {
    "day": Scenario("day", DEMO_RULES, demo_day, _day_pool, lambda duration: None),
    "capacity": Scenario("capacity", CAPACITY_RULES, demo_morning, _capacity_pool, _before_opening),
}
