"""Joining the answers into GPUs: a GPU whose exporter is down is kept as stale, with its last-seen time."""

from __future__ import annotations

from fleet.placing.inventory import Gpu, join, last_seen_query
from fleet.placing.table import as_json, render
from fleet.querying.prom import Sample

H100 = "NVIDIA H100 80GB HBM3"
A0 = {"node": "a", "gpu": "0", "uuid": "GPU-a0", "model": H100, "instance": "10.0.0.1:9400"}
D0 = {"node": "d", "gpu": "0", "uuid": "GPU-d0", "model": H100, "instance": "10.0.0.4:9400"}
NOW = 1_800_000_000.0


def test_a_gpu_gone_from_gpu_info_is_stale_with_its_last_seen_time() -> None:
    gpus = join({"info": [Sample(A0, 1.0)], "memory_total": [Sample(A0, 85e9)],
                 "stale": [Sample(D0, 1.0), Sample(A0, 1.0)],  # a live GPU in `stale` is not stale
                 "targets_down": [Sample({"instance": "10.0.0.4:9400", "job": "gpu"}, 0.0)],
                 "last_seen": [Sample(D0, NOW - 90)]})
    live, dead = gpus
    assert not live.stale and live.memory_total == 85e9
    assert (dead.node, dead.stale, dead.last_seen, dead.target_down, dead.rank) == ("d", True, NOW - 90, True,
                                                                                    0.0)
    assert as_json(dead)["index"] == 0 and as_json(live)["memory_total_bytes"] == 85_000_000_000
    assert "stale (exporter down, last seen 2m ago)" in render(gpus, now=NOW).splitlines()[2]


def test_the_last_seen_query_names_each_dead_target_once_quoted() -> None:
    query = last_seen_query(["10.0.0.4:9400", 'we"ird', "10.0.0.4:9400"])
    assert query == ('max_over_time(timestamp(gpu_info{instance="10.0.0.4:9400"})[1h:1s]) or '
                     'max_over_time(timestamp(gpu_info{instance="we\\"ird"})[1h:1s])')
    assert last_seen_query([]) is None


def test_critical_rows_are_red_on_a_terminal_only() -> None:
    gpus = join({"info": [Sample(A0, 1.0)], "health": [Sample({**A0, "state": "critical"}, 1.0)]})
    assert "\033[1;31m" in render(gpus, color=True).splitlines()[1]
    assert "\033[" not in render(gpus)


def test_used_and_free_memory_are_served_or_what_the_other_leaves_of_the_total() -> None:
    served = Gpu("a", "0", "GPU-a0", H100, memory_used=30.0, memory_free=40.0, memory_total=80.0)
    assert (served.used_memory, served.free_memory) == (30.0, 40.0)  # as served, even if they disagree
    assert (Gpu("a", "0", "GPU-a0", H100, memory_used=30.0, memory_total=80.0).free_memory,
            Gpu("a", "0", "GPU-a0", H100, memory_free=30.0, memory_total=80.0).used_memory) == (50.0, 50.0)
    assert Gpu("a", "0", "GPU-a0", H100, memory_used=90.0, memory_total=80.0).free_memory == 0.0
    assert (Gpu("a", "0", "GPU-a0", H100, memory_total=80.0).free_memory,
            Gpu("a", "0", "GPU-a0", H100, memory_free=30.0).used_memory) == (None, None)
