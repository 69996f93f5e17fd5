"""Which pods a scale-down's deletion costs patch: the busiest ranked highest, only changed pods written, ours
cleared when a pod idles or leaves the query, a user's own cost never touched."""

from __future__ import annotations

import math

import pytest

from autoscaler.kube.backend import PodMeta
from autoscaler.kube.deletion_cost import COST_ANNOTATION, MAX_INT32, OURS_ANNOTATION, cost_of, cost_patches


def ours(cost: str) -> dict[str, str]:
    return {COST_ANNOTATION: cost, OURS_ANNOTATION: cost}


@pytest.mark.parametrize(("in_flight", "cost"), [
    (0.0, 0), (-3.0, 0), (0.2, 1), (1.0, 1), (7.5, 8), (1e12, MAX_INT32), (math.nan, 0), (math.inf, 0),
])
def test_cost_is_in_flight_rounded_up_within_int32(in_flight: float, cost: int) -> None:
    assert cost_of(in_flight) == cost


def test_busy_pods_get_their_cost_and_idle_ones_none() -> None:
    pods = [PodMeta("busy"), PodMeta("idle"), PodMeta("absent")]
    assert cost_patches(pods, {"busy": 12, "idle": 0}) == {"busy": ours("12")}


def test_a_cost_already_ours_and_right_is_not_written_again() -> None:
    pods = [PodMeta("same", ours("3")), PodMeta("moved", ours("3"))]
    assert cost_patches(pods, {"same": 3, "moved": 9}) == {"moved": ours("9")}


@pytest.mark.parametrize("in_flight", [{"p": 0.0}, {}], ids=["idle", "left-the-query"])
def test_our_stale_cost_is_cleared(in_flight: dict[str, float]) -> None:
    cleared = {COST_ANNOTATION: None, OURS_ANNOTATION: None}
    assert cost_patches([PodMeta("p", ours("5"))], in_flight) == {"p": cleared}


@pytest.mark.parametrize("annotations", [
    {COST_ANNOTATION: "100"},
    {COST_ANNOTATION: "100", OURS_ANNOTATION: "4"},
], ids=["never-ours", "changed-since-we-wrote-it"])
def test_a_users_own_cost_is_never_changed_nor_cleared(annotations: dict[str, str]) -> None:
    assert cost_patches([PodMeta("p", annotations)], {"p": 7}) == {}
    assert cost_patches([PodMeta("p", annotations)], {}) == {}


def test_a_mark_without_its_cost_is_set_again_or_dropped() -> None:
    pods = [PodMeta("busy", {OURS_ANNOTATION: "2"}), PodMeta("idle", {OURS_ANNOTATION: "2"})]
    assert cost_patches(pods, {"busy": 2}) == {
        "busy": ours("2"), "idle": {COST_ANNOTATION: None, OURS_ANNOTATION: None}}
