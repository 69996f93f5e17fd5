"""`gpu-fleet report -o json`: one document with every table, numbers as numbers (unix times, integer GPU
indexes); `-o csv`: the usage rows (total, per node, namespace and workload), one line each, named by their
table."""

from __future__ import annotations

import dataclasses
import json

from fleet.output import as_csv
from fleet.reporting.usage import Report
from plumbing.numbers import ascii_int
from plumbing.output import SCHEMA_VERSION

CSV_FIELDS = ("table", "name", "gpu_hours", "busy_gpu_hours", "utilization", "idle_gpu_hours",
              "allocated_idle_gpu_hours", "energy_kwh", "gpu_cost", "energy_cost")


def render_json(report: Report) -> str:
    """The report as one document; GPU indexes are integers, as in every `gpu-fleet` JSON answer."""
    document = dataclasses.asdict(report)
    document["window"]["points"] = report.window.points
    for table in ("allocated_idle", "incidents", "xids"):
        for row in document[table]:
            row["gpu"] = ascii_int(row["gpu"])
    return json.dumps({"schemaVersion": SCHEMA_VERSION, **document}, indent=2, allow_nan=False) + "\n"


def render_csv(report: Report, headers: bool = True) -> str:
    records = [{"table": table, **dataclasses.asdict(row)}
               for table, rows in (("total", [report.total]), ("node", report.nodes),
                                   ("namespace", report.namespaces), ("workload", report.workloads))
               for row in rows]
    return as_csv(records, CSV_FIELDS, headers) + "\n"
