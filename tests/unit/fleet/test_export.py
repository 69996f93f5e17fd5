"""`gpu-fleet export`'s formats over rows given in chunks, as the range queries give them: table and wide
aligned as they stream, JSON with integer indexes and byte counts, CSV unchanged. No Prometheus."""

from __future__ import annotations

import io
import json

from fleet.commands.export import LABELS, write
from fleet.units import GIB

COLUMNS = ["utilization", "memory_used_bytes", "memory_total_bytes", "power_watts", "health"]
T0 = 1_790_000_000.0  # 2026-09-21T14:13:20Z


def record(t: float, node: str, gpu: str, *, pod: str = "",
           utilization: float | None = 0.42) -> dict[str, object]:
    return {"time": t, "node": node, "gpu": gpu, "uuid": f"GPU-{node}-{gpu}", "model": "NVIDIA H100",
            "namespace": "ml" if pod else "", "pod": pod, "utilization": utilization,
            "memory_used_bytes": 12.5 * GIB, "memory_total_bytes": 79.6 * GIB, "power_watts": 301.4,
            "health": "optimal"}


CHUNKS = [[record(T0, "a", "0"), record(T0, "a", "1", pod="embed-0", utilization=None)],
          [record(T0 + 60, "node-with-a-long-name", "0")]]


def written(form: str, headers: bool = True, columns: list[str] = COLUMNS) -> str:
    out = io.StringIO()
    keep = {"time", *LABELS, *columns}  # a row holds the columns asked for, as the queries give them
    write(iter([[{k: v for k, v in r.items() if k in keep} for r in chunk] for chunk in CHUNKS]), columns,
          form, out, headers=headers)
    return out.getvalue()


def test_table_reads_like_status_and_widens_as_the_rows_stream() -> None:
    lines = written("table").splitlines()
    assert lines[0].split() == ["TIME", "NODE", "GPU", "UTIL", "MEMORY", "USED", "MEMORY", "TOTAL", "POWER",
                                "HEALTH", "POD"]
    assert lines[1].split() == ["2026-09-21T14:13:20Z", "a", "0", "42%", "12.5", "GiB", "79.6", "GiB", "301W",
                                "optimal", "-"]
    assert lines[2].split()[3] == "-" and lines[2].endswith("ml/embed-0")  # no value: '-', the holder last
    assert lines[0].index("UTIL") == lines[1].index("42%") == lines[2].index("-  ")  # aligned with the header
    assert lines[3].split()[1] == "node-with-a-long-name"  # the next chunk widens NODE from there on
    assert lines[3].index("42%") > lines[1].index("42%")
    assert [line.split() for line in written("table", headers=False).splitlines()] == [
        line.split() for line in lines[1:]]


def test_wide_adds_uuid_and_model() -> None:
    header, first, *_ = written("wide", columns=["utilization"]).splitlines()
    assert header.split() == ["TIME", "NODE", "GPU", "UUID", "MODEL", "UTIL", "POD"]
    assert first.split() == ["2026-09-21T14:13:20Z", "a", "0", "GPU-a-0", "NVIDIA", "H100", "42%", "-"]


def test_json_has_integer_indexes_and_byte_counts() -> None:
    rows = json.loads(written("json"))
    assert [r["gpu"] for r in rows] == [0, 1, 0]
    assert rows[0]["memory_used_bytes"] == round(12.5 * GIB)
    assert isinstance(rows[0]["memory_total_bytes"], int)
    assert rows[1]["utilization"] is None and rows[0]["utilization"] == 0.42


def test_csv_keeps_its_columns() -> None:
    lines = written("csv", columns=["utilization", "memory_used_bytes"]).splitlines()
    assert lines[0] == "time,node,gpu,uuid,model,namespace,pod,utilization,memory_used_bytes"
    assert lines[1] == f"{T0:.0f},a,0,GPU-a-0,NVIDIA H100,,,0.42,{round(12.5 * GIB)}"
    assert written("csv", headers=False, columns=["utilization"]).splitlines()[0].startswith(f"{T0:.0f},a,0,")
