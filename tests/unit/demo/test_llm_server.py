"""The fluid LLM server the quality replays step: a queue that fills when the load outgrows the ready replicas
and drains at their spare capacity, a batch and KV cache that fill with the load; and the demo's LLM rule,
which reads only series the demo's emulated server serves."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from autoscaler.config.rules import load_rules, parse_rules
from demo.llm_server import RUNNING, LlmQueue
from demo.replay import ReplaySettings, replay
from demo.traces import sudden_burst
from demo.world import REQUESTS_METRIC, served_names_in
from tests import REPO_ROOT

CAPACITY = 10.0  # requests a second per replica

steps = st.lists(st.tuples(st.floats(min_value=0, max_value=200, allow_nan=False),
                           st.integers(min_value=0, max_value=8),
                           st.floats(min_value=0.1, max_value=30, allow_nan=False)), max_size=40)


@settings(max_examples=200, deadline=None)
@given(steps)
def test_the_queue_is_what_arrived_beyond_what_the_ready_replicas_could_serve(
        sequence: list[tuple[float, int, float]]) -> None:
    queue = LlmQueue(capacity=CAPACITY)
    expected = 0.0
    for arrivals, ready, seconds in sequence:
        ttft = queue.step(arrivals, ready, seconds)
        expected = max(0.0, expected + (arrivals - CAPACITY * ready) * seconds)  # a fluid queue
        assert queue.waiting == pytest.approx(expected, rel=1e-9, abs=1e-6)
        assert 0.0 <= queue.kv_cache_usage <= 1.0
        assert queue.running_per_replica <= queue.batch_size + 1e-9
        assert ttft >= queue.prefill_seconds


def test_a_saturated_replica_fills_its_batch_and_queues_and_a_second_one_drains_the_queue() -> None:
    queue = LlmQueue(capacity=CAPACITY)
    calm = queue.step(5.0, 1, 10.0)
    assert (queue.waiting, queue.kv_cache_usage) == (0.0, pytest.approx(0.5))
    busy = queue.step(15.0, 1, 10.0)  # 5 requests a second too many for 10 s
    assert queue.waiting == pytest.approx(50.0) and queue.kv_cache_usage == 1.0
    assert busy > calm
    queue.step(15.0, 2, 10.0)  # 5 spare a second drain 50 in 10 s
    assert queue.waiting == pytest.approx(0.0, abs=1e-9)


def test_without_backlog_what_cannot_be_served_is_turned_away_but_the_batch_still_fills() -> None:
    """Before the demo's day starts (its wait for Prometheus), no queue builds that no autoscaler could have
    acted on; the KV cache still reads what the replicas serve."""
    queue = LlmQueue(capacity=CAPACITY)
    queue.step(25.0, 2, 10.0, backlog=False)  # 5 requests a second beyond two replicas
    assert (queue.waiting, queue.kv_cache_usage) == (0.0, 1.0)
    queue.step(25.0, 2, 10.0)
    assert queue.waiting == pytest.approx(50.0)


QUEUE_AND_KV_CACHE = """
rules:
  - name: inference
    target: {kind: Deployment, namespace: demo, name: inference}
    minReplicas: 2
    maxReplicas: 10
    metrics:
      - {name: queue, query: sum(vllm:num_requests_waiting), type: Total, target: 4}
      - {name: kv_cache, query: avg(vllm:kv_cache_usage_perc), type: Average, target: 0.8}
    behavior:
      scaleUp:
        stabilizationWindowSeconds: 12
        policies: [{type: Pods, value: 4, periodSeconds: 5}, {type: Percent, value: 100, periodSeconds: 5}]
      scaleDown: {stabilizationWindowSeconds: 20, policies: [{type: Percent, value: 50, periodSeconds: 5}]}
      panic: {thresholdPercent: 200}
"""


def test_the_quality_replay_reads_the_queue_and_the_kv_cache_from_the_same_model() -> None:
    """A rule on the queue and the KV cache replayed: its signals come from an LlmQueue stepped with the
    trace, so a burst beyond the ready replicas fills the queue and the rule scales up on it."""
    [rule] = parse_rules(QUEUE_AND_KV_CACHE, "llm.yaml").rules
    result = replay(rule, sudden_burst(base=1.5, peak=6.0, start_seconds=600.0, length_seconds=600.0,
                                       duration_seconds=1_800.0), ReplaySettings(warmup_seconds=0.0))
    ups = [sync for sync in result.syncs if sync.replicas > sync.current]
    assert ups and 600.0 <= ups[0].t <= 615.0  # the first sync of the burst: the queue fills at once
    assert max(sync.replicas for sync in result.syncs) >= 6
    downs = [sync for sync in result.syncs if sync.replicas < sync.current]
    assert downs and downs[-1].t > 1_200.0 and "kv_cache" in downs[-1].message  # back down after it


def test_the_llm_demo_rules_read_only_series_the_demo_serves() -> None:
    """demo/llm-rules.yaml scales the demo's service on the requests arriving (the gateway's counter, not the
    completions) and its batches, learns its target for the arrivals, and ranks its pods by their running
    requests: every query names a series the demo serves, so the demo runs it (rather than exiting with
    nothing to demo)."""
    rules = load_rules(REPO_ROOT / "demo" / "llm-rules.yaml")
    [rule] = rules.rules
    assert [served_names_in(metric.query) for metric in rule.metrics] == [[REQUESTS_METRIC], [RUNNING]]
    assert rule.slo is not None and rule.slo.learn == rule.metrics[0].name
    assert rule.pod_deletion_cost is not None and served_names_in(rule.pod_deletion_cost.query) == [RUNNING]
