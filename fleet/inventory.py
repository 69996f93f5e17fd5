"""Every GPU of the cluster from the exporter's series: one query per series (not per GPU), joined by node and
UUID into one `Gpu` per device.

    gpu_info{node="gpu-a",gpu="0",uuid="GPU-…",model="NVIDIA H100 80GB HBM3"} 1
    gpu_utilization_ratio{node="gpu-a",gpu="0",uuid="GPU-…",…} 0.42

`gpu_info` says which GPUs exist; the other series fill in what they know (a value left out by the exporter
stays None, never 0). Holders come from `gpu_allocation_info` (one series per holding container, whole GPU,
time-slice or MIG slice alike). `join` is pure, so the tests feed it samples without a Prometheus.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from fleet.prom import FleetPrometheus, Sample
from fleet.scoring import availability_score
from plumbing.numbers import ascii_int

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
}
"""One instant query per series, by the field it fills."""


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

    @property
    def free_memory(self) -> float | None:
        if self.memory_free is not None:
            return self.memory_free
        if self.memory_total is not None and self.memory_used is not None:
            return max(self.memory_total - self.memory_used, 0.0)
        return None

    @property
    def availability(self) -> float | None:
        if self.score is not None:
            return self.score
        if self.up is False:
            return 0.0
        return availability_score(self.free_memory, self.memory_total, self.utilization)

    @property
    def key(self) -> tuple[str, str]:
        return self.node, self.uuid


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
    return sorted(gpus, key=lambda g: (g.node, _index_order(g.index), g.uuid))


def _index_order(index: str) -> tuple[int, str]:
    number = ascii_int(index)
    return (number, "") if number is not None else (1 << 30, index)


def gather(client: FleetPrometheus) -> list[Gpu]:
    """Every GPU Prometheus knows now (one query per series); raises PrometheusError."""
    return join(client.vectors(QUERIES))


def only(gpus: Iterable[Gpu], node: str | None = None, namespace: str | None = None) -> list[Gpu]:
    """The GPUs on `node`, or held by a pod of `namespace`."""
    return [g for g in gpus if (node is None or g.node == node)
            and (namespace is None or any(h.namespace == namespace for h in g.holders))]
