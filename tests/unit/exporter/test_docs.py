"""docs/metrics.md matches exporter/metric_table.py, the one place naming metrics; docs/exporter.md's
`--simulate-config` example is a valid file."""

from __future__ import annotations

import re

from exporter import metric_table as m
from exporter.simulator.config import FAULT_TYPES
from exporter.simulator.config_file import parse_sim_config
from tests import REPO_ROOT

DOCS = REPO_ROOT / "docs"


def test_metrics_reference_lists_every_metric_with_its_type_and_help() -> None:
    rows = {}
    for line in (DOCS / "metrics.md").read_text().splitlines():
        match = re.match(r"\| `(gpu_[a-z_]+)` \| (gauge|counter) \| ([^|]+) \| (.+) \|$", line)
        if match:
            rows[match.group(1)] = (match.group(2), match.group(3).strip(), match.group(4).strip())
    assert set(rows) == {spec.exposed_name for spec in m.ALL_METRICS}
    for spec in m.ALL_METRICS:
        kind, labels, help_text = rows[spec.exposed_name]
        assert kind == spec.kind and help_text == spec.help
        for label in spec.extra_labels:
            assert label in labels


def test_the_simulate_config_example_is_a_valid_file() -> None:
    text = (DOCS / "exporter.md").read_text()
    start = text.index("## The simulated backend and `--simulate-config`")
    example = re.search(r"```yaml\n(.*?)```", text[start:], re.S)
    assert example is not None
    config = parse_sim_config(example.group(1), "docs/exporter.md")
    assert {fault.type for fault in config.faults} == set(FAULT_TYPES)  # every fault type is shown
