"""Rules whose capacity guards read the same pool: in one sync no free GPU is promised twice; `priority`
orders them, equal priorities share, and their order turns every sync."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import pytest

from autoscaler.controller.capacity_ledger import PoolLedger
from autoscaler.controller.loop import Controller
from autoscaler.errors import RulesError
from tests.rules import ref, rule, ruleset
from tests.unit.autoscaler.controller.fakes import FakeBackend, FakeMetrics, sample

MakeController = Callable[..., Controller]
FAST_UP = """
behavior:
  scaleUp: {policies: [{type: Pods, value: 100, periodSeconds: 15}]}"""


def pooled(name: str, query: str, priority: int = 0, gpus: int = 1, capacity: str = "free_gpus") -> str:
    return rule(name, query, max_replicas=40, extra=f"""
capacity: {{query: '{capacity}', gpusPerReplica: {gpus}}}
priority: {priority}{FAST_UP}""")


def test_two_rules_on_one_pool_never_take_the_same_gpu(
    make_controller: MakeController, backend: FakeBackend, source: FakeMetrics
) -> None:
    for name in ("a", "b"):
        backend.add(ref(name), 2)
    source.values.update({"q_a": 400, "q_b": 400, "free_gpus": 6})  # each wants 10 (8 more): 6 are free
    c = make_controller(ruleset(pooled("a", "q_a"), pooled("b", "q_b")))
    report = c.sync_once()
    added = {r.name: p - 2 for r, p in backend.patches}
    assert sum(added.values()) == 6 and sorted(added.values()) == [3, 3]  # equals share the pool
    assert all(o.reason == "CapacityLimited" for o in report.outcomes)
    assert "pool shared by 2 rules: 3 of its 6 free GPU(s) left to this rule this sync" in (
        report.outcomes[0].message + report.outcomes[1].message)
    assert sample(c, "gpu_autoscaler_capacity_free_gpus", rule="a") == 6  # the gauge: the query's answer


def test_the_higher_priority_is_served_first_and_a_lower_one_gets_the_rest(
    make_controller: MakeController, backend: FakeBackend, source: FakeMetrics
) -> None:
    for name in ("batch", "online"):
        backend.add(ref(name), 2)
    source.values.update({"q_batch": 400, "q_online": 240, "free_gpus": 6})  # online wants 4 more
    c = make_controller(ruleset(pooled("batch", "q_batch"), pooled("online", "q_online", priority=10)))
    c.sync_once()
    assert dict((r.name, p) for r, p in backend.patches) == {"online": 6, "batch": 4}
    assert [o.rule.name for o in c.sync_once().outcomes] == ["batch", "online"]  # the file's order kept


def test_gpus_per_replica_count_and_rules_on_other_pools_see_all_of_theirs(
    make_controller: MakeController, backend: FakeBackend, source: FakeMetrics
) -> None:
    for name in ("big", "small", "alone"):
        backend.add(ref(name), 2)
    alone = rule("alone", "q_alone", max_replicas=40, extra=f"""
capacity: {{query: 'other_free', gpusPerReplica: 1}}{FAST_UP}""")
    source.values.update({"q_big": 400, "q_small": 400, "q_alone": 400, "free_gpus": 10, "other_free": 5})
    c = make_controller(ruleset(pooled("big", "q_big", priority=1, gpus=4), pooled("small", "q_small"),
                                alone))
    c.sync_once()
    # big: 2 more replicas of 4 GPUs (8 of 10), small the 2 left, alone all 5 of its own pool
    assert dict((r.name, p) for r, p in backend.patches) == {"big": 4, "small": 4, "alone": 7}


def test_the_order_of_equals_turns_every_sync() -> None:
    rules = ruleset(pooled("a", "q"), pooled("b", "q"), pooled("c", "q")).rules
    orders = [[r.name for r in PoolLedger(rules, turn=turn).order(rules, lambda r: r)] for turn in range(3)]
    assert orders == [["a", "b", "c"], ["b", "c", "a"], ["c", "a", "b"]]


def test_a_rule_that_takes_less_than_its_part_leaves_it_to_the_next() -> None:
    a, b = ruleset(pooled("a", "q"), pooled("b", "q")).rules
    ledger = PoolLedger([a, b])
    ledger.order([a, b], lambda r: r)
    share = ledger.share(a, 6.0)
    assert share is not None and share.free == 3.0
    ledger.promise(a, 1)
    ledger.promise(a, 5)  # a second promise of the same rule changes nothing
    later = ledger.share(b, 6.0)
    assert later is not None and later.free == 5.0
    assert PoolLedger([a]).share(a, 6.0) is None  # alone on its pool: nothing to share


@pytest.mark.parametrize(("one", "other"), [
    ('sum(free{pool="a100"})', 'sum ( free{ pool = "a100" } )'),
    ('sum(free{pool="a100"})', 'sum by () (free{pool="a100"})'),
    ('sum(free{pool="a100"})', 'sum(free{pool="a100"}) by ()'),
    ('sum(free{pool="a100"})', '(sum(free{pool="a100"}))'),
    ('sum(free{pool="a100", zone="z"})', 'sum(free{zone="z", pool="a100"})'),
], ids=["whitespace", "empty-by-before", "empty-by-after", "outer-parentheses", "matcher-order"])
def test_two_spellings_of_one_query_are_one_pool(
    make_controller: MakeController, backend: FakeBackend, source: FakeMetrics, one: str, other: str
) -> None:
    for name in ("a", "b"):
        backend.add(ref(name), 2)
    source.values.update({"q_a": 400, "q_b": 400, one: 5, other: 5})  # each wants 8 more: 5 are free
    c = make_controller(ruleset(pooled("a", "q_a", capacity=one), pooled("b", "q_b", capacity=other)))
    c.sync_once()
    assert sum(p - 2 for _, p in backend.patches) == 5


@pytest.mark.parametrize(("one", "other"), [
    ('sum(free{pool="a100"})', 'sum(free{pool="h100"})'),
    ('sum(free{pool="a100"})', 'sum(free{pool=~"a100"})'),
    ('sum(free{pool="a100"})', 'max(free{pool="a100"})'),
    ('sum(free{pool="a100"})', 'sum without () (free{pool="a100"})'),
], ids=["label-value", "matcher", "function", "empty-without"])
def test_different_queries_are_different_pools(one: str, other: str) -> None:
    a, b = ruleset(pooled("a", "q", capacity=one), pooled("b", "q", capacity=other)).rules
    ledger = PoolLedger([a, b])
    assert not ledger and not ledger.pooled(a) and ledger.share(b, 5.0) is None


def test_one_query_on_two_endpoints_is_two_pools() -> None:
    a, b = ruleset(pooled("a", "q"), pooled("b", "q")).rules
    assert not PoolLedger([a, dataclasses.replace(b, prometheus="other")])


@pytest.mark.parametrize("value", ["1000001", "-1000001", "1.5", "high"])
def test_a_priority_out_of_range_or_not_an_integer_is_one_problem_with_its_line(value: str) -> None:
    with pytest.raises(RulesError) as raised:
        ruleset(rule("a", "q", extra=f"priority: {value}"))
    [problem] = raised.value.problems
    assert (problem.line, problem.field) == (8, "rules[0].priority")
