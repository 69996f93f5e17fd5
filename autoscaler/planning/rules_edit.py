"""Edit a rule's fields in the user's rules file as written: only the lines of the changed fields change, so
comments, order and formatting survive and `tune`'s diff applies to the file as a patch."""

from __future__ import annotations

from collections.abc import Mapping

import yaml

Edit = tuple[int, int, str]
"""Replace text[start:end] by the string."""


def edited_rule(text: str, name: str, old: Mapping[str, object], new: Mapping[str, object]) -> str:
    """`text` with rule `name`'s fields moved from `old` to `new` (both as tuned_fields writes them). A field
    the file does not write is added under its parent; every other line is kept byte for byte."""
    root = yaml.compose(text, Loader=yaml.SafeLoader)
    rule = _rule_node(root, name)
    if rule is None:
        raise ValueError(f"rule {name} is not in the file")
    edits: list[Edit] = []
    _edit_mapping(text, rule, old, new, edits)
    for start, end, replacement in sorted(edits, reverse=True):
        text = text[:start] + replacement + text[end:]
    return text


def _rule_node(root: yaml.Node | None, name: str) -> yaml.MappingNode | None:
    rules = _child(root, "rules") if isinstance(root, yaml.MappingNode) else None
    if not isinstance(rules, yaml.SequenceNode):
        return None
    for item in rules.value:
        named = _child(item, "name") if isinstance(item, yaml.MappingNode) else None
        if isinstance(named, yaml.ScalarNode) and named.value == name:
            return item  # type: ignore[no-any-return]
    return None


def _child(node: yaml.MappingNode, key: str) -> yaml.Node | None:
    return next((value for k, value in node.value if isinstance(k, yaml.ScalarNode) and k.value == key), None)


def _flow(value: object) -> str:
    """One value as YAML on one line."""
    dumped: str = yaml.safe_dump(value, default_flow_style=True, sort_keys=False, width=10_000)
    return dumped.removesuffix("\n...\n").strip()


def _edit_mapping(text: str, node: yaml.MappingNode, old: Mapping[str, object], new: Mapping[str, object],
                  edits: list[Edit]) -> None:
    missing: dict[str, object] = {}
    for key, value in new.items():
        before = old.get(key)
        if before == value:
            continue
        child = _child(node, key)
        if child is None:
            missing[key] = _changed_part(before, value)
        else:
            _edit_value(text, child, before, value, edits)
    if missing:
        edits.append(_insertion(text, node, missing))


def _changed_part(before: object, after: object) -> object:
    """What of `after` differs from `before` (the keys of a mapping that changed), to write where the file
    writes nothing: an unwritten field has its default, which `before` holds."""
    if isinstance(before, Mapping) and isinstance(after, Mapping):
        return {k: _changed_part(before.get(k), v) for k, v in after.items() if before.get(k) != v}
    return after


def _edit_value(text: str, node: yaml.Node, before: object, after: object, edits: list[Edit]) -> None:
    if isinstance(node, yaml.MappingNode) and isinstance(before, Mapping) and isinstance(after, Mapping):
        _edit_mapping(text, node, before, after, edits)
    elif (isinstance(node, yaml.SequenceNode) and isinstance(before, list) and isinstance(after, list)
          and len(node.value) == len(before) == len(after)
          and all(isinstance(item, yaml.MappingNode) for item in node.value)
          and all(isinstance(item, Mapping) for item in (*before, *after))):
        for item, was, now in zip(node.value, before, after, strict=True):
            _edit_mapping(text, item, was, now, edits)
    elif isinstance(node, yaml.CollectionNode) and not node.flow_style:  # a block list of another length
        indent = " " * node.start_mark.column
        edits.append((node.start_mark.index, _line_end(text, _last_scalar_end(node)),
                      f"\n{indent}".join(_block(after).splitlines())))
    else:  # a scalar or a flow collection: its own text is replaced
        edits.append((node.start_mark.index, node.end_mark.index, _flow(after)))


def _last_scalar_end(node: yaml.Node) -> int:
    """Where the node's text ends: a block collection's own end mark lies past the comments after it."""
    while isinstance(node, yaml.CollectionNode) and node.value:
        last = node.value[-1]
        node = last[1] if isinstance(last, tuple) else last
    return int(node.end_mark.index)


def _block(value: object) -> str:
    dumped: str = yaml.safe_dump(value, default_flow_style=False, sort_keys=False, width=10_000)
    return dumped.removesuffix("\n...\n")


def _line_end(text: str, index: int) -> int:
    end = text.find("\n", index)
    return len(text) if end < 0 else end


def _insertion(text: str, node: yaml.MappingNode, fields: Mapping[str, object]) -> Edit:
    """New keys after the mapping's last entry, at the indentation of its first key (in braces: before
    the closing one)."""
    if node.flow_style:
        at = node.end_mark.index - 1
        return at, at, "".join(f", {key}: {_flow(value)}" for key, value in fields.items())
    indent = " " * node.value[0][0].start_mark.column
    at = _line_end(text, _last_scalar_end(node))
    return at, at, "".join(f"\n{indent}{line}" for line in _block(dict(fields)).splitlines())
