"""The controller end to end: real Prometheus, the official Kubernetes client against the fake API server.

After each fault: the right replica count, nothing patched twice, the reason visible in events and metrics.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable

import pytest

from autoscaler.config.rules import parse_rules
from autoscaler.controller.loop import Controller
from autoscaler.kube.scale import KubernetesScaleBackend
from demo.processes import free_port
from plumbing.prometheus.runner import PromQLRunner, PromQLSettings
from tests.fake_kube.apiserver import FakeApiServer, Workload
from tests.integration.autoscaler.controller.conftest import RealController
from tests.prom import Prom
from tests.rules import rule, rules_yaml

pytestmark = pytest.mark.integration


def exposition_value(c: Controller, name: str, **labels: str) -> float | None:
    for metric in c.metrics.registry.collect():
        for s in metric.samples:
            if s.name == name and all(s.labels.get(k) == v for k, v in labels.items()):
                return s.value
    return None


@pytest.fixture
def make(real_controller: RealController, prom: Prom) -> Callable[..., Controller]:
    def build(*texts: str, prometheus: str | None = None, request_timeout: float = 1.0) -> Controller:
        settings = PromQLSettings(prometheus or prom.url, query_timeout=1.0, budget=2.0, backoff_initial=0.05)
        return real_controller(parse_rules(rules_yaml(*texts), "rules.yaml"), settings,
                               request_timeout=request_timeout)

    return build


def test_scales_from_real_metrics_and_reports(
    make: Callable[..., Controller], apiserver: FakeApiServer, prom: Prom
) -> None:
    apiserver.add("web", 2)
    prom.target.set("e2e-web", 160)
    query = 'test_load{series="e2e-web"}'
    prom.wait_value(query, 160)
    c = make(rule("web", query))
    c.sync_once()
    assert apiserver.replicas("web") == 4
    event = apiserver.events[-1]
    assert (event["type"], event["reason"]) == ("Normal", "ScaledUp")
    assert "New size: 4 (2 -> 4)" in event["message"] and "util=160 (target 80)" in event["message"]
    assert exposition_value(c, "gpu_autoscaler_scale_events_total", rule="web", direction="up") == 1
    prom.target.set("e2e-web", 80)
    prom.wait_value(query, 80)
    outcome = c.sync_once().outcomes[0]
    assert outcome.reason == "WithinTolerance"
    assert apiserver.patches("web") == [4]


def test_decides_from_spec_replicas_while_a_rollout_has_fewer_running(
    make: Callable[..., Controller], apiserver: FakeApiServer, prom: Prom
) -> None:
    """As the HPA: the current count is the Scale's spec.replicas; status.replicas (pods running) may lag."""
    web = apiserver.add("web", 4)
    web.status_replicas = 2  # 4 wanted, 2 started so far
    prom.target.set("e2e-rollout", 160)
    query = 'test_load{series="e2e-rollout"}'
    prom.wait_value(query, 160)
    c = make(rule("web", query))
    outcome = c.sync_once().outcomes[0]
    assert (outcome.current, outcome.desired) == (4, 8)  # from status it would have been 2 -> 4
    assert apiserver.patches("web") == [8]
    assert exposition_value(c, "gpu_autoscaler_current_replicas", rule="web") == 4


def test_prometheus_down_holds_and_says_why(
    make: Callable[..., Controller], apiserver: FakeApiServer
) -> None:
    apiserver.add("web", 3)
    c = make(rule("web", "up"), prometheus=f"http://127.0.0.1:{free_port()}")
    outcome = c.sync_once().outcomes[0]
    assert (outcome.reason, apiserver.replicas("web"), apiserver.patches()) == ("MetricsFailed", 3, [])
    assert apiserver.event_reasons("web") == ["FailedGetMetrics"]
    assert "Unreachable" in apiserver.events[0]["message"] and apiserver.events[0]["type"] == "Warning"
    assert exposition_value(c, "gpu_autoscaler_query_errors_total", rule="web", reason="Unreachable") == 1
    assert exposition_value(c, "gpu_autoscaler_metric_up", rule="web") == 0


def test_prometheus_down_with_fallback(make: Callable[..., Controller], apiserver: FakeApiServer) -> None:
    apiserver.add("web", 3)
    fallback = "fallback: {failureThreshold: 1, replicas: 5}\n"
    c = make(rule("web", "up", extra=fallback), prometheus=f"http://127.0.0.1:{free_port()}")
    assert [c.sync_once().outcomes[0].reason for _ in range(3)] == ["MetricsFailed", "Fallback", "Fallback"]
    assert apiserver.patches("web") == [5]
    assert "ScaledUp" in apiserver.event_reasons("web")


def test_stale_series_is_a_failed_metric(
    make: Callable[..., Controller], apiserver: FakeApiServer, prom: Prom
) -> None:
    apiserver.add("web", 2)
    prom.target.set("e2e-stale", 300)
    query = 'test_load{series="e2e-stale"}'
    prom.wait_value(query, 300)
    prom.target.remove("e2e-stale")
    prom.wait_absent(query)
    c = make(rule("web", query))
    assert c.sync_once().outcomes[0].reason == "MetricsFailed"
    assert apiserver.patches() == [] and "NoSeries" in apiserver.events[0]["message"]


def test_bad_query_among_good_ones(
    make: Callable[..., Controller], apiserver: FakeApiServer, prom: Prom
) -> None:
    apiserver.add("good", 2)
    apiserver.add("bad", 2)
    prom.target.set("e2e-good", 160)
    query = 'test_load{series="e2e-good"}'
    prom.wait_value(query, 160)
    c = make(rule("bad", "sum(test_load"), rule("good", query, max_replicas=20))
    c.sync_once()
    assert (apiserver.replicas("good"), apiserver.replicas("bad")) == (4, 2)
    assert apiserver.event_reasons("bad") == ["FailedGetMetrics"]
    assert (
        "BadQuery"
        in apiserver.events[[e["involvedObject"]["name"] for e in apiserver.events].index("bad")]["message"]
    )
    assert exposition_value(c, "gpu_autoscaler_query_errors_total", rule="bad", reason="BadQuery") == 1


def test_two_spellings_of_one_capacity_query_share_its_free_gpus_once(
    make: Callable[..., Controller], apiserver: FakeApiServer, prom: Prom
) -> None:
    """Whitespace and an empty `by ()` apart, the same query: 5 free GPUs are given once, not to each."""
    spellings = ['sum(test_load{series="e2e-free"})', 'sum by () (\n  test_load{ series = "e2e-free" }\n)']
    for name in ("a", "b"):
        apiserver.add(name, 2)
        prom.target.set(f"e2e-pool-{name}", 400)  # each wants 10 replicas; one sync may add 4
    prom.target.set("e2e-free", 5)
    for query in spellings:
        prom.wait_value(query, 5)
    for name in ("a", "b"):
        prom.wait_value(f'test_load{{series="e2e-pool-{name}"}}', 400)
    c = make(*(rule(name, f'test_load{{series="e2e-pool-{name}"}}',
                    extra=f"capacity: {{query: {json.dumps(query)}, gpusPerReplica: 1}}\n")
               for name, query in zip("ab", spellings, strict=True)))
    report = c.sync_once()
    assert apiserver.replicas("a") + apiserver.replicas("b") == 2 + 2 + 5
    assert {o.reason for o in report.outcomes} == {"CapacityLimited"}
    assert all("pool shared by 2 rules" in o.message for o in report.outcomes)


def test_conflict_rereads_and_patches_once(
    make: Callable[..., Controller], apiserver: FakeApiServer, prom: Prom
) -> None:
    apiserver.add("web", 2)
    prom.target.set("e2e-conflict", 160)
    query = 'test_load{series="e2e-conflict"}'
    prom.wait_value(query, 160)

    def kubectl_scale(w: Workload) -> None:  # a user scales to 3 between our read and our patch
        w.replicas, w.version = 3, w.version + 1

    apiserver.before_patch = kubectl_scale
    c = make(rule("web", query))
    outcome = c.sync_once().outcomes[0]
    assert (outcome.current, outcome.desired) == (3, 6)
    assert apiserver.replicas("web") == 6 and apiserver.patches("web") == [6]
    assert len([r for r in apiserver.requests if r.method == "PATCH"]) == 2  # the 409 one and the applied one
    assert exposition_value(c, "gpu_autoscaler_scale_errors_total", rule="web", reason="Conflict") == 1


def test_api_outage_on_patch_is_reported_then_retried(
    make: Callable[..., Controller], apiserver: FakeApiServer, prom: Prom
) -> None:
    apiserver.add("web", 2)
    prom.target.set("e2e-outage", 160)
    query = 'test_load{series="e2e-outage"}'
    prom.wait_value(query, 160)
    apiserver.fail("PATCH", "/web/scale$", 500, times=1)
    c = make(rule("web", query))
    assert not c.sync_once().outcomes[0].ok
    assert apiserver.replicas("web") == 2 and apiserver.event_reasons("web") == ["FailedScale"]
    assert "HTTP 500" in apiserver.events[0]["message"]
    assert exposition_value(c, "gpu_autoscaler_scale_errors_total", rule="web", reason="ApiError") == 1
    assert c.sync_once().outcomes[0].patched
    assert apiserver.patches("web") == [4] and apiserver.replicas("web") == 4


def test_api_outage_on_reads_and_slow_answers(
    make: Callable[..., Controller], apiserver: FakeApiServer, prom: Prom
) -> None:
    apiserver.add("down", 2)
    apiserver.add("slow", 2)
    prom.target.set("e2e-reads", 160)
    query = 'test_load{series="e2e-reads"}'
    prom.wait_value(query, 160)
    apiserver.fail("GET", "/down/scale$", 503, times=None)
    apiserver.delay("GET", "/slow/scale$", 1.5, times=1)
    c = make(rule("down", query), rule("slow", query, max_replicas=20), request_timeout=0.3)
    report = c.sync_once()
    assert [o.reason for o in report.outcomes] == ["FailedGetScale", "FailedGetScale"]
    assert apiserver.patches() == []
    assert exposition_value(c, "gpu_autoscaler_scale_errors_total", rule="down", reason="ApiError") == 1
    assert exposition_value(c, "gpu_autoscaler_scale_errors_total", rule="slow", reason="Timeout") == 1
    assert set(apiserver.event_reasons()) == {"FailedGetScale"}
    apiserver.clear_faults()
    c.sync_once()
    assert apiserver.patches() in ([4, 4],) and apiserver.replicas("down") == apiserver.replicas("slow") == 4


def test_slow_prometheus_fails_metrics_within_the_budget(
    apiserver: FakeApiServer, silent_server: int
) -> None:
    apiserver.add("web", 3)
    rules = parse_rules(rules_yaml(rule("web", "up")), "rules.yaml")
    runner = PromQLRunner(PromQLSettings(f"http://127.0.0.1:{silent_server}", query_timeout=30.0, budget=0.8))
    backend = KubernetesScaleBackend(apiserver.api_client(), request_timeout=1.0)
    c = Controller(backend, runner, rules, time.time)
    try:
        report = c.sync_once()
    finally:
        c.close()
        runner.close()
    assert report.duration < 0.8 + 5.0  # the budget ends it, not the 30 s query timeout
    assert report.outcomes[0].reason == "MetricsFailed" and apiserver.patches() == []
    assert "Timeout" in apiserver.events[0]["message"]
    assert exposition_value(c, "gpu_autoscaler_query_errors_total", rule="web", reason="Timeout") == 1
