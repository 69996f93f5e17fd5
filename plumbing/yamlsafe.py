"""YAML reading that holds against hostile files: limits on size, nesting, nodes, aliases and numbers.

Every file the CLIs read goes through here before any field is looked at, so a "billion laughs" file, a
recursive alias, 10,000 nested brackets or a number with thousands of digits is one clear message naming the
file and line, never a hang, a MemoryError or a traceback. Three passes, each bounded:

1. the raw bytes: at most `max_bytes`, UTF-8;
2. the event stream of libyaml's C parser (when PyYAML has it, else the pure-Python one): nesting depth and
   node count are counted as events arrive, and the file is refused as soon as a limit is crossed, before a
   node tree is built (the composer recurses, and a node tree costs ~300 bytes a node). When the C parser
   refuses a file, the pure-Python parser reads it again for the message: libyaml's own limits and wording
   change between releases (PyYAML 6.0.4's scanner refuses 1,000 nested brackets before its first event), and
   the message a user sees must not;
3. the composed node tree, walked as a consumer would walk it (aliases and merge keys expanded): recursive
   aliases and an expansion past `max_expanded_nodes` are refused, and so are numbers too long to be meant.

PyYAML's own composer keeps line numbers on the nodes, which the typed readers need for their messages.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from plumbing.files import read_regular, unreadable

try:  # libyaml's parser is ~10x faster; PyYAML's wheels ship it, a source build may not
    from yaml import CSafeLoader as _FastLoader
except ImportError:  # pragma: no cover - depends on how PyYAML was built
    _FastLoader = yaml.SafeLoader  # type: ignore[assignment, misc]

_REFUSED = "refusing to read it"
_NUMBER_TAGS = frozenset({"tag:yaml.org,2002:int", "tag:yaml.org,2002:float"})


@dataclass(frozen=True)
class YamlLimits:
    """Bounds on one file. The defaults keep the worst case under about a second and 100 MiB."""

    max_bytes: int = 4 * 1024 * 1024
    """File size; a rules file of 1,000 rules is about 500 KB."""
    max_depth: int = 64
    """Nesting of mappings and lists; real files nest under 10 deep."""
    max_nodes: int = 250_000
    """Nodes as written (before aliases are expanded)."""
    max_expanded_nodes: int = 1_000_000
    """Nodes as a reader sees them, every alias and merge key expanded: stops alias bombs."""
    max_number_length: int = 64
    """Characters of one integer or float: 1e308 fits, a 5,000-digit integer does not."""


DEFAULT_LIMITS = YamlLimits()


class YamlFileError(Exception):
    """A file that cannot be read as YAML within the limits: `path:line: message` (line 0: the whole file)."""

    def __init__(self, path: str, line: int, message: str) -> None:
        super().__init__(f"{path}:{line}: {message}" if line else f"{path}: {message}")
        self.path = path
        self.line = line
        self.message = message


def read_bytes(path: str | Path, limits: YamlLimits = DEFAULT_LIMITS, what: str = "file") -> bytes:
    """The file's bytes, at most `limits.max_bytes` (never more is read, so a 50 GB file costs nothing)."""
    name = str(path)
    try:
        raw = read_regular(path, limits.max_bytes)
    except OSError as exc:
        raise YamlFileError(name, 0, unreadable(exc, what)) from exc
    if len(raw) > limits.max_bytes:
        raise YamlFileError(name, 0, f"the {what} is larger than {limits.max_bytes:,} bytes; {_REFUSED}")
    return raw


def decode(raw: bytes, path: str) -> str:
    """UTF-8 text of `raw`; the message says on which line and at which offset the first bad byte is."""
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        raise YamlFileError(
            path, line, f"not UTF-8 text (byte 0x{raw[exc.start]:02x} at offset {exc.start}); save as UTF-8"
        ) from exc


def read_text(path: str | Path, limits: YamlLimits = DEFAULT_LIMITS, what: str = "file") -> str:
    """The file's text: at most `limits.max_bytes`, UTF-8."""
    return decode(read_bytes(path, limits, what), str(path))


def compose(text: str, path: str, limits: YamlLimits = DEFAULT_LIMITS) -> Node | None:
    """The node tree of a one-document YAML text (None for an empty one), within `limits`."""
    if len(text.encode("utf-8", errors="surrogatepass")) > limits.max_bytes:
        raise YamlFileError(path, 0, f"the file is larger than {limits.max_bytes:,} bytes; {_REFUSED}")
    _check_events(text, path, limits)
    try:
        root = yaml.compose(text, Loader=_FastLoader)
    except yaml.YAMLError as exc:
        raise _yaml_error(path, exc) from exc
    except (RecursionError, MemoryError) as exc:  # the event pass bounds both; belt and braces
        raise YamlFileError(path, 0, "the YAML is too deeply nested or too large to read") from exc
    if root is not None:
        _check_tree(root, path, limits)
    return root


def load(text: str, path: str, limits: YamlLimits = DEFAULT_LIMITS) -> Any:
    """Plain Python data (safe types only) of a YAML text, after the same checks as `compose`."""
    return construct(compose(text, path, limits), path)


def construct(root: Node | None, path: str) -> Any:
    """Plain Python data (safe types only) of a node tree `compose` returned."""
    if root is None:
        return None
    constructor = yaml.constructor.SafeConstructor()
    try:
        return constructor.construct_document(root)
    except yaml.YAMLError as exc:
        raise _yaml_error(path, exc) from exc
    except (ValueError, OverflowError, RecursionError) as exc:
        raise YamlFileError(path, 0, f"a value cannot be read: {exc}") from exc


def compose_file(path: str | Path, limits: YamlLimits = DEFAULT_LIMITS, what: str = "file") -> Node | None:
    return compose(read_text(path, limits, what), str(path), limits)


def load_file(path: str | Path, limits: YamlLimits = DEFAULT_LIMITS, what: str = "file") -> Any:
    return load(read_text(path, limits, what), str(path), limits)


def line_of(node: Node) -> int:
    """1-based line where `node` starts."""
    return int(node.start_mark.line) + 1


def _yaml_error(path: str, exc: yaml.YAMLError) -> YamlFileError:
    mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
    line = int(mark.line) + 1 if mark is not None else 0
    problem = getattr(exc, "problem", None) or str(exc)
    return YamlFileError(path, line, f"not valid YAML: {problem}")


def _check_events(text: str, path: str, limits: YamlLimits) -> None:
    """Depth and node count from the event stream, refused as soon as a limit is crossed.

    A refusal by the C parser is read again by the pure-Python one, whose scanner looks at most 1,024
    characters ahead: so our limits, not libyaml's, decide, and the message is the same on every version.
    """
    try:
        _count_events(text, path, limits, _FastLoader)
        return
    except yaml.YAMLError as exc:
        refused = exc
    if _FastLoader is not yaml.SafeLoader:  # type: ignore[comparison-overlap]  # same class without libyaml
        try:
            _count_events(text, path, limits, yaml.SafeLoader)
        except yaml.YAMLError as exc:
            refused = exc
    raise _yaml_error(path, refused) from refused


def _count_events(text: str, path: str, limits: YamlLimits, loader: type) -> None:
    """Count events with `loader`'s parser; our limits raise YamlFileError, the parser's own YAMLError."""
    depth = 0
    nodes = 0
    documents = 0
    for event in yaml.parse(text, Loader=loader):
        if isinstance(event, yaml.DocumentStartEvent):
            documents += 1
            if documents > 1:
                raise YamlFileError(path, _event_line(event),
                                    "expected one YAML document (found a second '---' document)")
        elif isinstance(event, yaml.CollectionStartEvent):
            depth += 1
            nodes += 1
            if depth > limits.max_depth:
                raise YamlFileError(path, _event_line(event),
                                    f"nested more than {limits.max_depth} levels deep; {_REFUSED}")
        elif isinstance(event, yaml.CollectionEndEvent):
            depth -= 1
        elif isinstance(event, yaml.ScalarEvent | yaml.AliasEvent):
            nodes += 1
        if nodes > limits.max_nodes:
            raise YamlFileError(path, _event_line(event),
                                f"more than {limits.max_nodes:,} YAML nodes; {_REFUSED}")


def _event_line(event: yaml.Event) -> int:
    mark = event.start_mark
    return int(mark.line) + 1 if mark is not None else 0


def _check_tree(root: Node, path: str, limits: YamlLimits) -> None:
    """Walk the tree as a reader would (aliases expanded): no cycles, bounded expansion, sane numbers."""
    seen_numbers: set[int] = set()
    expanded = 0
    on_path: set[int] = set()
    # (node, leaving): an explicit stack, so a deep tree never meets Python's recursion limit
    stack: list[tuple[Node, bool]] = [(root, False)]
    while stack:
        node, leaving = stack.pop()
        if leaving:
            on_path.discard(id(node))
            continue
        expanded += 1
        if expanded > limits.max_expanded_nodes:
            raise YamlFileError(path, line_of(node), f"aliases expand to more than "
                                f"{limits.max_expanded_nodes:,} nodes (an alias bomb?); {_REFUSED}")
        if isinstance(node, ScalarNode):
            if node.tag in _NUMBER_TAGS and id(node) not in seen_numbers:
                seen_numbers.add(id(node))
                if len(str(node.value)) > limits.max_number_length:
                    length = len(str(node.value))
                    raise YamlFileError(path, line_of(node), f"a number {length:,} characters long "
                                        f"(at most {limits.max_number_length}); {_REFUSED}")
            continue
        if id(node) in on_path:
            raise YamlFileError(path, line_of(node),
                                f"an alias refers to a node that contains it (a recursive alias); {_REFUSED}")
        on_path.add(id(node))
        stack.append((node, True))
        if isinstance(node, SequenceNode):
            stack.extend((child, False) for child in reversed(node.value))
        elif isinstance(node, MappingNode):
            for key, value in reversed(node.value):
                stack.append((value, False))
                stack.append((key, False))
