"""`gpu-fleet report --format json`: one document with every table, numbers as numbers (unix times)."""

from __future__ import annotations

import dataclasses
import json

from fleet.usage import Report


def render_json(report: Report) -> str:
    document = dataclasses.asdict(report)
    document["window"]["points"] = report.window.points
    return json.dumps(document, indent=2, allow_nan=False) + "\n"
