"""Batched PromQL: many instant queries sent as one, their answers split back per query and judged alone.

Each query of a batch is wrapped as `label_replace(<query>, "gpu_autoscaler_batch_index", "<i>", "", "")`
and the wrapped queries are joined with `or`, as a balanced tree (`_balanced_or`): the index label makes every
query's series distinct, so `or` keeps them all (it only drops right-hand series whose labels equal a
left-hand one's), and splitting the answer by that label gives each query exactly the series it returns
alone, in the same order (Prometheus keeps the order of an instant query's series through label_replace and
`or`). Each query's series, the label
removed, are then judged by `answer` exactly as a single answer is: one finite sample is a value, none is
NoSeries, several are MultipleSeries with the same message, NaN and Inf the same reasons.

A scalar-typed query (`1`, `time()`, `scalar(...)`) cannot be label_replace'd: it is wrapped as
`vector(<query>)`, whose one series with no labels holds the same sample a scalar answer does. A query is
sent alone (never batched) when its type is neither instant vector nor scalar (a range vector, a string: its
error then reads as today), when it does not parse or is past `syntax`'s safety bounds, or when it
mentions the index label's name (its series could already carry it). The type is decided offline by
promql-parser. Nothing here sends anything: the runner (`prometheus`) sends the batches and falls back to
halves and single queries when one fails.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass
from enum import Enum

import promql_parser

from plumbing.numbers import ascii_int
from plumbing.prometheus.answer import BadAnswer, QueryResult, interpret_body, result_of
from plumbing.prometheus.syntax import MAX_QUERY_CHARS, MAX_QUERY_NESTING, MAX_QUERY_OPERATORS, shape

__all__ = ["BATCH_LABEL", "Batch", "Form", "Plan", "batch_form", "plan", "split_answer"]

BATCH_LABEL = "gpu_autoscaler_batch_index"
"""The label each query's series get in a batch (a name starting with `__` is reserved to Prometheus)."""


class Form(Enum):
    """How a query goes into a batch."""

    VECTOR = "vector"
    """An instant vector: label_replace'd as it is."""
    SCALAR = "scalar"
    """A scalar: wrapped in vector() first."""


def _value_type(expr: object) -> str | None:
    """`vector`, `scalar`, `matrix` or `string` for a parsed expression; None for one not known here."""
    if isinstance(expr, promql_parser.NumberLiteral):
        return "scalar"
    if isinstance(expr, promql_parser.StringLiteral):
        return "string"
    if isinstance(expr, promql_parser.VectorSelector | promql_parser.AggregateExpr):
        return "vector"
    if isinstance(expr, promql_parser.MatrixSelector | promql_parser.SubqueryExpr):
        return "matrix"
    if isinstance(expr, promql_parser.ParenExpr | promql_parser.UnaryExpr):
        return _value_type(expr.expr)
    if isinstance(expr, promql_parser.BinaryExpr):
        sides = (_value_type(expr.lhs), _value_type(expr.rhs))
        if None in sides:
            return None
        return "scalar" if sides == ("scalar", "scalar") else "vector"
    if isinstance(expr, promql_parser.Call):
        kind = expr.func.return_type
        if kind == promql_parser.ValueType.Scalar:
            return "scalar"
        if kind == promql_parser.ValueType.Vector:
            return "vector"
        return None
    return None


def batch_form(query: str) -> Form | None:
    """How `query` can be batched, or None when it must be sent alone."""
    if BATCH_LABEL in query or len(query) > MAX_QUERY_CHARS:
        return None
    measured = shape(query)
    if measured.nesting > MAX_QUERY_NESTING or measured.operators > MAX_QUERY_OPERATORS:
        return None
    try:
        expr = promql_parser.parse(query)
    except (ValueError, TypeError, RuntimeError, OverflowError):
        return None  # sent alone, so Prometheus' own error message is the one reported
    kind = _value_type(expr)
    return Form.VECTOR if kind == "vector" else Form.SCALAR if kind == "scalar" else None


def _wrapped(query: str, form: Form, index: int) -> str:
    # The line break ends a `# comment` the query may close with before the wrapper's own arguments.
    inner = f"{query}\n" if form is Form.VECTOR else f"vector({query}\n)"
    return f'label_replace({inner}, "{BATCH_LABEL}", "{index}", "", "")'


def _balanced_or(parts: Sequence[str]) -> str:
    """`parts` joined by `or` as a balanced tree, `(a or b) or (c or d)`: the same series in the same order as
    the chain `a or b or c or d`, whose cost in Prometheus grows with the square of its length (each `or`
    copies its whole left side, which grows along the chain); the tree's grows as n log n. 10,000 rules in
    batches of 100: Prometheus' CPU per sync went from about 1.6 s to 1.0 s. Each subtree's parentheses
    stand on lines of their own, after a query's closing line break."""
    if len(parts) == 1:
        return parts[0]
    middle = len(parts) // 2
    return f"(\n{_balanced_or(parts[:middle])}\n)\nor\n(\n{_balanced_or(parts[middle:])}\n)"


@dataclass(frozen=True)
class Batch:
    """Queries sent as one request; `text` is the PromQL sent."""

    queries: tuple[str, ...]
    forms: tuple[Form, ...]

    @property
    def text(self) -> str:
        return _balanced_or([_wrapped(q, f, i)
                             for i, (q, f) in enumerate(zip(self.queries, self.forms, strict=True))])

    def halves(self) -> tuple[Batch, Batch]:
        middle = len(self.queries) // 2
        return (Batch(self.queries[:middle], self.forms[:middle]),
                Batch(self.queries[middle:], self.forms[middle:]))


@dataclass(frozen=True)
class Plan:
    """A sync's distinct queries: those sent alone and the batches of the others."""

    alone: tuple[str, ...]
    batches: tuple[Batch, ...]


def plan(queries: Iterable[str], forms: dict[str, Form | None], size: int, max_bytes: int,
         alone: Collection[str] = ()) -> Plan:
    """Distinct `queries` packed into batches of at most `size` queries and about `max_bytes` of PromQL.

    `forms` caches `batch_form` across syncs (the caller owns and bounds it); queries in `alone` (rules that
    opted out) and those that cannot be batched are sent alone; so is every query when `size` <= 1, and a
    batch of one (sent as the query itself, not wrapped)."""
    single: list[str] = []
    batches: list[Batch] = []
    current: list[tuple[str, Form]] = []
    current_bytes = 0

    def flush() -> None:
        nonlocal current, current_bytes
        if len(current) == 1:
            single.append(current[0][0])
        elif current:
            batches.append(Batch(tuple(q for q, _ in current), tuple(f for _, f in current)))
        current, current_bytes = [], 0

    for query in dict.fromkeys(queries):
        form = None
        if size > 1 and query not in alone:
            if query not in forms:
                forms[query] = batch_form(query)
            form = forms[query]
        if form is None:
            single.append(query)
            continue
        cost = len(query.encode()) + 64  # the wrapper and the `or`
        if current and (len(current) >= size or current_bytes + cost > max_bytes):
            flush()
        current.append((query, form))
        current_bytes += cost
    flush()
    return Plan(tuple(single), tuple(batches))


def split_answer(body: object, batch: Batch) -> dict[str, QueryResult]:
    """Each query's result from a batch's successful answer; BadAnswer when the answer is not one a batch
    gives (then the caller sends smaller batches)."""
    result = result_of(body, "vector")
    groups: list[list[object]] = [[] for _ in batch.queries]
    for entry in result:
        if not isinstance(entry, dict):
            raise BadAnswer("a series of a batch is not an object")
        metric = entry.get("metric")
        if not isinstance(metric, dict):
            raise BadAnswer("a series of a batch has no labels")
        index = metric.get(BATCH_LABEL)
        position = ascii_int(index) if isinstance(index, str) else None
        if position is None or position >= len(groups):
            raise BadAnswer(f"a series of a batch has no valid {BATCH_LABEL} label")
        labels = {k: v for k, v in metric.items() if k != BATCH_LABEL}
        groups[position].append({**entry, "metric": labels})
    return {query: interpret_body({"status": "success", "data": {"resultType": "vector", "result": group}})
            for query, group in zip(batch.queries, groups, strict=True)}
