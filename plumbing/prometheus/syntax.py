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
from collections.abc import Iterator
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


def _past_bounds(query: str) -> str | None:
    """Why `query` must not be handed to the parser (too long, too deep, too many operators), or None."""
    if len(query) > MAX_QUERY_CHARS:
        return f"query is {len(query):,} characters long (at most {MAX_QUERY_CHARS:,}); not parsed"
    measured = shape(query)
    if measured.nesting > MAX_QUERY_NESTING:
        return (f"query nests brackets {measured.nesting} deep (at most {MAX_QUERY_NESTING}); not parsed")
    if measured.operators > MAX_QUERY_OPERATORS:
        return f"query has {measured.operators} operators (at most {MAX_QUERY_OPERATORS}); not parsed"
    return None


def syntax_error(query: str) -> str | None:
    """Why `query` is not valid PromQL, or None when it parses."""
    past = _past_bounds(query)
    if past is not None:
        return past
    try:
        promql_parser.parse(query)
    except (ValueError, TypeError, RuntimeError, OverflowError) as exc:  # the binding raises ValueError
        reason = " ".join(str(exc).split()) or exc.__class__.__name__
        return f"PromQL syntax error: {reason}"
    return None


def normal_form(query: str) -> str | None:
    """`query` as the parser reads it, its spelling aside, or None when it does not parse (or is past the
    bounds): the parser's own printing (`prettify`) of its tree, so whitespace, comments, the order of label
    matchers, a duration's unit (`[300s]` is `[5m]`), a number's notation (`1e3` is `1000`), a string's quotes
    and escapes, an empty `by ()` on an aggregation and an empty `ignoring ()` (each the same as none) are not
    part of it; parentheses around the whole query are dropped, those inside kept (only some are redundant).
    Two queries with the same form ask Prometheus the same question."""
    if _past_bounds(query) is not None:
        return None
    try:
        expr = promql_parser.parse(query)
    except (ValueError, TypeError, RuntimeError, OverflowError):
        return None
    while isinstance(expr, promql_parser.ParenExpr):
        expr = expr.expr
    return str(expr.prettify())


_RANGE = re.compile(r"(\s*)((?:[0-9]+(?:ms|s|m|h|d|w|y))+)(\s*(?::[^\]]*)?)")
"""The inside of a range selector `[5m]` or a subquery `[5m:30s]`: its range, then the step if any."""
_DURATION_PART = re.compile(r"([0-9]+)(ms|s|m|h|d|w|y)")
_UNIT_SECONDS = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86_400, "w": 604_800, "y": 31_536_000}


def duration_seconds(text: str) -> float:
    """A PromQL duration (`1h30m`, `90s`, `500ms`) in seconds."""
    return sum(int(n) * _UNIT_SECONDS[unit] for n, unit in _DURATION_PART.findall(text))


def ranges(query: str) -> Iterator[re.Match[str]]:
    """The inside of each range selector and subquery of `query` (group 2: its range), brackets inside
    string literals skipped."""
    opened: int | None = None
    for match in _TOKEN.finditer(query):
        token = match.group()
        if token == "[":
            opened = match.end()
        elif token == "]" and opened is not None:
            inside = _RANGE.fullmatch(query, opened, match.start())
            if inside is not None:
                yield inside
            opened = None


def largest_range_seconds(query: str) -> float:
    """The longest range of `query`'s range selectors and subqueries in seconds, 0 when it has none."""
    return max((duration_seconds(inside.group(2)) for inside in ranges(query)), default=0.0)


def with_range(query: str, seconds: int) -> str:
    """`query` with every range selector and subquery longer than `seconds` shortened to it (a subquery's
    step and every `offset` kept): the same signal over a shorter window, as panic mode reads it. Brackets
    inside string literals are left alone. A query with no longer range comes back unchanged."""
    pieces: list[str] = []
    done = 0
    for inside in ranges(query):
        if duration_seconds(inside.group(2)) > seconds:
            pieces += [query[done:inside.start(2)], f"{seconds}s"]
            done = inside.end(2)
    return "".join(pieces) + query[done:] if pieces else query
