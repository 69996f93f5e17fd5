"""A simulated GPU Deployment: replicas that each hold one GPU of a pool and share the service's load.

This is the world the benchmark and the demo scale. It models the three things that make GPU services hard to
autoscale: a replica holds a whole GPU from the moment it is scheduled (GPU-hours are spent while it loads),
it serves only after a start-up delay (model loading), and a pool has a fixed number of GPUs shared with other
tenants (a replica that finds none stays Pending, unschedulable, holding nothing, until one frees up). Other
tenants' pods (`set_others`) take free GPUs before our Pending replicas, as a higher-priority batch job would,
but never evict a running replica. Scale-down removes replicas at once, in the ReplicaSet controller's order:
Pending first, then still loading, then ready; within each group the lowest pod-deletion cost first (set by
the controller's `podDeletionCost` through the demo's scale backend), then newest first. `on_removed` is told
the names a scale-down removed, and those the same order without deletion costs would have removed instead:
the hook by which a server model counts the requests they were serving (cut), with and without the costs.

Load is in GPU-equivalents (see demo.traces): the ready replicas share it evenly, so each ready GPU is busy
`load / ready` (capped at 1.0; demand above 1.0 queues). A loading replica's GPU shows `loading_utilization`.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass

from autoscaler.planning.overload import work_per_ready

OTHER_NAMESPACE = "batch"
OTHER_WORKLOAD = "trainer"
"""Namespace and name prefix of the other tenant's pods (`trainer-0001`, ...): a training job in the pool."""


@dataclass(frozen=True)
class ClusterSettings:
    """The simulated GPU pool and how its replicas start."""

    nodes: int = 2
    """GPU nodes in the pool (names gpu-node-0, gpu-node-1, ...)."""
    gpus_per_node: int = 8
    """GPUs per node: 8 like a DGX/HGX box."""
    startup_delay_seconds: float = 120.0
    """Seconds from getting a GPU to serving: pulling and loading a model takes minutes on real services."""
    loading_utilization: float = 0.0
    """GPU utilization (0..1) a replica shows while loading its model: copying weights keeps the SMs idle."""

    def __post_init__(self) -> None:
        if self.nodes < 1 or self.gpus_per_node < 1:
            raise ValueError(f"the pool needs >= 1 node and >= 1 GPU per node (got {self.nodes}, "
                             f"{self.gpus_per_node})")
        if self.startup_delay_seconds < 0:
            raise ValueError(f"startup_delay_seconds must be >= 0 (got {self.startup_delay_seconds})")
        if not 0.0 <= self.loading_utilization <= 1.0:
            raise ValueError(f"loading_utilization must be in 0..1 (got {self.loading_utilization})")

    @property
    def gpu_count(self) -> int:
        return self.nodes * self.gpus_per_node

    def node_of(self, gpu: int) -> str:
        return f"gpu-node-{gpu // self.gpus_per_node}"


@dataclass(frozen=True)
class Replica:
    """One pod of the Deployment. `gpu` is None while Pending (no free GPU in the pool)."""

    name: str
    created_at: float
    gpu: int | None
    ready_at: float | None

    def ready(self, now: float) -> bool:
        return self.ready_at is not None and now >= self.ready_at


@dataclass(frozen=True)
class GpuState:
    """One GPU of the pool at one instant: who holds it and how busy it is (0..1)."""

    index: int
    node: str
    replica: str | None
    utilization: float
    serving: bool
    other: str | None = None
    """The other tenant's pod holding it (in OTHER_NAMESPACE), when not ours."""


@dataclass(frozen=True)
class ClusterSnapshot:
    """The Deployment under a given load at one instant, with what the autoscaler and the figures need."""

    time: float
    load: float
    spec_replicas: int
    ready: int
    loading: int
    pending: int
    gpus: tuple[GpuState, ...]
    others: int = 0
    """GPUs held by other tenants' pods."""

    @property
    def demand_per_ready(self) -> float:
        """Load per serving GPU (1.0 = every ready GPU exactly saturated); inf when load but none ready."""
        return work_per_ready(self.load, self.ready)

    @property
    def gpus_held(self) -> int:
        """GPUs allocated to replicas (ready or loading): what GPU-hours are billed on."""
        return self.ready + self.loading

    @property
    def free_gpus(self) -> int:
        """GPUs no pod holds: what a capacity query (`cluster:gpus_unallocated:sum`) returns."""
        return len(self.gpus) - self.gpus_held - self.others

    def mean_utilization(self, include_loading: bool = True) -> float | None:
        """Mean utilization (0..1) over the GPUs held by replicas, or by ready ones only; None when none."""
        values = [g.utilization for g in self.gpus
                  if g.replica is not None and (include_loading or g.serving)]
        return sum(values) / len(values) if values else None

    def overloaded(self, line: float) -> bool:
        """True when the ready GPUs would need to be busier than `line` (0..1) to serve the load."""
        return self.demand_per_ready > line


@dataclass(frozen=True)
class ScaleDown:
    """One scale-down: the replicas it removed, and those the ReplicaSet's order without any pod-deletion cost
    (Pending, loading, then ready, newest first) would have removed at the same instant."""

    removed: tuple[str, ...]
    without_costs: tuple[str, ...]
    costs_set: bool = False
    """Some replica had a pod-deletion cost when the ReplicaSet chose (the controller set them before)."""


OTHER_UTILIZATION = 0.8
"""GPU utilization (0..1) of a GPU held by the other tenant (a training job keeps it busy)."""


class SimulatedDeployment:
    """A GPU Deployment whose replica count is set by an autoscaler and whose clock is injected.

    Safe to share between threads (the demo's controller patches it while its load driver reads it).
    """

    def __init__(self, namespace: str, name: str, replicas: int, clock: Callable[[], float],
                 settings: ClusterSettings | None = None, start_ready: bool = True) -> None:
        self.namespace = namespace
        self.name = name
        self.settings = settings or ClusterSettings()
        self._clock = clock
        self._replicas: list[Replica] = []
        self._sequence = 0
        self._others_wanted = 0
        self._others: dict[int, str] = {}
        """GPU index -> the other tenant's pod holding it."""
        self._other_sequence = 0
        self._lock = threading.RLock()
        self._nodes = tuple(self.settings.node_of(index) for index in range(self.settings.gpu_count))
        self._costs: dict[str, int] = {}
        """Replica name -> its pod-deletion cost (absent: 0, as the annotation's default)."""
        self.on_removed: Callable[[ScaleDown], None] | None = None
        """Told each scale-down, under the Deployment's lock (keep it short)."""
        if replicas < 0:
            raise ValueError(f"replicas must be >= 0 (got {replicas})")
        self._add(replicas, clock(), ready_now=start_ready)

    @property
    def spec_replicas(self) -> int:
        with self._lock:
            return len(self._replicas)

    def replicas(self) -> tuple[Replica, ...]:
        with self._lock:
            self._schedule(self._clock())
            return tuple(self._replicas)

    def set_others(self, gpus: int) -> None:
        """Other tenants now want `gpus` GPUs: they take free ones at once (before our Pending replicas) and
        more as ours free up; asking for fewer releases theirs at once."""
        if gpus < 0:
            raise ValueError(f"other tenants' GPUs must be >= 0 (got {gpus})")
        with self._lock:
            self._others_wanted = gpus
            self._schedule(self._clock())

    def unschedulable_since(self) -> tuple[float, ...]:
        """For each Pending replica, since when it is unschedulable: its creation, as the scheduler tries a
        new pod at once and a running replica never goes back to Pending."""
        with self._lock:
            self._schedule(self._clock())
            return tuple(r.created_at for r in self._replicas if r.gpu is None)

    def scale_to(self, replicas: int) -> None:
        """Set the count now: new replicas start loading (or wait for a GPU), removed ones go at once."""
        if replicas < 0:
            raise ValueError(f"replicas must be >= 0 (got {replicas})")
        with self._lock:
            now = self._clock()
            self._schedule(now)
            if replicas > len(self._replicas):
                self._add(replicas - len(self._replicas), now, ready_now=False)
            elif replicas < len(self._replicas):
                ranked = sorted(self._replicas, key=lambda r: self._deletion_rank(r, now))
                cut = len(self._replicas) - replicas
                removed, keep = ranked[:cut], ranked[cut:]
                costs_set = any(self._costs.get(r.name, 0) != 0 for r in ranked)
                by_default = sorted(self._replicas, key=lambda r: self._deletion_rank(r, now, costs=False))
                self._replicas = sorted(keep, key=lambda r: (r.created_at, r.name))
                for replica in removed:
                    self._costs.pop(replica.name, None)
                self._schedule(now)
                if self.on_removed is not None:
                    self.on_removed(ScaleDown(tuple(r.name for r in removed),
                                              tuple(r.name for r in by_default[:cut]), costs_set))

    def set_deletion_cost(self, name: str, cost: int | None) -> bool:
        """The replica's pod-deletion cost (None: none); False when no replica has that name."""
        with self._lock:
            if all(r.name != name for r in self._replicas):
                return False
            if cost is None:
                self._costs.pop(name, None)
            else:
                self._costs[name] = cost
            return True

    def snapshot(self, load: float) -> ClusterSnapshot:
        """The state at the injected clock's now, with `load` shared among the ready replicas."""
        with self._lock:
            now = self._clock()
            self._schedule(now)
            replicas = tuple(self._replicas)
            others = dict(self._others)
        holders = {r.gpu: (r.name, r.ready(now)) for r in replicas if r.gpu is not None}
        ready = sum(1 for _, serving in holders.values() if serving)
        per_gpu = min(1.0, load / ready) if ready else 0.0
        loading_utilization = self.settings.loading_utilization
        gpus = []
        for index, node in enumerate(self._nodes):  # a replay takes one every sync: kept to plain lookups
            name, serving = holders.get(index, (None, False))
            other = others.get(index)
            if other is not None:
                utilization = OTHER_UTILIZATION
            else:
                utilization = per_gpu if serving else (loading_utilization if name is not None else 0.0)
            gpus.append(GpuState(index, node, name, utilization, serving, other))
        return ClusterSnapshot(time=now, load=load, spec_replicas=len(replicas), ready=ready,
                               loading=len(holders) - ready, pending=len(replicas) - len(holders),
                               gpus=tuple(gpus), others=len(others))

    def _add(self, count: int, now: float, ready_now: bool) -> None:
        for _ in range(count):
            self._sequence += 1
            self._replicas.append(Replica(f"{self.name}-{self._sequence:04d}", now, None, None))
        self._schedule(now, ready_now=ready_now)

    def _schedule(self, now: float, ready_now: bool = False) -> None:
        """Other tenants first (they take the highest free GPUs, and give back their newest), then give free
        GPUs to Pending replicas, oldest first; their start-up delay starts then."""
        if len(self._others) == self._others_wanted and all(r.gpu is not None for r in self._replicas):
            return  # nothing to place: the common case, on every read
        while len(self._others) > self._others_wanted:
            del self._others[max(self._others, key=lambda g: self._others[g])]
        used = {r.gpu for r in self._replicas if r.gpu is not None} | set(self._others)
        free = [g for g in range(self.settings.gpu_count) if g not in used]
        while free and len(self._others) < self._others_wanted:
            self._other_sequence += 1
            self._others[free.pop()] = f"{OTHER_WORKLOAD}-{self._other_sequence:04d}"
        if not free:
            return
        delay = 0.0 if ready_now else self.settings.startup_delay_seconds
        updated = []
        for replica in self._replicas:
            if replica.gpu is None and free:
                replica = Replica(replica.name, replica.created_at, free.pop(0), now + delay)
            updated.append(replica)
        self._replicas = updated

    def _deletion_rank(self, replica: Replica, now: float,
                       costs: bool = True) -> tuple[int, int, float, tuple[int, ...]]:
        """Lower ranks go first: Pending, then loading, then ready; within a group the lowest deletion cost
        (`costs` False: as if none were set), then the newest."""
        group = 0 if replica.gpu is None else (1 if not replica.ready(now) else 2)
        cost = self._costs.get(replica.name, 0) if costs else 0
        return (group, cost, -replica.created_at, _reverse(replica.name))


def _reverse(name: str) -> tuple[int, ...]:
    """Sort key putting later names (higher sequence numbers) first."""
    return tuple(-ord(c) for c in name)
