"""One sync's free GPUs of a pool that several rules' capacity guards read: never promised twice.

Each capacity guard asks how many GPUs are free; rules whose queries are the same (same endpoint, the same
PromQL however spelt: the query's normal form, docs/rules.md) read the same pool, and in one sync each would
see every free GPU and scale up into it, the later ones into Pending pods. The ledger hands the pool out
instead: the rules of a pool are decided in order of `priority` (highest first), each seeing what the rules
before it left; rules of equal priority share what their tier gets, each seeing an equal part of what is left
among those still to decide (a rule that takes less leaves more to the next), and their order turns by one
every sync so that no rule keeps the remainder.

Only the guard's view changes: the gauge `gpu_autoscaler_capacity_free_gpus` still shows what the query
returned, and a rule alone on its pool sees it all, as before.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import TypeVar

from autoscaler.policy import Rule

__all__ = ["PoolLedger", "PoolShare"]

PoolKey = tuple[str, str, bool]
"""(endpoint name, the capacity query's normal form or else its text, whether it is the normal form): rules
with the same key read the same pool, however each spells its query."""
T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class PoolShare:
    """What a pooled rule's guard may use this sync, of what the pool's query returned."""

    free: float
    pool_free: float
    sharing: int
    """Rules reading the pool."""

    def note(self) -> str:
        return (f"pool shared by {self.sharing} rules: {self.free:g} of its {self.pool_free:g} free GPU(s) "
                "left to this rule this sync")


def pool_key(rule: Rule) -> PoolKey | None:
    capacity = rule.capacity
    if capacity is None:
        return None
    if capacity.pool is None:
        return (rule.prometheus, capacity.query, False)
    return (rule.prometheus, capacity.pool, True)


class PoolLedger:
    """The promises of one sync, for the pools that two or more rules read."""

    def __init__(self, rules: Iterable[Rule], turn: int = 0) -> None:
        counts = Counter(key for key in map(pool_key, rules) if key is not None)
        self._pools = {key for key, count in counts.items() if count > 1}
        self._sharing = {key: counts[key] for key in self._pools}
        self._promised: dict[PoolKey, float] = dict.fromkeys(self._pools, 0.0)
        self._undecided: Counter[tuple[PoolKey, int]] = Counter()
        self._decided: set[str] = set()
        self._turn = turn

    def __bool__(self) -> bool:
        return bool(self._pools)

    def pooled(self, rule: Rule) -> bool:
        return pool_key(rule) in self._pools

    def order(self, items: Sequence[T], rule_of: Callable[[T], Rule]) -> list[T]:
        """The pooled `items` in the order they are decided: priority first, equal ones turned by the sync."""
        pooled = []
        for item in items:
            rule = rule_of(item)
            key = pool_key(rule)
            if key in self._pools:
                pooled.append(item)
                self._undecided[(key, rule.priority)] += 1
        count = len(pooled) or 1
        turned = {id(item): (index - self._turn) % count for index, item in enumerate(pooled)}
        return sorted(pooled, key=lambda item: (-rule_of(item).priority, turned[id(item)]))

    def share(self, rule: Rule, pool_free: float) -> PoolShare | None:
        """The free GPUs `rule` may use: what the rules before it left, split among its undecided equals
        (None: the rule is alone on its pool)."""
        key = pool_key(rule)
        if key is None or key not in self._pools:
            return None
        left = max(pool_free - self._promised[key], 0.0)
        equals = max(self._undecided[(key, rule.priority)], 1)
        return PoolShare(left / equals, pool_free, self._sharing[key])

    def promise(self, rule: Rule, added_replicas: int) -> None:
        """`rule` was decided: it takes the GPUs of the replicas it adds (once: a later call, as after a
        failed sync, changes nothing)."""
        key = pool_key(rule)
        if key is None or key not in self._pools or rule.capacity is None or rule.name in self._decided:
            return
        self._decided.add(rule.name)
        self._undecided[(key, rule.priority)] -= 1
        self._promised[key] += max(added_replicas, 0) * rule.capacity.gpus_per_replica

