"""NVIDIA's DRA driver's device names and the kubelet's `dynamic_resources` read into allocations."""

from __future__ import annotations

import pytest

from exporter.pods.attribution import by_uuid, minor_of
from exporter.pods.podresources import allocations_from_response, build_holder_map, resource_filter
from exporter.scrape.dra import DraMig, dra_mig, dra_minor
from exporter.scrape.holders import PodRef
from tests.kubelet import Claim, make_response


@pytest.mark.parametrize(("name", "minor", "mig"), [
    ("gpu-0", 0, None),
    ("gpu-12", 12, None),
    ("gpu-3-mig-1g10gb-19-4", 3, DraMig(3, 19, 4)),  # <profile>-<profile id>-<placement start>
    ("gpu-3-mig-1g10gb-me-20-4", 3, DraMig(3, 20, 4)),  # `1g.10gb+me`: the `+` became a hyphen
    ("gpu-3-mig-19-4-1", 3, DraMig(3, 19, 4)),  # before 2026: <profile id>-<start>-<size>
    ("gpu-vfio-0", None, None),  # a passthrough GPU: not one NVML sees on the host
    ("gpu-1-mig-1g10gb-19", None, None),
    ("gpu-\u0663", None, None),  # a non-ASCII digit is no minor
    ("gpu-" + "9" * 40, None, None),
    ("nvidia0", None, None),
    ("", None, None),
], ids=repr)
def test_device_names(name: str, minor: int | None, mig: DraMig | None) -> None:
    assert (dra_minor(name), dra_mig(name)) == (minor, mig)


def test_dra_and_gke_ids_both_name_a_gpu_by_its_minor() -> None:
    assert [minor_of(i) for i in ("gpu-2", "nvidia2/gi1", "2", "GPU-2")] == [2, 2, None, None]


def test_a_dra_mig_device_is_a_mig_holder_and_a_whole_gpu_is_not() -> None:
    assert PodRef("ns", "p", "c", "gpu.nvidia.com", "gpu-0-mig-1g10gb-19-0", "slice").is_mig
    assert not PodRef("ns", "p", "c", "gpu.nvidia.com", "gpu-0", "whole").is_mig


def test_dynamic_resources_become_allocations_next_to_device_plugin_ids() -> None:
    response = make_response([
        ("ml", "a", [("main", [("nvidia.com/gpu", ["GPU-1"]), Claim("one", ["gpu-0", "gpu-1"])])]),
        ("ml", "b", [("main", [Claim("shared", ["gpu-2"], namespace="other")])]),  # not the pod's namespace
        ("ml", "c", [("main", [Claim("domain", ["channel-0"], driver="compute-domain.nvidia.com")])]),
    ])
    found = allocations_from_response(response)
    assert [(a.pod, a.resource, a.device_id, a.claim, a.pool) for a in found] == [
        ("a", "nvidia.com/gpu", "GPU-1", "", ""),
        ("a", "gpu.nvidia.com", "gpu-0", "one", "node-a"),
        ("a", "gpu.nvidia.com", "gpu-1", "one", "node-a"),
        ("b", "gpu.nvidia.com", "gpu-2", "other/shared", "node-a"),
        ("c", "compute-domain.nvidia.com", "channel-0", "domain", "node-a"),
    ]
    # the DRA GPU driver is accepted whatever resource names are configured; other drivers are not
    holders = build_holder_map(found, resource_filter=resource_filter(["example.com/gpu"]))
    assert sorted(holders) == ["gpu-0", "gpu-1", "gpu-2"]
    assert [h.claim for h in holders["gpu-2"]] == ["other/shared"]
    mapped = by_uuid(holders, None, {0: "GPU-a", 1: "GPU-b"}.get)
    assert sorted(mapped) == ["GPU-a", "GPU-b", "gpu-2"]  # no GPU with minor 2: kept as given
