"""How every value of the simulated-GPU file is read: through the one config reader,
plumbing.yamlnodes.NodeReader, from the node the value came from, so every problem is
`file:line: field: expected ... (got ...)`, worded as in every other file the processes read.

Shared by the file's structure (exporter/simulator/config_file.py) and its faults and MIG layouts
(exporter/simulator/config_faults.py), so each reads values one way.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from yaml.nodes import Node

from plumbing.problems import Problem
from plumbing.yamlnodes import NodeReader, line_at, node_at


class FieldReader:
    """Reads values at dotted field paths of the composed YAML tree and gathers the problems found."""

    def __init__(self, path: str, root: Node | None) -> None:
        self.path = path
        self.root = root
        self.reader = NodeReader(path)
        self.problems: list[Problem] = self.reader.problems

    def fail(self, field: str, message: str) -> None:
        self.reader.problem(line_at(self.root, field), field, message)

    def number(self, raw: Mapping[str, Any], key: str, field: str, default: Any, *, integer: bool = False,
               minimum: float | None = None, maximum: float | None = None) -> Any:
        """`raw[key]` read by NodeReader (a finite number or an integer, within the bounds), else `default`
        (absent, null, or reported)."""
        node = node_at(self.root, field)
        if key not in raw or raw[key] is None or node is None:
            return default
        if integer:
            low = None if minimum is None else int(minimum)
            high = None if maximum is None else int(maximum)
            value: float | None = self.reader.integer(node, field, low, high)
        else:
            value = self.reader.number(node, field, low=minimum, high=maximum)
        return default if value is None else value

    def unknown(self, raw: Mapping[str, Any], field: str, allowed: set[str]) -> None:
        """Unknown and duplicate keys of the mapping at `field`, as NodeReader reports them."""
        node = node_at(self.root, field)
        if node is not None:
            self.reader.mapping(node, field, known=allowed)


def kind_of(value: Any) -> str:
    """What a wrong value is, for a message: its type and (the start of) its text."""
    return "nothing" if value is None else f"{type(value).__name__} {value!r}"[:60]
