"""Typed reading of a composed YAML node tree that remembers line numbers and collects problems.

The autoscaler's rules and Prometheus connections files and the exporter's config are validated field by
field, but users edit YAML, so every message has to point at a line. PyYAML's plain `safe_load` throws line
numbers away; its `compose` keeps them on the nodes. `NodeReader` reads typed values out of those nodes and
records a `Problem` (never raises) for each mistake, so one run reports every problem in the file.
"""

from __future__ import annotations

import contextlib
import difflib
import math
import re
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from typing import Any, TypeVar

import yaml
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from plumbing.problems import Problem
from plumbing.yamlsafe import line_of

__all__ = ["ANY_KEY", "NULL_TAG", "NodeReader", "describe", "line_at", "line_of", "node_at"]

NULL_TAG = "tag:yaml.org,2002:null"
T = TypeVar("T")
N = TypeVar("N", int, float)  # a bound and the value it bounds


def describe(node: Node) -> str:
    """A short rendering of what the user wrote, for "(got ...)" in messages."""
    if isinstance(node, MappingNode):
        return "a mapping"
    if isinstance(node, SequenceNode):
        return "a list"
    if node.tag == NULL_TAG:
        return "nothing"
    text = str(node.value)
    if len(text) > 40:
        text = text[:37] + "..."
    return repr(text) if node.tag.endswith(":str") else text


class _AnyKey(frozenset[str]):
    """`known` for a mapping whose keys are names the user chooses (endpoints, users, headers)."""

    def __contains__(self, item: object) -> bool:
        return True


ANY_KEY: Collection[str] = _AnyKey()


@dataclass
class NodeReader:
    """Reads typed values from YAML nodes of one file, appending a Problem for each invalid value."""

    path: str
    problems: list[Problem] = field(default_factory=list)
    _constructor: yaml.constructor.SafeConstructor = field(
        default_factory=yaml.constructor.SafeConstructor, repr=False
    )

    def problem(self, line: int, where: str, message: str) -> None:
        self.problems.append(Problem(self.path, line, where, message))

    def mapping(
        self, node: Node, where: str, known: Collection[str], required: Collection[str] = (),
        unsupported: Collection[str] = (),
    ) -> dict[str, Node] | None:
        """The keys of a mapping node; reports non-mappings, duplicate, unknown and missing keys, and keys
        the format has but this program refuses (`unsupported`)."""
        if not isinstance(node, MappingNode):  # the root's `where` is "": name it so the line reads well
            self.problem(line_of(node), where or "(top level)", f"expected a mapping (got {describe(node)})")
            return None
        result: dict[str, Node] = {}
        for key_node, value_node in _merged(node):
            key = str(key_node.value)
            key_where = f"{where}.{key}" if where else key
            if key in result:
                self.problem(line_of(key_node), key_where, "duplicate key (each field may appear once)")
                continue
            if key in unsupported:
                self.problem(line_of(key_node), key_where, "not supported by this server; remove it")
                continue
            if key not in known:
                hint = difflib.get_close_matches(key, list(known), n=1)
                suggestion = f"; did you mean {hint[0]!r}?" if hint else ""
                self.problem(
                    line_of(key_node), key_where,
                    f"unknown field (expected one of: {', '.join(sorted(known))}){suggestion}",
                )
                continue
            result[key] = value_node
        for key in required:
            if key not in result:
                self.problem(line_of(node), f"{where}.{key}" if where else key, "required field is missing")
        return result

    def sequence(self, node: Node, where: str) -> list[Node] | None:
        if not isinstance(node, SequenceNode):
            self.problem(line_of(node), where, f"expected a list (got {describe(node)})")
            return None
        return list(node.value)

    def _scalar(self, node: Node) -> object:
        if not isinstance(node, ScalarNode):
            return node
        try:
            return self._constructor.construct_object(node, deep=True)
        except (yaml.YAMLError, ValueError, OverflowError, TypeError):
            # never raise on a scalar: int() of thousands of digits is a ValueError, a bad date too
            return node.value

    def string(self, node: Node, where: str) -> str | None:
        """Any non-empty scalar, as the user typed it (so a PromQL query `1` stays the string "1")."""
        if not isinstance(node, ScalarNode) or node.tag == NULL_TAG or str(node.value).strip() == "":
            self.problem(line_of(node), where, f"expected a non-empty string (got {describe(node)})")
            return None
        return str(node.value)

    def integer(self, node: Node, where: str, low: int | None = None, high: int | None = None) -> int | None:
        value = self._scalar(node)
        if isinstance(value, bool) or not isinstance(value, int):
            self.problem(line_of(node), where, f"expected an integer (got {describe(node)})")
            return None
        return self._in_range(node, where, value, low, high)

    def number(self, node: Node, where: str, low: float | None = None, above: float | None = None,
               high: float | None = None) -> float | None:
        """A finite number >= low (if given), > above (if given) and <= high (if given)."""
        value = self._scalar(node)
        if isinstance(value, str) and isinstance(node, ScalarNode) and not node.style:  # plain: None or ""
            with contextlib.suppress(ValueError):  # YAML 1.1 reads 1e3 as a string; users mean a number.
                value = float(value)
        if isinstance(value, int) and not isinstance(value, bool):
            try:  # an integer beyond a float's range (10**400) is not a finite number either
                value = float(value)
            except OverflowError:
                value = math.inf
        if isinstance(value, bool) or not isinstance(value, float) or not math.isfinite(value):
            self.problem(line_of(node), where, f"expected a finite number (got {describe(node)})")
            return None
        beyond = _beyond(value, low, high, above)
        if beyond is not None:
            self.problem(line_of(node), where, f"expected a number {beyond[0]} {beyond[1]:g} (got {value:g})")
            return None
        return value

    def converted(self, node: Node, where: str, expected: str,
                  convert: Callable[[Any], T | None]) -> T | None:
        """A scalar or a list of scalars, through `convert` (None: does not fit, reported as
        `expected <expected> (got ...)`); for schema-driven files such as the exporter's config."""
        value: Any = node
        if isinstance(node, ScalarNode):
            value = self._scalar(node)
        elif isinstance(node, SequenceNode) and all(isinstance(item, ScalarNode) for item in node.value):
            value = [self._scalar(item) for item in node.value]
        result = None if isinstance(value, Node) else convert(value)
        if result is None:
            self.problem(line_of(node), where, f"expected {expected} (got {describe(node)})")
        return result

    def choice(self, node: Node, where: str, choices: Collection[str]) -> str | None:
        value = self._scalar(node)
        if not isinstance(value, str) or value not in choices:
            self.problem(
                line_of(node), where, f"expected one of {', '.join(choices)} (got {describe(node)})"
            )
            return None
        return value

    def _in_range(self, node: Node, where: str, value: int, low: int | None, high: int | None) -> int | None:
        got = describe(node)  # as written: str() of a 5,000-digit int raises ValueError
        if low is not None and high is not None and not low <= value <= high:
            self.problem(line_of(node), where, f"expected an integer in [{low}, {high}] (got {got})")
            return None
        beyond = _beyond(value, low, high)
        if beyond is not None:
            self.problem(line_of(node), where, f"expected an integer {beyond[0]} {beyond[1]} (got {got})")
            return None
        return value


def _beyond(value: N, low: N | None, high: N | None, above: N | None = None) -> tuple[str, N] | None:
    """The bound `value` breaks, as the message says it (`(">", above)`, `(">=", low)`, `("<=", high)`);
    None within all."""
    if above is not None and not value > above:
        return ">", above
    if low is not None and value < low:
        return ">=", low
    if high is not None and value > high:
        return "<=", high
    return None


MERGE_TAG = "tag:yaml.org,2002:merge"


def _merged(node: MappingNode) -> list[tuple[Node, Node]]:
    """The key/value pairs of a mapping with YAML merge keys (`<<: *defaults`) applied: own keys win."""
    own = [(k, v) for k, v in node.value if k.tag != MERGE_TAG]
    own_keys = {str(k.value) for k, _ in own}
    inherited: list[tuple[Node, Node]] = []
    for key, value in node.value:
        if key.tag != MERGE_TAG:
            continue
        sources = value.value if isinstance(value, SequenceNode) else [value]
        for source in sources:
            if isinstance(source, MappingNode):
                for k, v in _merged(source):
                    name = str(k.value)
                    if name not in own_keys:
                        own_keys.add(name)
                        inherited.append((k, v))
    return own + inherited


_STEP = re.compile(r"([^.\[\]]+)|\[(\d+)\]")


def node_at(root: Node | None, field: str) -> Node | None:
    """The node a field path (`gpus[0].processes[1].pid`) names in a node tree; None when part of it is
    missing. For readers that walk constructed data and read each value through NodeReader."""
    node = root
    for match in _STEP.finditer(field):
        found = _step(node, *match.groups())
        if found is None:
            return None
        node = found
    return node


def _step(node: Node | None, key: str | None, index: str | None) -> Node | None:
    if isinstance(node, MappingNode) and key is not None:
        return next((value for k, value in _merged(node) if str(k.value) == key), None)
    if isinstance(node, SequenceNode) and index is not None and int(index) < len(node.value):
        return node.value[int(index)]  # type: ignore[no-any-return]
    return None


def line_at(root: Node | None, field: str) -> int:
    """The line a field path points at in a node tree: the node it names, or, when part of the path is
    missing, the deepest node that is there (a missing key is reported at its mapping)."""
    node = root
    line = line_of(root) if root is not None else 1
    for match in _STEP.finditer(field):
        found = _step(node, *match.groups())
        if found is None:
            break
        node, line = found, line_of(found)
    return line
