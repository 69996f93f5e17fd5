"""The backfilled history (tests/history.py) is in a real Prometheus as documented: the fixture other tests
build on, checked once."""

from __future__ import annotations

import requests

from fleet.reporting.fetch import LEADER
from tests.history import (
    CONTROLLERS,
    FAILOVER_HOURS,
    GPUS_PER_NODE,
    HOUR,
    NODES,
    BackfilledPrometheus,
    recorded_replicas,
    request_rate,
)


def query(prom: BackfilledPrometheus, promql: str, at: float) -> list[dict[str, object]]:
    answer = requests.get(f"{prom.url}/api/v1/query", params={"query": promql, "time": at}, timeout=10).json()
    assert answer["status"] == "success", answer
    result: list[dict[str, object]] = answer["data"]["result"]
    return result


def scalar(prom: BackfilledPrometheus, promql: str, at: float) -> float:
    result = query(prom, promql, at)
    assert len(result) == 1, (promql, result)
    value = result[0]["value"]
    assert isinstance(value, list)
    return float(value[1])


def test_every_gpu_has_its_series_from_the_first_hour_to_the_last(backfilled_prometheus: BackfilledPrometheus,
                                                                  ) -> None:
    spec = backfilled_prometheus.spec
    for at in (spec.start + 600, spec.end):
        assert scalar(backfilled_prometheus, "count(gpu_utilization_ratio)", at) == NODES * GPUS_PER_NODE
        assert scalar(backfilled_prometheus, "count(gpu_health_state)", at) == NODES * GPUS_PER_NODE * 4
        assert scalar(backfilled_prometheus, "count(gpu_clocks_event_reason_active)", at) == 12 * 9


def test_labels_are_the_exporters(backfilled_prometheus: BackfilledPrometheus) -> None:
    series = query(backfilled_prometheus, 'gpu_utilization_ratio{node="node-0",gpu="1"}',
                   backfilled_prometheus.spec.end)
    assert len(series) == 1
    assert set(series[0]["metric"]) == {  # type: ignore[arg-type]
        "__name__", "gpu", "uuid", "model", "node", "namespace", "pod", "container"}


def test_the_batch_job_holds_its_gpu_only_on_the_second_day(
        backfilled_prometheus: BackfilledPrometheus) -> None:
    spec = backfilled_prometheus.spec
    held = 'count(gpu_allocation_info{pod="batch-job-0"})'
    assert query(backfilled_prometheus, held, spec.start + 12 * 3600) == []
    assert scalar(backfilled_prometheus, held, spec.start + 36 * 3600) == 1
    assert query(backfilled_prometheus, held, spec.start + 60 * 3600) == []


def test_the_service_and_the_recorded_autoscaler_agree_with_the_generator(
        backfilled_prometheus: BackfilledPrometheus) -> None:
    spec = backfilled_prometheus.spec
    for hours in (3, 12, 30, 58.5):
        at = spec.start + int(hours * 3600)
        rate = scalar(backfilled_prometheus, 'sum(rate(inference_requests_total{service="embed"}[5m]))', at)
        assert abs(rate - request_rate(at - spec.start)) / request_rate(at - spec.start) < 0.05
        leading = f'gpu_autoscaler_current_replicas{{rule="embed"}} {LEADER}'
        assert scalar(backfilled_prometheus, leading, at) == recorded_replicas(at - spec.start)


def test_the_replica_that_lost_its_lease_keeps_its_last_decision(
        backfilled_prometheus: BackfilledPrometheus) -> None:
    """The history models the shipped Deployment's failover: after it, two counts exist, one of them stale."""
    spec = backfilled_prometheus.spec
    failover = spec.start + FAILOVER_HOURS * HOUR
    before, after = failover - 60, failover + 6 * HOUR
    stale = {CONTROLLERS[0]: recorded_replicas(before - spec.start),
             CONTROLLERS[1]: recorded_replicas(after - spec.start)}
    counts = query(backfilled_prometheus, 'gpu_autoscaler_current_replicas{rule="embed"}', after)
    assert {r["metric"]["instance"]: float(r["value"][1]) for r in counts} == stale
    assert stale[CONTROLLERS[0]] != stale[CONTROLLERS[1]]  # the stale count is not the live one here
    leader = query(backfilled_prometheus, "gpu_autoscaler_leader == 1", after)
    assert [r["metric"]["instance"] for r in leader] == [CONTROLLERS[1]]


def test_xid_counter_counts_each_error(backfilled_prometheus: BackfilledPrometheus) -> None:
    at = backfilled_prometheus.spec.end
    assert scalar(backfilled_prometheus, 'gpu_xid_errors_total{node="node-1",gpu="2",xid="48"}', at) == 2
    assert scalar(backfilled_prometheus, 'gpu_xid_errors_total{node="node-1",gpu="2",xid="79"}', at) == 1
