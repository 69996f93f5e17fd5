"""The rate-limit and stabilization tables the policy tests use are exactly those of
tests/unit/autoscaler/policy/data/hpa-behavior-vectors.md (numbers taken from the Kubernetes HPA controller's
own tests): same rows, same order, same bounds, policies, events and results, so a mistyped row cannot pass
unnoticed."""

from __future__ import annotations

import re
from pathlib import Path

from autoscaler.policy.spec import DEFAULT_SCALE_DOWN, DEFAULT_SCALE_UP, ScalingRules

from . import test_rate_vectors, test_stabilization_vectors
from .support import at_age, history, rules, spread

DATA = Path(__file__).resolve().parent / "data" / "hpa-behavior-vectors.md"


def table(heading: str) -> list[list[str]]:
    """The body rows of the table under a `## heading` of the data file, as lists of stripped cells."""
    text = DATA.read_text()
    start = text.index(f"## {heading}")
    end = text.find("\n## ", start + 1)
    lines = [line for line in text[start:end if end > 0 else None].splitlines() if line.startswith("|")]
    return [[cell.strip() for cell in line.strip("|").split("|")] for line in lines[2:]]


def events(spec: str, sign: int) -> list[object]:
    """'[1,5,9] over 120' (spread as in the HPA's tests) or '4 at age 60'; down events count down."""
    listed = re.fullmatch(r"\[([\d,]+)\] over (\d+)", spec)
    if listed:
        return list(spread([sign * int(c) for c in listed.group(1).split(",")], int(listed.group(2))))
    single = re.fullmatch(r"(\d+) at age (\d+)", spec)
    assert single, spec
    return [at_age(sign * int(single.group(1)), int(single.group(2)))]


def parse_rules_and_events(cell: str, previous: dict[str, list[object]]) -> tuple[ScalingRules, ScalingRules,
                                                                                 dict[str, list[object]]]:
    """One 'rules and events' cell: 'defaults', 'up Pods 4/60 + Percent 100/60, selectPolicy Min',
    'up events [1,5,9] over 120; up Pods 5/120', 'same down events; default down rules', ..."""
    up, down, happened = DEFAULT_SCALE_UP, DEFAULT_SCALE_DOWN, {"up": [], "down": []}
    for part in re.split(r"; |, (?=(?:up|down) event)", cell):
        if part in ("defaults", "default down rules"):
            continue
        if part.startswith("same"):
            happened = previous
            continue
        direction, rest = part.split(" ", 1)
        if rest.startswith("event"):
            happened = {**happened, direction: events(rest.split(" ", 1)[1], 1 if direction == "up" else -1)}
            continue
        spec, _, select = rest.partition(", selectPolicy ")
        if direction == "up":
            up = rules(DEFAULT_SCALE_UP, spec, select=select or None)
        else:
            down = rules(DEFAULT_SCALE_DOWN, spec, select=select or None)
    return up, down, happened


def test_the_rate_limit_rows_are_the_data_files() -> None:
    rows = table("Rate limits")
    assert len(rows) == len(test_rate_vectors.ROWS) == 35
    previous: dict[str, list[object]] = {"up": [], "down": []}
    for cells, row in zip(rows, test_rate_vectors.ROWS, strict=True):
        change, bounds, rules_and_events, result = cells
        up, down, previous = parse_rules_and_events(rules_and_events, previous)
        expected = (*map(int, change.split(" -> ")), *map(int, bounds.split(" / ")), int(result))
        assert (row.current, row.desired, row.min, row.max, row.replicas) == expected, row.id
        assert (row.up, row.down) == (up, down), row.id
        assert row.events == history(up=previous["up"], down=previous["down"]), row.id  # type: ignore[arg-type]


def test_the_stabilization_rows_are_the_data_files() -> None:
    rows = [(hist, *map(int, change.split(" -> ")), *map(int, windows.split(" / ")), int(result))
            for hist, change, windows, result in table("Stabilization")]
    assert len(rows) == 11
    assert rows == [vector[1:7] for vector in test_stabilization_vectors.VECTORS]


def test_a_changed_row_would_be_seen() -> None:
    up, down, happened = parse_rules_and_events("up events [1,5,9] over 120; up Pods 5/120", {})
    assert up == rules(DEFAULT_SCALE_UP, "Pods 5/120") and down == DEFAULT_SCALE_DOWN
    assert happened["up"] == list(spread([1, 5, 9], 120)) != list(spread([1, 5, 8], 120))
    assert parse_rules_and_events("up Pods 4/60", {})[0] != rules(DEFAULT_SCALE_UP, "Pods 5/60")
