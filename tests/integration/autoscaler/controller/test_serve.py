"""`run` in-process (serve): hot reload, /metrics, /healthz and /readyz, two replicas with leader election,
`--once` without the leadership."""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import requests
from kubernetes import client
from prometheus_client.parser import text_string_to_metric_families

from autoscaler.cli.run import RunOptions, serve
from autoscaler.controller.loop import SyncReport
from autoscaler.kube.leader import LeaseSettings
from demo.processes import free_port
from tests.fake_kube.apiserver import FakeApiServer
from tests.prom import Prom
from tests.rules import minimal_rules
from tests.support import wait_for

pytestmark = pytest.mark.integration

INTERVAL = 0.25


def rules_text(*names: str, query: str = "q") -> str:
    return minimal_rules(*names, query=query, max_replicas=20)


def swap(root: Path, stamp: str, text: str) -> None:
    """Publish `text` as root/rules.yaml the way the kubelet updates a mounted ConfigMap."""
    (root / f"..{stamp}").mkdir()
    (root / f"..{stamp}" / "rules.yaml").write_text(text)
    (root / "..data_tmp").symlink_to(f"..{stamp}")
    os.replace(root / "..data_tmp", root / "..data")
    if not (root / "rules.yaml").is_symlink():
        (root / "rules.yaml").symlink_to("..data/rules.yaml")


class Running:
    def __init__(self, options: RunOptions, api: FakeApiServer, token: str | None = None) -> None:
        self.options = options
        self.stop = threading.Event()
        self.reports: list[SyncReport] = []
        self.wedge = threading.Event()
        """Set: the loop blocks after its next sync (in on_sync) until `unwedge` is set."""
        self.unwedge = threading.Event()
        self.code: int | None = None
        client = api.api_client(token=token)
        self.thread = threading.Thread(target=self._run, args=(client,), daemon=True)
        self.thread.start()
        wait_for(self._listening, 5, "/healthz to answer")

    def _listening(self) -> bool:
        try:
            self.healthz()
        except requests.ConnectionError:
            return False
        return True

    def _run(self, client: object) -> None:
        self.code = serve(self.options, client, self.stop, on_sync=self._on_sync)  # type: ignore[arg-type]

    def _on_sync(self, report: SyncReport) -> None:
        self.reports.append(report)
        if self.wedge.is_set():
            self.unwedge.wait(timeout=30)

    def metrics(self) -> dict[str, list[tuple[dict[str, str], float]]]:
        text = requests.get(f"http://127.0.0.1:{self.options.metrics_port}/metrics", timeout=2).text
        out: dict[str, list[tuple[dict[str, str], float]]] = {}
        for family in text_string_to_metric_families(text):
            for s in family.samples:
                out.setdefault(s.name, []).append((s.labels, s.value))
        return out

    def value(self, name: str) -> float | None:
        samples = self.metrics().get(name)
        return samples[0][1] if samples else None

    def healthz(self, path: str = "/healthz") -> int:
        return requests.get(f"http://127.0.0.1:{self.options.metrics_port}{path}", timeout=2).status_code

    def probe(self, path: str) -> tuple[int, str]:
        answer = requests.get(f"http://127.0.0.1:{self.options.metrics_port}{path}", timeout=2)
        return answer.status_code, answer.text

    def close(self) -> None:
        self.unwedge.set()
        self.stop.set()
        self.thread.join(timeout=10)
        assert not self.thread.is_alive()


@pytest.fixture
def start(apiserver: FakeApiServer) -> Iterator[Callable[..., Running]]:
    running: list[Running] = []

    def make(rules: Path, prometheus: str, token: str | None = None, **kw: Any) -> Running:
        options = RunOptions(
            rules=str(rules),
            prometheus=prometheus,
            interval=INTERVAL,
            metrics_port=free_port(),
            metrics_host="127.0.0.1",
            **kw,
        )
        r = Running(options, apiserver, token)
        running.append(r)
        return r

    yield make
    for r in running:
        r.close()


def test_hot_reload_and_garbage_keeps_previous_rules(
    start: Callable[..., Running], apiserver: FakeApiServer, prom: Prom, tmp_path: Path
) -> None:
    prom.target.set("serve-reload", 160)
    query = 'test_load{series="serve-reload"}'
    prom.wait_value(query, 160)
    apiserver.add("a", 2)
    apiserver.add("b", 2)
    swap(tmp_path, "1", rules_text("a", query=query))
    r = start(tmp_path / "rules.yaml", prom.url)
    wait_for(lambda: apiserver.replicas("a") >= 4, 10, "rule a to scale")
    swap(tmp_path, "2", "rules: [ {{{ garbage")
    wait_for(lambda: r.value("gpu_autoscaler_rules_valid") == 0, 10, "rules_valid 0")
    synced = len(r.reports)
    wait_for(lambda: len(r.reports) > synced + 1, 10, "syncs to go on with the previous rules")
    assert r.value("gpu_autoscaler_rules_loaded") == 1
    assert all(o.rule.name == "a" for o in r.reports[-1].outcomes)
    swap(tmp_path, "3", rules_text("a", "b", query=query))
    wait_for(lambda: r.value("gpu_autoscaler_rules_valid") == 1, 10, "rules_valid 1")
    wait_for(lambda: apiserver.replicas("b") >= 4, 10, "the new rule b to act")
    assert r.value("gpu_autoscaler_rules_loaded") == 2
    assert r.healthz() == 200


def test_prometheus_down_and_kubernetes_failing_never_fail_the_probes(
    start: Callable[..., Running], apiserver: FakeApiServer, tmp_path: Path
) -> None:
    apiserver.add("a", 2)
    (tmp_path / "rules.yaml").write_text(rules_text("a"))
    r = start(tmp_path / "rules.yaml", f"http://127.0.0.1:{free_port()}")  # Prometheus down
    wait_for(lambda: len(r.reports) >= 5, 10, "more than 3 intervals of syncs")
    # every metric fails, but each sync completed and read the scale: a successful sync
    assert r.healthz() == 200 and r.healthz("/readyz") == 200
    assert all(report.ok for report in r.reports)
    assert r.value("gpu_autoscaler_last_successful_sync_timestamp_seconds") is not None
    errors = r.metrics()["gpu_autoscaler_query_errors_total"]
    assert errors[0][0]["reason"] == "Unreachable" and errors[0][1] >= 3
    assert r.metrics()["gpu_autoscaler_metric_up"][0][1] == 0
    assert "FailedGetMetrics" in apiserver.event_reasons("a")
    # the Kubernetes API fails the rule's scale reads for more than 3 intervals: the loop still runs, so the
    # probes hold (a restart would fix nothing); metrics, Events and the probe's message say what is wrong
    apiserver.fail("GET", r"/deployments/a/scale$", 500, times=None)
    failing = len(r.reports)
    wait_for(lambda: len(r.reports) >= failing + 5, 10, "more than 3 intervals of failing syncs")
    wait_for(lambda: "no rule synced successfully" in r.probe("/healthz")[1], 10, "the probe to say so")
    assert r.probe("/healthz")[0] == 200 and r.healthz("/readyz") == 200
    assert not r.reports[-1].ok
    assert (r.value("gpu_autoscaler_leader"), r.value("gpu_autoscaler_dry_run")) == (1, 0)
    apiserver.clear_faults()
    wait_for(lambda: r.probe("/healthz") == (200, "ok\n"), 10, "the message to clear")
    assert apiserver.patches() == []


def test_a_target_that_does_not_exist_never_fails_liveness(
    start: Callable[..., Running], apiserver: FakeApiServer, tmp_path: Path
) -> None:
    """A fresh install with the example rule's Deployment missing: every sync 404s; no restart loop."""
    (tmp_path / "rules.yaml").write_text(rules_text("missing"))
    r = start(tmp_path / "rules.yaml", f"http://127.0.0.1:{free_port()}")
    began = time.monotonic()
    wait_for(lambda: len(r.reports) >= 6 and time.monotonic() - began > 4 * INTERVAL, 10, "4 intervals")
    assert not any(report.ok for report in r.reports)
    assert r.healthz() == 200 and r.healthz("/readyz") == 200
    metrics = r.metrics()
    assert "gpu_autoscaler_last_successful_sync_timestamp_seconds" not in metrics  # what the alerts watch
    (errors,) = metrics["gpu_autoscaler_scale_errors_total"]
    assert errors[0]["reason"] == "NotFound" and errors[1] >= 6
    assert apiserver.event_reasons("missing") == ["FailedGetScale"]  # an identical Warning waits 5 minutes


def test_a_wedged_loop_fails_liveness_and_readiness(
    start: Callable[..., Running], apiserver: FakeApiServer, tmp_path: Path
) -> None:
    apiserver.add("a", 2)
    (tmp_path / "rules.yaml").write_text(rules_text("a"))
    r = start(tmp_path / "rules.yaml", f"http://127.0.0.1:{free_port()}")
    wait_for(lambda: r.reports, 10, "a first sync")
    assert r.healthz() == 200 and r.healthz("/readyz") == 200
    r.wedge.set()  # the loop blocks after its next sync
    wait_for(lambda: r.healthz() == 503, 10, "/healthz to fail")
    code, message = r.probe("/readyz")
    assert code == 503 and message.startswith("sync loop stuck: no progress for")
    syncs = len(r.reports)
    r.wedge.clear()
    r.unwedge.set()
    wait_for(lambda: len(r.reports) > syncs, 10, "the loop to sync again")
    wait_for(lambda: r.healthz() == 200 and r.healthz("/readyz") == 200, 10, "the probes to recover")


def test_stop_during_a_slow_sync_of_many_rules_exits_within_one_interval(
    apiserver: FakeApiServer, prom: Prom, tmp_path: Path
) -> None:
    names = [f"r{i}" for i in range(160)]
    for name in names:
        apiserver.add(name, 2)
    (tmp_path / "rules.yaml").write_text(rules_text(*names, query='test_load{series="serve-absent"}'))
    apiserver.delay("GET", r"/scale$", 0.8)  # 160 reads x 0.8 s / 16 workers: 8 s, two intervals
    options = RunOptions(
        rules=str(tmp_path / "rules.yaml"), prometheus=prom.url, interval=4.0, metrics_port=None
    )
    stop = threading.Event()
    thread = threading.Thread(target=serve, args=(options, apiserver.api_client(), stop), daemon=True)
    thread.start()

    def scale_reads() -> int:
        with apiserver.lock:
            return sum(1 for q in apiserver.requests if q.method == "GET" and q.path.endswith("/scale"))

    wait_for(lambda: scale_reads() >= 20, 10, "the slow sync to be under way")
    stopped = time.monotonic()
    stop.set()  # what SIGTERM does
    thread.join(timeout=options.interval)
    assert not thread.is_alive(), "still syncing one interval after the stop"
    assert time.monotonic() - stopped < options.interval
    assert scale_reads() < len(names)  # the queued reads were skipped
    thread.join(timeout=10)


def test_two_replicas_with_leader_election_patch_once(
    start: Callable[..., Running], apiserver: FakeApiServer, prom: Prom, tmp_path: Path
) -> None:
    prom.target.set("serve-leader", 160)
    query = 'test_load{series="serve-leader"}'
    prom.wait_value(query, 160)
    apiserver.add("a", 2)
    (tmp_path / "rules.yaml").write_text(rules_text("a", query=query))

    def lease(identity: str) -> LeaseSettings:
        return LeaseSettings(
            identity=identity, lease_duration=2, renew_deadline=1.0, retry_period=0.1, request_timeout=0.5
        )

    one = start(
        tmp_path / "rules.yaml",
        prom.url,
        token="one",
        leader_elect=True,
        lease=lease("one"),
    )
    two = start(
        tmp_path / "rules.yaml",
        prom.url,
        token="two",
        leader_elect=True,
        lease=lease("two"),
    )
    wait_for(lambda: apiserver.replicas("a") == 4, 10, "the leader to scale 2 -> 4")
    leaders = {r: r.value("gpu_autoscaler_leader") for r in (one, two)}
    assert sorted(v or 0 for v in leaders.values()) == [0, 1] and None not in leaders.values()
    leader = one if leaders[one] == 1 else two
    standby = two if leader is one else one
    assert apiserver.lease_holder() == leader.options.lease.identity  # type: ignore[union-attr]
    assert standby.healthz() == 200 and standby.probe("/readyz") == (200, "ok: standby (not the leader)\n")
    # the standby never read or patched anything; the leader patched exactly once so far
    assert all(not report.acted for report in standby.reports)
    assert apiserver.patches("a") == [4]
    # the leader goes away (SIGTERM-like stop): the standby takes over and acts on new metrics
    leader.close()
    wait_for(lambda: standby.value("gpu_autoscaler_leader") == 1, 5, "the standby to lead")
    wait_for(lambda: any(report.acted for report in standby.reports), 5, "a first sync as the leader")
    # it has been running for many intervals without a sync of its own: its clock starts now
    assert standby.probe("/healthz") == (200, "ok\n")
    prom.target.set("serve-leader", 320)
    wait_for(lambda: apiserver.replicas("a") == 8, 10, "the new leader to scale 4 -> 8")
    assert apiserver.patches("a")[:2] == [4, 8]


def test_once_without_the_leadership_syncs_nothing_and_exits_1(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    (tmp_path / "rules.yaml").write_text(rules_text("a"))
    configuration = client.Configuration(host=f"http://127.0.0.1:{free_port()}")  # no API server there
    configuration.retries = 0
    lease = LeaseSettings(lease_duration=1, renew_deadline=0.5, retry_period=0.1, request_timeout=0.2)
    options = RunOptions(
        rules=str(tmp_path / "rules.yaml"),
        prometheus=f"http://127.0.0.1:{free_port()}",
        interval=INTERVAL,
        once=True,
        metrics_port=None,
        leader_elect=True,
        lease=lease,
    )
    reports: list[SyncReport] = []
    with client.ApiClient(configuration) as api_client, caplog.at_level(logging.ERROR, "autoscaler.cli.run"):
        code = serve(options, api_client, threading.Event(), on_sync=reports.append)
    assert code == 1
    assert [report.acted for report in reports] == [False]
    (line,) = [r.getMessage() for r in caplog.records if r.levelno == logging.ERROR]
    assert "nothing synced: this replica did not become the leader" in line
    assert f"Lease {lease.namespace}/{lease.name}" in line
