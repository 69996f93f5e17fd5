"""The start-up time measured from kube-state-metrics' spec and ready counts: what tune uses by default."""

from __future__ import annotations

import math

import pytest

from autoscaler.planning.startup import StartupMeasure, measure_startup, startup_queries
from autoscaler.policy import TargetRef


def series(*counts: float | None, step: float = 60.0) -> dict[float, float | None]:
    return {i * step: c for i, c in enumerate(counts)}


def test_a_rise_is_measured_until_the_ready_count_reaches_it() -> None:
    spec = series(2, 2, 4, 4, 4, 4, 4)
    ready = series(2, 2, 2, 2, 3, 4, 4)
    assert measure_startup(spec, ready) == StartupMeasure(180.0, 1)


def test_the_median_of_several_scale_ups() -> None:
    spec = series(1, 2, 2, 2, 1, 2, 2, 2, 2, 2, 1, 2, 2)
    ready = series(1, 1, 2, 2, 1, 1, 1, 1, 2, 2, 1, 1, 2)
    # rises at 60 s (ready at 120 s), 300 s (ready at 480 s), 660 s (ready at 720 s)
    assert measure_startup(spec, ready) == StartupMeasure(60.0, 3)


def test_a_rise_during_another_ones_loading_counts_with_the_first() -> None:
    spec = series(2, 3, 4, 4, 4, 4)
    ready = series(2, 2, 2, 3, 4, 4)
    assert measure_startup(spec, ready) == StartupMeasure(120.0, 1)


@pytest.mark.parametrize("cut", ["scale-down", "gap", "end", "nan", "negative"])
def test_a_scale_up_cut_short_is_not_measured(cut: str) -> None:
    spec = series(2, 4, 4, 4, 4)
    ready = series(2, 2, 2, 2, 4)
    if cut == "scale-down":
        spec.update({120.0: 2.0, 180.0: 2.0, 240.0: 2.0})
    elif cut == "gap":
        ready[180.0] = None
    elif cut == "end":
        ready[240.0] = 2.0
    elif cut == "nan":
        spec[180.0] = math.nan
    else:
        ready[120.0] = -1.0
    assert measure_startup(spec, ready) is None


def test_nothing_measured_without_a_scale_up() -> None:
    assert measure_startup(series(3, 3, 2, 2), series(3, 3, 2, 2)) is None
    assert measure_startup({}, {}) is None
    # replicas already ready when the rise shows (faster than a sample): not a start-up to measure
    assert measure_startup(series(2, 3, 3), series(2, 3, 3)) is None


def test_queries_name_the_workload_for_the_kinds_kube_state_metrics_exports() -> None:
    deployment = startup_queries(TargetRef("Deployment", "ml", "embed"))
    assert deployment == ('max(kube_deployment_spec_replicas{namespace="ml",deployment="embed"})',
                          'max(kube_deployment_status_replicas_ready{namespace="ml",deployment="embed"})')
    statefulset = startup_queries(TargetRef("StatefulSet", "ml", "llm"))
    assert statefulset is not None and 'statefulset="llm"' in statefulset[1]
    assert startup_queries(TargetRef("Rollout", "ml", "embed", "argoproj.io/v1alpha1")) is None
