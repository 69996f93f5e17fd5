"""Choosing GPUs: held, down and critical GPUs are never chosen; the best score wins; --same-node."""

from __future__ import annotations

from dataclasses import replace

import pytest

from fleet.placing.inventory import Gpu, Holder
from fleet.placing.selection import Exclusion, Request, is_idle, placement, select

GIB = 1024**3
H100 = "NVIDIA H100 80GB HBM3"
A100 = "NVIDIA A100-SXM4-40GB"


def gpu(node: str, index: int, score: float, model: str = H100, free_gib: float = 70.0, *,
        up: bool = True, health: str = "optimal", held: bool = False) -> Gpu:
    total = 80 * GIB if "H100" in model else 40 * GIB
    return Gpu(node, str(index), f"GPU-{node}-{index}", model, up=up, memory_free=free_gib * GIB,
               memory_total=total, memory_used=total - free_gib * GIB, utilization=0.1, health=health,
               score=score, holders=(Holder("ml", "trainer-0"),) if held else ())


FLEET = [
    gpu("a", 0, 0.9), gpu("a", 1, 0.5), gpu("a", 2, 0.99, held=True),
    gpu("b", 0, 0.8), gpu("b", 1, 0.95, health="critical"), gpu("b", 2, 0.97, up=False),
    gpu("c", 0, 0.7, model=A100, free_gib=30), gpu("c", 1, 0.6, model=A100, free_gib=30),
]


def chosen(request: Request) -> list[str]:
    return [g.uuid for g in select(FLEET, request).chosen]


def test_the_best_free_gpus_by_score() -> None:
    assert chosen(Request(2)) == ["GPU-a-0", "GPU-b-0"]


def test_held_critical_and_down_gpus_are_left_out_and_counted() -> None:
    selection = select(FLEET, Request(6))
    assert not selection.ok and selection.eligible == 5
    assert selection.excluded == {Exclusion.HELD: 1, Exclusion.CRITICAL: 1, Exclusion.DOWN: 1}
    assert "not enough GPUs: 6 requested, 5 eligible" in selection.summary()


def test_no_gpu_at_all_asks_whether_the_exporter_is_scraped() -> None:
    """What `status` says: an empty Prometheus is a scrape problem, not a shortage."""
    assert select([], Request(2)).summary() == "no GPU found (is the exporter scraped by this Prometheus?)"
    assert "no GPU found" not in select([FLEET[2]], Request(2)).summary()  # one GPU, held: not empty


@pytest.mark.parametrize(("fleet", "request_", "hint"), [
    pytest.param([gpu("a", 0, 0.9, health="throttled")], Request(1),
                 "--allow-throttled admits the throttled", id="throttled"),
    pytest.param([replace(gpu("a", 0, 0.9), utilization=0.75)], Request(1, max_utilization_percent=60),
                 "--max-utilization above 60 admits the too busy", id="busy"),
    pytest.param([replace(gpu("a", 0, 0.9), utilization=0.4)], Request(1, idle=True),
                 "--max-utilization instead of --idle admits the not idle", id="not-idle"),
])
def test_a_shortfall_names_the_flag_that_admits_what_a_default_left_out(
        fleet: list[Gpu], request_: Request, hint: str) -> None:
    summary = select(fleet, request_).summary()
    assert summary.endswith(f"; {hint})"), summary


def test_no_flag_is_named_for_what_the_user_asked_to_leave_out() -> None:
    """Held, critical and down GPUs are never eligible; another model or too little memory is the request."""
    summary = select(FLEET, Request(9, model="H100")).summary()
    assert summary.endswith("(left out: 2 another model, 1 critical, 1 down, 1 held by a pod)"), summary


def test_model_and_free_memory() -> None:
    assert chosen(Request(2, model="a100")) == ["GPU-c-0", "GPU-c-1"]
    assert chosen(Request(1, min_free_memory=40 * GIB, model="A100")) == []
    assert chosen(Request(3, min_free_memory=40 * GIB)) == ["GPU-a-0", "GPU-b-0", "GPU-a-1"]


def test_same_node_takes_the_best_node() -> None:
    assert chosen(Request(2, same_node=True)) == ["GPU-a-0", "GPU-a-1"]  # a: 1.4, c: 1.3, b: 1 free
    selection = select(FLEET, Request(3, same_node=True))
    assert not selection.ok and "at most 2 eligible on one node" in selection.summary()


def test_placement_is_a_node_selector_for_one_node_and_an_affinity_for_several() -> None:
    one = placement(select(FLEET, Request(2, model="H100", same_node=True)))
    assert one == {"nodeSelector": {"kubernetes.io/hostname": "a",
                                    "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}}
    several = placement(select(FLEET, Request(2)))
    terms = several["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]  # type: ignore[index]
    assert terms["nodeSelectorTerms"][0]["matchExpressions"] == [
        {"key": "kubernetes.io/hostname", "operator": "In", "values": ["a", "b"]}]


def test_ties_are_broken_by_node_and_index() -> None:
    fleet = [gpu("b", 0, 0.5), gpu("a", 1, 0.5), gpu("a", 0, 0.5)]
    assert [g.uuid for g in select(fleet, Request(2)).chosen] == ["GPU-a-0", "GPU-a-1"]


def busy(node: str, index: int, utilization: float, *, health: str = "optimal", used_share: float = 0.1,
         stale: bool = False) -> Gpu:
    total = 80 * GIB
    return Gpu(node, str(index), f"GPU-{node}-{index}", H100, up=True, utilization=utilization,
               memory_used=used_share * total, memory_free=(1 - used_share) * total, memory_total=total,
               health=health, stale=stale)


def test_max_utilization_is_at_most_the_percentage() -> None:
    fleet = [busy("a", 0, 0.5), busy("a", 1, 0.51), busy("a", 2, 0.77)]
    selection = select(fleet, Request(3, same_node=True))
    assert not selection.ok and selection.excluded == {Exclusion.BUSY: 2}
    assert chosen_of(fleet, Request(1, same_node=True)) == ["GPU-a-0"]  # 50 % is at most 50 %
    assert chosen_of(fleet, Request(3, max_utilization_percent=100)) == ["GPU-a-0", "GPU-a-1", "GPU-a-2"]


def chosen_of(fleet: list[Gpu], request: Request) -> list[str]:
    return [g.uuid for g in select(fleet, request).chosen]


def test_the_idle_rule_is_below_30_percent_and_below_half_the_memory() -> None:
    fleet = [busy("a", 0, 0.29), busy("a", 1, 0.30), busy("a", 2, 0.1, used_share=0.5),
             busy("a", 3, 0.1, used_share=0.49)]
    assert is_idle(fleet[0]) and not is_idle(fleet[1]) and not is_idle(fleet[2]) and is_idle(fleet[3])
    selection = select(fleet, Request(4, idle=True))
    assert selection.eligible == 2 and selection.excluded == {Exclusion.NOT_IDLE: 2}


def test_throttled_gpus_only_when_allowed_and_ranked_at_half() -> None:
    fleet = [busy("a", 0, 0.0, health="throttled"), busy("b", 0, 0.4)]
    assert chosen_of(fleet, Request(2)) == []
    assert select(fleet, Request(2)).excluded == {Exclusion.THROTTLED: 1}
    # idle and throttled: 0.6 * 0.9 + 0.4 = 0.94, halved 0.47; b: 0.54 + 0.24 = 0.78 ranks first
    assert chosen_of(fleet, Request(2, allow_throttled=True)) == ["GPU-b-0", "GPU-a-0"]
    assert fleet[0].rank == pytest.approx(0.47) and fleet[0].availability == pytest.approx(0.94)


def test_stale_and_critical_gpus_rank_0_and_are_never_chosen() -> None:
    stale = busy("d", 0, 0.0, stale=True)
    critical = busy("b", 1, 0.0, health="critical")
    assert stale.rank == 0.0 and critical.rank == 0.0 and critical.availability == pytest.approx(0.94)
    selection = select([stale, critical], Request(1, max_utilization_percent=100, allow_throttled=True))
    assert selection.excluded == {Exclusion.STALE: 1, Exclusion.CRITICAL: 1}
