"""Offline PromQL syntax check of one query, with no Prometheus to ask.

`gpu-autoscaler check` runs it first, so a typo (`sum(rate(x[5m])`, `rate(x)` without a range) is reported as
`file:line: metric NAME: ...` in CI before any server is contacted. The parser is `promql-parser`, the Python
binding of the Rust crate GreptimeDB uses (a port of Prometheus' own grammar, type checks of function
arguments included): kept, fast, and stricter than a regex could be.

The Rust parser recurses on the expression tree and crashes the whole process (a native stack overflow, no
exception) on a few thousand nested brackets or chained operators, and its time grows with the square of the
depth. So a query is first measured here, in Python: its length, the nesting of its brackets and its count of
operators are bounded, and one past a bound is a problem of its own, never handed to the parser.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import promql_parser

MAX_QUERY_CHARS = 8192
"""Longer than any real query; Prometheus' own GET limit is about this size."""
MAX_QUERY_NESTING = 64
"""Brackets ( [ { inside each other; real queries nest under 10 deep."""
MAX_QUERY_OPERATORS = 128
"""Binary operators (each deepens the parser's tree); a query with more is generated, not written."""

# a string literal ("...", '...' with escapes, or `...`), a bracket, or an operator symbol or keyword
_TOKEN = re.compile(r'"(?:[^"\\]|\\.)*"?|\'(?:[^\'\\]|\\.)*\'?|`[^`]*`?|[()\[\]{}]|[-+*/%^]|[=!<>]=|[<>]|'
                    r"\b(?:and|or|unless|atan2)\b")


@dataclass(frozen=True, slots=True)
class Shape:
    """What the bounds look at: nesting depth and operator count, outside string literals."""

    nesting: int
    operators: int


def shape(query: str) -> Shape:
    """Nesting depth of brackets and count of operators, string literals skipped (one regex pass)."""
    depth = deepest = operators = 0
    for match in _TOKEN.finditer(query):
        token = match.group()
        if token in "([{":
            depth += 1
            deepest = max(deepest, depth)
        elif token in ")]}":
            depth -= 1
        elif token[0] not in "\"'`":
            operators += 1
    return Shape(deepest, operators)


def syntax_error(query: str) -> str | None:
    """Why `query` is not valid PromQL, or None when it parses."""
    if len(query) > MAX_QUERY_CHARS:
        return f"query is {len(query):,} characters long (at most {MAX_QUERY_CHARS:,}); not parsed"
    measured = shape(query)
    if measured.nesting > MAX_QUERY_NESTING:
        return (f"query nests brackets {measured.nesting} deep (at most {MAX_QUERY_NESTING}); not parsed")
    if measured.operators > MAX_QUERY_OPERATORS:
        return f"query has {measured.operators} operators (at most {MAX_QUERY_OPERATORS}); not parsed"
    try:
        promql_parser.parse(query)
    except (ValueError, TypeError, RuntimeError, OverflowError) as exc:  # the binding raises ValueError
        reason = " ".join(str(exc).split()) or exc.__class__.__name__
        return f"PromQL syntax error: {reason}"
    return None
