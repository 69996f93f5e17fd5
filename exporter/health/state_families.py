"""Collector extension for the derived per-GPU families: health state (one-hot), speed multiplier and
availability score, computed by exporter/health/state.py from the same sweep as the device series:

    gpu_health_state{gpu="0",…,state="normal"} 1
    gpu_availability_score{gpu="0",…} 0.41

A pending row remap makes the state at least `throttled`, a failed one `critical`
(exporter/health/state.py). A GPU that is down (gpu_up 0: lost, failing, or XID 79/48) is `critical` with
speed multiplier 0 and availability score 0: schedulers and alerts must see it leave the pool, not vanish. A
GPU that answers but whose temperature and memory are both unreadable gets no state (never a made-up
optimal).
"""

from __future__ import annotations

from collections.abc import Iterable

from prometheus_client.core import Metric

from exporter import metric_table as m
from exporter.health.state import HealthState, HealthThresholds, snapshot_health
from exporter.nvml.snapshots import NodeSnapshot
from exporter.scrape.context import ScrapeContext, new_family

STATES: tuple[HealthState, ...] = tuple(HealthState)


class HealthMetrics:
    """`gpu_health_state{state}`, `gpu_speed_multiplier`, `gpu_availability_score` per GPU."""

    def __init__(self, thresholds: HealthThresholds | None = None) -> None:
        self.thresholds = thresholds or HealthThresholds()

    def collect(self, snapshot: NodeSnapshot, context: ScrapeContext) -> Iterable[Metric]:
        state, speed, score = (new_family(spec) for spec in
                               (m.HEALTH_STATE, m.SPEED_MULTIPLIER, m.AVAILABILITY_SCORE))
        for device in snapshot.devices:
            labels = context.device_labels(device)
            health = snapshot_health(device, self.thresholds)
            if health.state is not None:
                for candidate in STATES:
                    state.add_metric([*labels, candidate.value], 1.0 if candidate is health.state else 0.0)
                speed.add_metric(labels, health.state.speed_multiplier)
            if health.availability_score is not None:
                score.add_metric(labels, health.availability_score)
        for family in (state, speed, score):
            if family.samples:
                yield family
