"""Choosing GPUs: the best N by ranking score among those free for new work, pure (no I/O).

The rules are in ELIGIBILITY, which `select --help` and `wait --help` print as written.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum

from fleet.placing.inventory import NOT_SCRAPED_HINT, Gpu
from plumbing.numbers import ascii_int

ELIGIBILITY = """\
A GPU is eligible when all of these hold:
  - its exporter reports it now (a stale GPU, whose exporter is down, is never chosen)
  - it is up and not critical; not throttled unless --allow-throttled
  - no pod holds it
  - its utilization is at most --max-utilization (default 50%); with --idle instead
    the idle rule: utilization below 30% and memory used below 50% of its total
  - it has --min-free-memory free, and its model name contains --model (case-insensitive)
  - with -o docker, its uuid label is a GPU or MIG UUID (docker's --gpus device=...)
The best are taken by ranking score, highest first: the availability score
0.6 * free/total + 0.4 * (1 - utilization), halved for a throttled GPU; ties go to the
lower node name and index. With --same-node all N come from the node whose N best GPUs
have the highest total score."""
"""The rules `exclusion` applies, for `select --help` and `wait --help`."""

HOSTNAME_LABEL = "kubernetes.io/hostname"
PRODUCT_LABEL = "nvidia.com/gpu.product"
"""The GPU product label of NVIDIA GPU Feature Discovery: the NVML name with spaces as dashes."""


IDLE_UTILIZATION_PERCENT = 30
IDLE_MEMORY_PERCENT = 50
"""The idle rule of our users' Kubernetes GPU allocator: utilization below 30 % and memory used below 50 %."""
DEFAULT_MAX_UTILIZATION_PERCENT = 50
"""`get_available_gpus`' default in our users' GPU tracking tool: at most 50 % busy."""


class Exclusion(StrEnum):
    """Why a GPU cannot be chosen."""

    STALE = "stale (exporter down)"
    DOWN = "down"
    CRITICAL = "critical"
    THROTTLED = "throttled"
    HELD = "held by a pod"
    NO_SCORE = "no availability score"
    BUSY = "too busy"
    NOT_IDLE = "not idle"
    LOW_MEMORY = "too little free memory"
    OTHER_MODEL = "another model"
    NOT_DEVICE_ID = "uuid not a GPU or MIG UUID"


@dataclass(frozen=True)
class Request:
    gpus: int
    """How many GPUs, >= 1."""
    min_free_memory: int = 0
    """Bytes each chosen GPU must have free."""
    model: str | None = None
    """A substring of the NVML model name (case-insensitive), or None for any model."""
    same_node: bool = False
    """All on one node."""
    max_utilization_percent: float = DEFAULT_MAX_UTILIZATION_PERCENT
    """A GPU busier than this (0..100) is left out; 100 takes any."""
    idle: bool = False
    """Instead of `max_utilization_percent`, the idle rule (IDLE_UTILIZATION_PERCENT, IDLE_MEMORY_PERCENT)."""
    allow_throttled: bool = False
    """A `throttled` GPU is eligible (ranked at half its score)."""
    device_ids_only: bool = False
    """Only GPUs whose uuid label `docker run --gpus device=` takes (`-o docker`): see `device_id`."""


@dataclass(frozen=True)
class Selection:
    """The outcome: `chosen` when there were enough, else the shortfall and why the others were left out."""

    chosen: tuple[Gpu, ...]
    eligible: int
    excluded: Counter[Exclusion]
    request: Request

    @property
    def ok(self) -> bool:
        return len(self.chosen) == self.request.gpus

    def summary(self) -> str:
        """One line: what was chosen, or why not enough."""
        if self.ok:
            nodes = sorted({g.node for g in self.chosen})
            return f"{len(self.chosen)} GPU(s) on {', '.join(nodes)}"
        if not self.eligible and not self.excluded:
            return f"no GPU found ({NOT_SCRAPED_HINT})"
        why = ", ".join(f"{count} {reason}" for reason, count in sorted(self.excluded.items()))
        eligible = (f"at most {self.eligible} eligible on one node" if self.request.same_node
                    else f"{self.eligible} eligible")
        admit = self.admitting_flags()
        return (f"not enough GPUs: {self.request.gpus} requested, {eligible}"
                + (f" (left out: {why}{'; ' + admit if admit else ''})" if why else ""))

    def admitting_flags(self) -> str | None:
        """Which flag admits the GPUs a default left out (too busy, throttled, not idle), as a user may not
        know those defaults: '--allow-throttled admits the throttled'; None when no GPU was left out so."""
        limit = f"{self.request.max_utilization_percent:g}"
        flags = {Exclusion.THROTTLED: "--allow-throttled",
                 Exclusion.BUSY: f"--max-utilization above {limit}",
                 Exclusion.NOT_IDLE: "--max-utilization instead of --idle"}
        named = [f"{flag} admits the {reason}" for reason, flag in flags.items() if self.excluded[reason]]
        return ", ".join(named) if named else None


_UUID = "[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}"
DEVICE_ID = re.compile(f"GPU-{_UUID}|MIG-{_UUID}|MIG-GPU-{_UUID}/[0-9]{{1,3}}/[0-9]{{1,3}}", re.ASCII)
"""What `docker run --gpus device=...` is given: a GPU's UUID, a MIG device's UUID (driver R470 and later) or
its older MIG-GPU-<uuid>/<gi>/<ci> name. A label of any other shape (spaces, a comma, `all`, quotes) is never
put on a command line: it comes from whoever can write to Prometheus."""


def device_id(uuid: str) -> bool:
    """Whether `uuid` is a device id `docker run --gpus device=` takes, and nothing more."""
    return DEVICE_ID.fullmatch(uuid) is not None


def below_percent(value: float, percent: float) -> bool:
    """`value` (a 0..1 ratio) < `percent` %, compared as the exporter makes ratios (NVML's percent / 100),
    so a GPU at 30 % is not below 30 % (0.3 < 0.30000000000000004 would say it is)."""
    return value < percent / 100


def is_idle(gpu: Gpu) -> bool:
    """The idle rule: utilization below 30 % and memory used below 50 % of total (unknown: not idle)."""
    used, total = gpu.used_memory, gpu.memory_total
    return (gpu.utilization is not None and below_percent(gpu.utilization, IDLE_UTILIZATION_PERCENT)
            and used is not None and total is not None and total > 0 and used * 2 < total)


def exclusion(gpu: Gpu, request: Request) -> Exclusion | None:
    """Why `gpu` cannot serve `request`, or None when it can."""
    if gpu.stale:
        return Exclusion.STALE
    if gpu.up is False:
        return Exclusion.DOWN
    if gpu.health == "critical":
        return Exclusion.CRITICAL
    if gpu.health == "throttled" and not request.allow_throttled:
        return Exclusion.THROTTLED
    if gpu.holders:
        return Exclusion.HELD
    if request.device_ids_only and not device_id(gpu.uuid):
        return Exclusion.NOT_DEVICE_ID
    if request.model is not None and request.model.lower() not in gpu.model.lower():
        return Exclusion.OTHER_MODEL
    free = gpu.free_memory
    if request.min_free_memory and (free is None or free < request.min_free_memory):
        return Exclusion.LOW_MEMORY
    if gpu.rank is None or gpu.utilization is None:
        return Exclusion.NO_SCORE
    if request.idle:
        return None if is_idle(gpu) else Exclusion.NOT_IDLE
    if gpu.utilization > request.max_utilization_percent / 100:
        return Exclusion.BUSY
    return None


def _rank(gpu: Gpu) -> tuple[float, str, int, str]:
    index = ascii_int(gpu.index)
    index = 1 << 30 if index is None else index
    return -(gpu.rank or 0.0), gpu.node, index, gpu.uuid


def select(gpus: Sequence[Gpu], request: Request) -> Selection:
    excluded: Counter[Exclusion] = Counter()
    eligible: list[Gpu] = []
    for gpu in gpus:
        reason = exclusion(gpu, request)
        if reason is None:
            eligible.append(gpu)
        else:
            excluded[reason] += 1
    eligible.sort(key=_rank)
    if not request.same_node:
        chosen = eligible[:request.gpus] if len(eligible) >= request.gpus else []
        return Selection(tuple(chosen), len(eligible), excluded, request)
    by_node: dict[str, list[Gpu]] = {}
    for gpu in eligible:
        by_node.setdefault(gpu.node, []).append(gpu)
    candidates = [best[:request.gpus] for best in by_node.values() if len(best) >= request.gpus]
    candidates.sort(key=lambda best: (-sum(g.rank or 0.0 for g in best), best[0].node))
    most = max((len(best) for best in by_node.values()), default=0)
    return Selection(tuple(candidates[0]) if candidates else (), most, excluded, request)


def product_label(model: str) -> str:
    """GPU Feature Discovery's nvidia.com/gpu.product: 'NVIDIA H100 80GB HBM3' -> 'NVIDIA-H100-80GB-HBM3'."""
    return "-".join(model.split())


def placement(selection: Selection) -> dict[str, object]:
    """What to put in a pod spec to land on the chosen GPUs' node(s): a nodeSelector when one node and one
    product, else a required nodeAffinity listing them."""
    nodes = sorted({g.node for g in selection.chosen})
    products = sorted({product_label(g.model) for g in selection.chosen}) if selection.request.model else []
    if len(nodes) == 1 and len(products) <= 1:
        selector = {HOSTNAME_LABEL: nodes[0]}
        if products:
            selector[PRODUCT_LABEL] = products[0]
        return {"nodeSelector": selector}
    expressions: list[dict[str, object]] = [{"key": HOSTNAME_LABEL, "operator": "In", "values": nodes}]
    if products:
        expressions.append({"key": PRODUCT_LABEL, "operator": "In", "values": products})
    return {"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchExpressions": expressions}]}}}}
