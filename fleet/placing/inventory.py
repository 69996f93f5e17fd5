"""Every GPU of the cluster from the exporter's series: one query per series (not per GPU), joined by node and
UUID into one `Gpu` per device.

    gpu_info{node="gpu-a",gpu="0",uuid="GPU-…",model="NVIDIA H100 80GB HBM3"} 1
    gpu_utilization_ratio{node="gpu-a",gpu="0",uuid="GPU-…",…} 0.42

`gpu_info` says which GPUs exist; the other series fill in what they know (a value left out by the exporter
stays None, never 0). Holders come from `gpu_allocation_info` (one series per holding container, whole GPU,
time-slice or MIG slice alike). `join` is pure, so the tests feed it samples without a Prometheus.

A GPU seen in the last hour (`STALE_LOOKBACK`) whose `gpu_info` is gone now (its exporter is down: Prometheus
marks a failed target's series stale at once) is kept as a *stale* GPU: its model, whether `up` says its
target is down, and its last-seen time (the newest `gpu_info` sample, read by one more query, to the second,
only when there are stale GPUs), so a dead node is shown, never silently dropped.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from fleet.placing.scoring import availability_score
from fleet.querying.prom import FleetPrometheus, Sample
from plumbing.numbers import ascii_int

NOT_SCRAPED_HINT = "is the exporter scraped by this Prometheus?"
"""What `status`, `select` and `wait` say when Prometheus has no GPU at all."""
STALE_LOOKBACK = "1h"
"""A GPU not reported for longer is forgotten."""
QUERIES: dict[str, str] = {
    "info": "gpu_info",
    "up": "gpu_up",
    "utilization": "gpu_utilization_ratio",
    "memory_used": "gpu_memory_used_bytes",
    "memory_free": "gpu_memory_free_bytes",
    "memory_total": "gpu_memory_total_bytes",
    "temperature": "gpu_temperature_celsius",
    "power": "gpu_power_usage_watts",
    "health": "gpu_health_state == 1",
    "score": "gpu_availability_score",
    "holders": "gpu_allocation_info == 1",
    "stale": f"last_over_time(gpu_info[{STALE_LOOKBACK}]) unless on (node, uuid) gpu_info",
    "targets_down": "up == 0",
}
"""One instant query per series, by the field it fills. `stale`: the GPUs seen within the lookback that are
gone now."""
LAST_SEEN = "max_over_time(timestamp(gpu_info{{instance={instance}}})[{lookback}:1s])"
"""The time of an instance's last `gpu_info` samples, to the second (a subquery over one target only)."""
MAX_STALE_INSTANCES = 64
"""Last-seen times are read for at most this many dead targets (one subquery each, joined by `or`)."""
THROTTLED_RANK_FACTOR = 0.5
"""The ranking score of a `throttled` GPU is its availability score times this: the seed's speed multiplier
of the throttled state (half speed)."""


@dataclass(frozen=True)
class Holder:
    """A container holding the GPU (or a share or a MIG slice of it)."""

    namespace: str
    pod: str
    container: str = ""
    resource: str = ""

    def __str__(self) -> str:
        return f"{self.namespace}/{self.pod}"


@dataclass(frozen=True)
class Gpu:
    """One GPU as the exporter last reported it; None where a series is absent."""

    node: str
    index: str
    uuid: str
    model: str
    up: bool | None = None
    utilization: float | None = None
    memory_used: float | None = None
    memory_free: float | None = None
    memory_total: float | None = None
    temperature: float | None = None
    power: float | None = None
    health: str | None = None
    score: float | None = None
    """The exporter's gpu_availability_score; `availability` computes it when the series is absent."""
    holders: tuple[Holder, ...] = field(default=())
    stale: bool = False
    """Seen within the lookback but not reported now: its exporter (or the GPU) is gone."""
    last_seen: float | None = None
    """Unix time of the last `gpu_info` sample of a stale GPU (None: reported now, or not known)."""
    target_down: bool | None = None
    """For a stale GPU: whether `up` says its exporter target is down (None: no `up` series for it)."""
    instance: str = ""
    """The Prometheus target (`instance` label) of a stale GPU."""

    @property
    def used_memory(self) -> float | None:
        """Memory used: the exporter's, else total - free."""
        return _served_or_rest(self.memory_used, self.memory_total, self.memory_free)

    @property
    def free_memory(self) -> float | None:
        """Memory free: the exporter's, else total - used."""
        return _served_or_rest(self.memory_free, self.memory_total, self.memory_used)

    @property
    def availability(self) -> float | None:
        if self.score is not None:
            return self.score
        if self.up is False:
            return 0.0
        return availability_score(self.free_memory, self.memory_total, self.utilization)

    @property
    def rank(self) -> float | None:
        """The score GPUs are ranked by (`status --sort score`, `select`): the availability score, but 0 for
        a GPU that is down, critical or stale, and halved for a throttled one. None when the score is."""
        if self.stale or self.up is False or self.health == "critical":
            return 0.0
        score = self.availability
        if score is None:
            return None
        return score * THROTTLED_RANK_FACTOR if self.health == "throttled" else score

    @property
    def key(self) -> tuple[str, str]:
        return self.node, self.uuid


def _served_or_rest(served: float | None, total: float | None, other: float | None) -> float | None:
    """A part of the memory: as the exporter serves it, else what `other` leaves of `total` (never below 0);
    None when neither is known."""
    if served is not None:
        return served
    if total is not None and other is not None:
        return max(total - other, 0.0)
    return None


def _key(labels: Mapping[str, str]) -> tuple[str, str] | None:
    node, uuid = labels.get("node", ""), labels.get("uuid", "")
    return (node, uuid) if uuid else None


def join(answers: Mapping[str, Iterable[Sample]]) -> list[Gpu]:
    """The GPUs `info` lists, each with the values the other answers hold for it, sorted by node and index."""
    base: dict[tuple[str, str], dict[str, object]] = {}
    for sample in answers.get("info", ()):
        key = _key(sample.labels)
        if key is not None:
            base[key] = {"node": key[0], "uuid": key[1], "index": sample.labels.get("gpu", ""),
                         "model": sample.labels.get("model", ""), "holders": []}
    for name in ("up", "utilization", "memory_used", "memory_free", "memory_total", "temperature", "power",
                 "score"):
        for sample in answers.get(name, ()):
            row = base.get(_key(sample.labels) or ("", ""))
            if row is not None:
                row[name] = (sample.value == 1.0) if name == "up" else sample.value
    for sample in answers.get("health", ()):
        row = base.get(_key(sample.labels) or ("", ""))
        if row is not None and sample.labels.get("state"):
            row["health"] = sample.labels["state"]
    for sample in answers.get("holders", ()):
        row = base.get(_key(sample.labels) or ("", ""))
        labels = sample.labels
        if row is not None and labels.get("pod"):
            holders = row["holders"]
            assert isinstance(holders, list)
            holders.append(Holder(labels.get("namespace", ""), labels["pod"], labels.get("container", ""),
                                  labels.get("resource", "")))
    gpus = []
    for row in base.values():
        holders = row.pop("holders")
        assert isinstance(holders, list)
        gpus.append(Gpu(**row, holders=tuple(sorted(set(holders), key=str))))  # type: ignore[arg-type]
    gpus += _stale(answers.get("stale", ()), answers.get("targets_down", ()), answers.get("last_seen", ()),
                   set(base))
    return sorted(gpus, key=lambda g: (g.node, _index_order(g.index), g.uuid))


def _stale(samples: Iterable[Sample], targets_down: Iterable[Sample], last_seen: Iterable[Sample],
           live: set[tuple[str, str]]) -> list[Gpu]:
    """The GPUs of the `stale` answer not reported now, each once, with their last-seen time if known."""
    down = {s.labels.get("instance") for s in targets_down if s.labels.get("instance")}
    seen: dict[tuple[str, str], float] = {}
    for sample in last_seen:
        key = _key(sample.labels)
        if key is not None:
            seen[key] = max(sample.value, seen.get(key, sample.value))
    found: dict[tuple[str, str], Gpu] = {}
    for sample in samples:
        key, labels = _key(sample.labels), sample.labels
        if key is None or key in live or key in found:
            continue
        instance = labels.get("instance", "")
        found[key] = Gpu(key[0], labels.get("gpu", ""), key[1], labels.get("model", ""), stale=True,
                         last_seen=seen.get(key), target_down=(instance in down) if instance else None,
                         instance=instance)
    return list(found.values())


def _index_order(index: str) -> tuple[int, str]:
    number = ascii_int(index)
    return (number, "") if number is not None else (1 << 30, index)


def last_seen_query(instances: Iterable[str]) -> str | None:
    """One subquery per dead target (at most MAX_STALE_INSTANCES), joined by `or`; None for none."""
    chosen = sorted(set(instances))[:MAX_STALE_INSTANCES]
    parts = [LAST_SEEN.format(instance=json.dumps(i), lookback=STALE_LOOKBACK) for i in chosen]
    return " or ".join(parts) or None


def gather(client: FleetPrometheus) -> list[Gpu]:
    """Every GPU Prometheus knows now (one query per series) and the stale ones, with their last-seen time
    (one more query, only when there are stale GPUs); raises PrometheusError."""
    answers = client.vectors(QUERIES)
    query = last_seen_query(s.labels.get("instance", "") for s in answers.get("stale", ())
                            if s.labels.get("instance"))
    if query is not None:
        answers["last_seen"] = client.vector(query)
    return join(answers)


def only(gpus: Iterable[Gpu], node: str | None = None, namespace: str | None = None) -> list[Gpu]:
    """The GPUs on `node`, or held by a pod of `namespace`."""
    return [g for g in gpus if (node is None or g.node == node)
            and (namespace is None or any(h.namespace == namespace for h in g.holders))]
