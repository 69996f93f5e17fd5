"""Test support: days of backfilled metric history in a real Prometheus, for tests of commands that read the
past (`gpu-autoscaler tune`, `gpu-fleet report`/`export`).

`write_openmetrics` writes a deterministic history (a pure function of the sample's offset from the start:
the same data on every run, only shifted so it ends at `end`) as OpenMetrics text; `backfill` turns it into
TSDB blocks with `promtool tsdb create-blocks-from openmetrics`; `start_backfilled_prometheus` starts a real
Prometheus (127.0.0.1, free port, temp dir) on those blocks; `backfilled_prometheus` is the session-scoped
pytest fixture (registered in tests/integration/conftest.py) the tests use.

What it contains, by default (`HistorySpec()`: 3 days ending at the last whole minute before the fixture
started, 3 nodes x 4 GPUs):

- **Per GPU** (every `GPU_STEP` = 300 s, served with a 6 min lookback; labels as the exporter's,
  docs/metrics.md: `gpu`, `uuid`, `model`, `node`, `namespace`, `pod`, `container`):
  `gpu_utilization_ratio`, `gpu_memory_used_bytes`, `gpu_memory_total_bytes` (80 GiB),
  `gpu_power_usage_watts`, `gpu_energy_consumption_joules_total` (counter, power integrated),
  `gpu_allocation_info{resource="nvidia.com/gpu",shared="false"}` (only while held), `gpu_health_state{state}`
  (one 0/1 series per state), `gpu_xid_errors_total{xid}` (from the first
  XID on), `gpu_clocks_event_reason_active{reason}` (the 9 reasons; `gpu_idle` when utilization < 5 %,
  `sw_power_cap` when power > 90 % of 700 W, the others 0).
- **Holders** (`HOLDERS`): node-0's 4 GPUs hold the `embed` service's pods (namespace `ml`, pods
  `embed-7d9f8-0`..`-3`, container `embed`: the first 4 of its up to 10 replicas); GPU k is busy at the
  service's load per replica (`embed_load`) while the recorded replicas are more than k, else idle;
  node-1's 4 GPUs hold `train-0`..`-3` (namespace `research`, container `trainer`, ~90 % busy); node-2's
  GPUs 0, 1 and 3 are free (pod labels empty, 0 % busy), GPU 2 holds `batch-job-0` (namespace `research`,
  ~60 % busy) only during the second day (its device series split there: free, held, free again).
- **Health and XIDs**: node-2 GPU 1 is `throttled` from hour 30 to hour 34, `critical` from hour 34 to 35,
  `optimal` otherwise (every other GPU is `optimal` throughout); node-1 GPU 2 has XID 79 once at hour 40 and
  XID 48 twice at hours 50 and 51.
- **The `embed` service** (every `SERVICE_STEP` = 60 s): `inference_requests_total{namespace="ml",
  service="embed"}` (counter; the rate follows `request_rate`: a daily wave from 20 to 380 req/s with a
  spike to 460 req/s from hour 58 to 59) and the autoscaler's own series for rule `embed`
  (`{rule="embed",namespace="ml",target="embed"}`): `gpu_autoscaler_current_replicas`,
  `gpu_autoscaler_desired_replicas`, `gpu_autoscaler_min_replicas` (1), `gpu_autoscaler_max_replicas` (10),
  `gpu_autoscaler_metric_value{metric="requests"}` and `gpu_autoscaler_metric_target{metric="requests"}`
  (50, req/s per replica), `gpu_autoscaler_decision_reason{reason}` (the four reasons of `REASONS`, 0/1),
  from the autoscaler's two replicas (`CONTROLLERS`, `instance` labels, as the shipped Deployment runs with
  leader election): the first leads (`gpu_autoscaler_leader` 1) until hour `FAILOVER_HOURS`, the second
  after; the first keeps showing its last decision after the failover (stale, as a real replica that lost
  its lease does), so a query that does not read the leader's series (`and on (instance)
  (gpu_autoscaler_leader == 1)`, as the shipped alert rules do) sees two counts after hour 45.
  The recorded replicas are those of a deliberately slow controller: `ceil(rate / 50)` at once upward, but
  held at the highest count of the last `RECORDED_HOLD_MINUTES` (60) downward. kube-state-metrics' view of
  the Deployment: `kube_deployment_spec_replicas{namespace="ml",deployment="embed"}` (the recorded count)
  and `kube_deployment_status_replicas_ready` (each new replica ready `STARTUP_SECONDS` (180) later).

`EMBED_RULES` is a rules file whose rule `embed` queries this history (a Total metric on the request rate),
with a slow scale-down like the recorded controller's.

Generation takes about a second, promtool and Prometheus' start a few more (about 40 MB of text, blocks of
24 h); the series end at the last whole minute, so "now" queries see the last samples.
"""

from __future__ import annotations

import fcntl
import json
import math
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from demo.processes import (
    PROMETHEUS_BINARY,
    ManagedProcess,
    ProcessError,
    find_binary,
    free_port,
    promtool,
    wait_http_ok,
)

GPU_STEP = 300
"""Seconds between two samples of a per-GPU series (Prometheus runs with a lookback of `LOOKBACK`)."""
SERVICE_STEP = 60
"""Seconds between two samples of the service's and the autoscaler's series."""
NODES = 3
GPUS_PER_NODE = 4
MODEL = "NVIDIA H100 80GB HBM3"
MEMORY_TOTAL = 80 * 1024**3
POWER_LIMIT = 700.0
IDLE_POWER = 70.0
PER_REPLICA_TARGET = 50.0
"""Requests per second one `embed` replica is meant to serve (the rule's Total target)."""
MIN_REPLICAS = 1
MAX_REPLICAS = 10
RECORDED_HOLD_MINUTES = 60
"""The recorded controller keeps the highest count of the last hour: a slow scale-down tune can improve."""
HEALTH_STATES = ("optimal", "normal", "throttled", "critical")
CLOCK_REASONS = ("gpu_idle", "applications_clocks_setting", "sw_power_cap", "hw_slowdown", "sync_boost",
                 "sw_thermal", "hw_thermal", "hw_power_brake", "display_clock_setting")
REASONS = ("DesiredWithinRange", "ScaleDownStabilized", "WithinTolerance", "ScaleUpLimit")
RULE_LABELS = 'namespace="ml",rule="embed",target="embed"'
CONTROLLERS = ("10.0.1.5:9401", "10.0.1.6:9401")
"""The autoscaler's two replicas (`instance`): the first leads until FAILOVER_HOURS, the second after."""
FAILOVER_HOURS = 45
STARTUP_SECONDS = 180
"""A new embed replica is ready this long after the spec count rose (kube-state-metrics' series)."""
KSM_LABELS = 'namespace="ml",deployment="embed",job="kube-state-metrics"'
HOUR = 3600
LOOKBACK = "6m"
"""Prometheus' --query.lookback-delta: an instant query between two 5 min samples always sees the last one."""

EMBED_RULES = f"""\
rules:
  - name: embed
    target: {{kind: Deployment, namespace: ml, name: embed}}
    minReplicas: {MIN_REPLICAS}
    maxReplicas: {MAX_REPLICAS}
    metrics:
      - name: requests
        query: sum(rate(inference_requests_total{{namespace="ml", service="embed"}}[5m]))
        type: Total
        target: {PER_REPLICA_TARGET:g}
    behavior:
      scaleDown:
        stabilizationWindowSeconds: 3600
        policies: [{{type: Pods, value: 1, periodSeconds: 600}}]
"""


@dataclass(frozen=True, slots=True)
class Holder:
    """A container holding a whole GPU from `start` to `end` (hours from the start of the history)."""

    namespace: str
    pod: str
    container: str
    start: float = 0.0
    end: float = math.inf


def _holders() -> dict[tuple[int, int], tuple[Holder, ...]]:
    held: dict[tuple[int, int], tuple[Holder, ...]] = {}
    for gpu in range(GPUS_PER_NODE):
        held[(0, gpu)] = (Holder("ml", f"embed-7d9f8-{gpu}", "embed"),)
        held[(1, gpu)] = (Holder("research", f"train-{gpu}", "trainer"),)
    held[(2, 2)] = (Holder("research", "batch-job-0", "job", 24.0, 48.0),)
    return held


HOLDERS = _holders()
"""(node, gpu) -> the containers that held it; a GPU missing here was free throughout."""


@dataclass(frozen=True, slots=True)
class HistorySpec:
    """What to write: `days` of history ending at `end` (Unix seconds, a multiple of 60)."""

    end: int
    days: float = 3.0

    @property
    def start(self) -> int:
        return self.end - int(self.days * 86400)


def request_rate(offset: float) -> float:
    """Requests per second of the embed service `offset` seconds after the start of the history."""
    hours = offset / HOUR
    wave = 200.0 - 180.0 * math.cos(2 * math.pi * hours / 24.0)
    return 460.0 if 58.0 <= hours < 59.0 else wave


def desired_replicas(offset: float) -> int:
    wanted = math.ceil(request_rate(offset) / PER_REPLICA_TARGET)
    return max(MIN_REPLICAS, min(MAX_REPLICAS, wanted))


def recorded_replicas(offset: float) -> int:
    """The replicas the (slow) recorded controller ran: the highest desired count of the last hour."""
    first = max(0.0, offset - (RECORDED_HOLD_MINUTES - 1) * 60)
    steps = int((offset - first) // 60)
    return max(desired_replicas(offset - 60 * k) for k in range(steps + 1))


def embed_load(offset: float) -> float:
    """Load per running replica (0..1): what each running embed pod's GPU shows as utilization."""
    return min(1.0, request_rate(offset) / (recorded_replicas(offset) * PER_REPLICA_TARGET))


def _health(node: int, gpu: int, hours: float) -> str:
    if (node, gpu) == (2, 1):
        if 30.0 <= hours < 34.0:
            return "throttled"
        if 34.0 <= hours < 35.0:
            return "critical"
    return "optimal"


XIDS: dict[tuple[int, int], tuple[tuple[float, str], ...]] = {
    (1, 2): ((40.0, "79"), (50.0, "48"), (51.0, "48"))}
"""(node, gpu) -> (hour, XID code) of each XID error."""


def _holder_at(node: int, gpu: int, hours: float) -> Holder | None:
    for holder in HOLDERS.get((node, gpu), ()):
        if holder.start <= hours < holder.end:
            return holder
    return None


def _utilization(node: int, gpu: int, offset: float, holder: Holder | None) -> float:
    if holder is None:
        return 0.0
    if node == 0:
        return round(embed_load(offset), 4) if gpu < recorded_replicas(offset) else 0.0
    wobble = 0.05 * math.sin(offset / 977.0 + gpu)
    return round(0.9 + wobble, 4) if node == 1 else round(0.6 + wobble, 4)


@dataclass
class _Family:
    """One metric family's lines: series after series, each sorted by time."""

    name: str
    kind: str
    series: dict[str, list[str]] = field(default_factory=dict)

    def add(self, labels: str, value: float, t: int) -> None:
        self.series.setdefault(labels, []).append(f"{self.name}{{{labels}}} {value:g} {t}")


def _gpu_families(spec: HistorySpec) -> list[_Family]:
    util = _Family("gpu_utilization_ratio", "gauge")
    used = _Family("gpu_memory_used_bytes", "gauge")
    total = _Family("gpu_memory_total_bytes", "gauge")
    power = _Family("gpu_power_usage_watts", "gauge")
    energy = _Family("gpu_energy_consumption_joules", "counter")
    alloc = _Family("gpu_allocation_info", "gauge")
    health = _Family("gpu_health_state", "gauge")
    xid = _Family("gpu_xid_errors", "counter")
    clocks = _Family("gpu_clocks_event_reason_active", "gauge")
    for node in range(NODES):
        for gpu in range(GPUS_PER_NODE):
            device = (f'gpu="{gpu}",uuid="GPU-{node:04x}{gpu:04x}-0000-4000-8000-000000000000",'
                      f'model="{MODEL}",node="node-{node}"')
            joules = 1.0e9 + 1.0e7 * (node * GPUS_PER_NODE + gpu)
            xid_counts: dict[str, int] = {}
            for t in range(spec.start, spec.end + 1, GPU_STEP):
                offset = t - spec.start
                hours = offset / HOUR
                holder = _holder_at(node, gpu, hours)
                pod = (f'namespace="{holder.namespace}",pod="{holder.pod}",container="{holder.container}"'
                       if holder else 'namespace="",pod="",container=""')
                labels = f"{device},{pod}"
                busy = _utilization(node, gpu, offset, holder)
                watts = round(IDLE_POWER + (POWER_LIMIT - IDLE_POWER) * busy, 1)
                joules += watts * GPU_STEP
                util.add(labels, busy, t)
                share = 0.05 + (0.7 if holder else 0.0) * (0.5 + busy / 2)
                used.add(labels, float(int(share * MEMORY_TOTAL)), t)
                total.add(labels, float(MEMORY_TOTAL), t)
                power.add(labels, watts, t)
                energy.add(labels, round(joules, 1), t)
                if holder is not None:
                    alloc.add(f'{labels},resource="nvidia.com/gpu",shared="false"', 1.0, t)
                state = _health(node, gpu, hours)
                for name in HEALTH_STATES:
                    health.add(f'{labels},state="{name}"', 1.0 if name == state else 0.0, t)
                for at, code in XIDS.get((node, gpu), ()):
                    if hours - GPU_STEP / HOUR < at <= hours:
                        xid_counts[code] = xid_counts.get(code, 0) + 1
                for code, count in xid_counts.items():
                    xid.add(f'{labels},xid="{code}"', float(count), t)
                for reason in CLOCK_REASONS:
                    on = (reason == "gpu_idle" and busy < 0.05) or (reason == "sw_power_cap"
                                                                     and watts > 0.9 * POWER_LIMIT)
                    clocks.add(f'{labels},reason="{reason}"', 1.0 if on else 0.0, t)
    return [util, used, total, power, energy, alloc, health, xid, clocks]


def _service_families(spec: HistorySpec) -> list[_Family]:
    requests = _Family("inference_requests", "counter")
    leader = _Family("gpu_autoscaler_leader", "gauge")
    families = {name: _Family(f"gpu_autoscaler_{name}", "gauge") for name in (
        "current_replicas", "desired_replicas", "min_replicas", "max_replicas", "metric_value",
        "metric_target", "decision_reason")}
    spec_count = _Family("kube_deployment_spec_replicas", "gauge")
    ready_count = _Family("kube_deployment_status_replicas_ready", "gauge")
    served = 0.0
    previous = None
    last: dict[str, list[tuple[str, str, float]]] = {}
    counts: dict[int, int] = {}
    for t in range(spec.start, spec.end + 1, SERVICE_STEP):
        offset = t - spec.start
        rate = request_rate(offset)
        served += rate * SERVICE_STEP
        requests.add('namespace="ml",service="embed"', round(served), t)
        counts[offset] = recorded_replicas(offset)
        ready = min(counts[offset], counts.get(offset - STARTUP_SECONDS, counts[offset]))
        spec_count.add(KSM_LABELS, float(counts[offset]), t)
        ready_count.add(KSM_LABELS, float(ready), t)
        active = CONTROLLERS[0] if offset < FAILOVER_HOURS * HOUR else CONTROLLERS[1]
        for instance in CONTROLLERS:
            labels = f'{RULE_LABELS},instance="{instance}",job="gpu-autoscaler"'
            leader.add(f'instance="{instance}",job="gpu-autoscaler"', 1.0 if instance == active else 0.0, t)
            families["min_replicas"].add(labels, float(MIN_REPLICAS), t)  # every replica: the rule's bounds
            families["max_replicas"].add(labels, float(MAX_REPLICAS), t)
            families["metric_target"].add(f'metric="requests",{labels}', PER_REPLICA_TARGET, t)
            if instance != active:  # a replica that led keeps showing its last decision (stale)
                for name, line_labels, value in last.get(instance, []):
                    families[name].add(line_labels, value, t)
                continue
            replicas, wanted = counts[offset], desired_replicas(offset)
            why = ("ScaleDownStabilized" if wanted < replicas else "WithinTolerance" if replicas == previous
                   else "DesiredWithinRange")
            decision = [("current_replicas", labels, float(replicas)),
                        ("desired_replicas", labels, float(replicas)),
                        ("metric_value", f'metric="requests",{labels}', round(rate, 3))]
            decision += [("decision_reason", f'{labels},reason="{name}"', 1.0 if name == why else 0.0)
                         for name in REASONS]
            for name, line_labels, value in decision:
                families[name].add(line_labels, value, t)
            last[instance] = decision
            previous = replicas
    return [requests, leader, spec_count, ready_count, *families.values()]


def openmetrics_lines(spec: HistorySpec) -> Iterator[str]:
    for family in [*_gpu_families(spec), *_service_families(spec)]:
        yield f"# TYPE {family.name} {family.kind}"
        suffix = "_total" if family.kind == "counter" else ""
        for lines in family.series.values():
            if suffix:
                yield from (line.replace("{", "_total{", 1) for line in lines)
            else:
                yield from lines
    yield "# EOF"


def write_openmetrics(path: Path, spec: HistorySpec) -> None:
    path.write_text("\n".join(openmetrics_lines(spec)) + "\n")


def backfill(openmetrics: Path, data_dir: Path) -> None:
    """TSDB blocks of `openmetrics` in `data_dir`, with promtool; fails loudly with promtool's own words."""
    data_dir.mkdir(parents=True, exist_ok=True)
    result = promtool("tsdb", "create-blocks-from", "openmetrics", "--max-block-duration=24h",
                      str(openmetrics), str(data_dir), timeout=300)
    if result.returncode != 0:
        raise RuntimeError(
            f"promtool create-blocks-from failed ({result.returncode}):\n{result.stderr[-3000:]}")


@dataclass
class BackfilledPrometheus:
    """A running Prometheus serving `spec`'s history: query it at `url` for [spec.start, spec.end]."""

    process: ManagedProcess
    spec: HistorySpec

    @property
    def url(self) -> str:
        return self.process.url


def start_backfilled_prometheus(spec: HistorySpec, workdir: Path, blocks: Path | None = None,
                                ) -> BackfilledPrometheus:
    """Serve `spec` from `workdir` (the caller removes it after `process.stop()`): a copy of `blocks` (TSDB
    blocks already written for `spec`), else blocks written and backfilled here."""
    if blocks is None:
        source = workdir / "history.om.txt"
        write_openmetrics(source, spec)
        backfill(source, workdir / "data")
        source.unlink()
    else:
        shutil.copytree(blocks, workdir / "data")
    (workdir / "prometheus.yml").write_text("global: {scrape_interval: 1m}\n")
    port = free_port()
    argv = [find_binary(PROMETHEUS_BINARY), f"--config.file={workdir / 'prometheus.yml'}",
            f"--storage.tsdb.path={workdir / 'data'}", f"--web.listen-address=127.0.0.1:{port}",
            f"--storage.tsdb.retention.time={int(spec.days) + 30}d", f"--query.lookback-delta={LOOKBACK}"]
    log_path = workdir / "prometheus.log"
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, cwd=workdir,
                                start_new_session=True)
    process = ManagedProcess("prometheus", f"http://127.0.0.1:{port}", workdir, proc, log_path)
    try:
        wait_http_ok(f"{process.url}/-/ready", 120, proc)
    except ProcessError as exc:
        tail = process.log_tail()
        process.stop()
        raise ProcessError(f"backfilled prometheus: {exc}\n{tail}") from exc
    return BackfilledPrometheus(process, spec)


def default_spec(now: float | None = None) -> HistorySpec:
    """3 days ending at the last whole minute before `now` (default: the wall clock)."""
    moment = time.time() if now is None else now
    return HistorySpec(end=int(moment // 60) * 60)


SHARED_FOR_SECONDS = 120
"""How long blocks written by one test process serve the others: "now" queries must still see the history's
last samples (a lookback of `LOOKBACK`) in every test that runs after the fixture starts."""


def shared_blocks(shared: Path) -> tuple[HistorySpec, Path]:
    """The history's TSDB blocks written once for every test process of a run (pytest-xdist workers share
    `shared`), under a lock: writing and backfilling them costs about 3 s of CPU per process. Blocks older
    than SHARED_FOR_SECONDS are written again."""
    shared.mkdir(parents=True, exist_ok=True)
    with open(shared / "history.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        blocks, meta = shared / "history-blocks", shared / "history-spec.json"
        if meta.exists():
            saved = json.loads(meta.read_text())
            spec = HistorySpec(end=int(saved["end"]), days=float(saved["days"]))
            if time.time() - spec.end <= SHARED_FOR_SECONDS:
                return spec, blocks
        spec = default_spec()
        shutil.rmtree(blocks, ignore_errors=True)
        source = shared / "history.om.txt"
        write_openmetrics(source, spec)
        backfill(source, blocks)
        source.unlink()
        meta.write_text(json.dumps({"end": spec.end, "days": spec.days}))
        return spec, blocks


def backfilled_prometheus_fixture(shared: Path | None = None) -> Iterator[BackfilledPrometheus]:
    """A backfilled Prometheus for a test session; `shared`: a directory the session's processes share, where
    the blocks are written once (see `shared_blocks`)."""
    with tempfile.TemporaryDirectory(prefix="gpu-history-") as tmp:
        if shared is None:
            prom = start_backfilled_prometheus(default_spec(), Path(tmp))
        else:
            spec, blocks = shared_blocks(shared)
            prom = start_backfilled_prometheus(spec, Path(tmp), blocks)
        try:
            yield prom
        finally:
            prom.process.stop()
