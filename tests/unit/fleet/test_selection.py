"""Choosing GPUs: held, down and critical GPUs are never chosen; the best score wins; --same-node."""

from __future__ import annotations

from fleet.inventory import Gpu, Holder
from fleet.selection import Exclusion, Request, placement, select

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
