"""Reading a metric trace (CSV) for `simulate`: the whole text checked and kept by column.

A month of 15 s syncs is 172,800 rows: read row by row, with an object per cell, it took over a second. The
columns of a text that programs write (no quotes, blank lines or errors) are taken with str.split and
converted with map(float), a list per column; anything unusual is read row by row (`_parse_rows`), which is
where every message comes from, so both ways accept and refuse the same texts with the same messages
(property-tested). At most MAX_TRACE_BYTES are read and MAX_TRACE_ROWS rows kept.
"""

from __future__ import annotations

import csv
import io
import math
import operator
from collections.abc import Iterator
from dataclasses import dataclass
from typing import cast

from autoscaler.errors import Problem, TraceError
from autoscaler.policy import MetricObservation, MetricSpec, Rule
from autoscaler.policy.capacity import CapacityObservation
from plumbing import yamlsafe

EMPTY_CELL_ERROR = "empty cell in the trace (query failed)"
CAPACITY_COLUMN = "capacity"
MAX_TRACE_BYTES = 16 * 1024 * 1024
"""A month of 15 s syncs with three metrics is about 6 MB."""
MAX_TRACE_ROWS = 200_000
"""Over a month of 15 s syncs (172,800); each row costs a few hundred bytes in memory."""
MAX_TRACE_SECONDS = 1e10
"""|t| bound (317 years): any real trace fits, and time arithmetic on it stays exact to the millisecond."""
MAX_NUMBER_LENGTH = 64
"""Characters of one cell: 1e308 and any decimal fit; thousands of digits are not a measurement."""
TRACE_LIMITS = yamlsafe.YamlLimits(max_bytes=MAX_TRACE_BYTES)


@dataclass(frozen=True, slots=True)
class TraceRow:
    """One sync of the trace: `t` as written (echoed in the output) and parsed, and what each query gave."""

    t_text: str
    t: float
    observations: tuple[MetricObservation, ...]
    capacity: CapacityObservation | None = None
    """The free GPUs of the `capacity` column (None: the trace has none; the guard is off)."""


@dataclass(frozen=True, slots=True)
class Trace:
    """The whole trace by column, in row order: a month is 172,800 rows, and columns cost a list each where
    rows cost a few objects each. `values[k]` is metric `rule.metrics[k]`: None for a failed query, 0.0 for
    an empty cell of a metric with whenEmpty: zero."""

    t_text: list[str]
    times: list[float]
    values: tuple[list[float | None], ...]
    capacity: list[float | None] | None
    """The `capacity` column (None: the trace has none)."""

    def rows(self, rule: Rule) -> list[TraceRow]:
        """The trace row by row, as `replay` (the controller's own plan) takes it."""
        names = [m.name for m in rule.metrics]
        capacity = self.capacity or [None] * len(self.times)
        by_row = zip(*self.values, strict=True)
        return [
            TraceRow(t_text, t, tuple(MetricObservation(name, value, None if value is not None
                                                        else EMPTY_CELL_ERROR)
                                      for name, value in zip(names, values, strict=True)),
                     None if self.capacity is None else _capacity(free))
            for t_text, t, free, values in zip(self.t_text, self.times, capacity, by_row, strict=True)
        ]


def _capacity(free: float | None) -> CapacityObservation:
    return CapacityObservation(free, (), None if free is not None else EMPTY_CELL_ERROR)


def read_trace(path: str, rule: Rule) -> Trace:
    """Read and validate the whole trace; TraceError names the file, line and column of the first problem.

    At most MAX_TRACE_BYTES are read and MAX_TRACE_ROWS rows kept, so a hostile trace is one message, never a
    machine out of memory.
    """
    try:
        text = yamlsafe.read_text(path, TRACE_LIMITS, "trace")
    except yamlsafe.YamlFileError as exc:
        raise TraceError(Problem(path, exc.line, "file", exc.message)) from exc
    # a spreadsheet's "CSV UTF-8" export starts with a BOM, which must not end up in 't'
    return parse_trace(text.removeprefix("\ufeff"), path, rule)


def parse_trace(text: str, path: str, rule: Rule) -> Trace:
    """The trace by column. Whole columns are converted at once; anything unusual in them (an empty `t`, a
    bad number, a ragged or blank row, a CSV error) sends the trace through `_parse_rows`, which checks row by
    row and raises the TraceError naming the first problem, or accepts what is only unusual."""
    header = _read_header(csv.reader(io.StringIO(text, newline="")), path, rule)
    columns = _data_columns(text, len(header))
    trace = None if columns is None else _parse_columns(columns, header, rule)
    return trace if trace is not None else _parse_rows(text, path, rule)


def _data_columns(text: str, width: int) -> list[list[str]] | None:
    """Each column's cells below the header, as csv.reader reads them; None for no rows, a ragged or blank
    row or a CSV error (`_parse_rows` reports or skips them).

    A text without quotes, bare CRs or NULs (what programs write) has one row per line and one cell per
    comma, so its columns are slices of one str.split: a month is read at the speed of C, not of a loop.
    """
    if max(text.count("\n"), text.count("\r")) > MAX_TRACE_ROWS + 1:
        return None  # too many rows: refused row by row, as it streams, before a list of millions is made
    if '"' not in text and "\0" not in text:
        plain = text.replace("\r\n", "\n") if "\r" in text else text
        if "\r" not in plain:
            body = plain.partition("\n")[2].removesuffix("\n")
            lines = body.split("\n")
            commas = list(map(operator.methodcaller("count", ","), lines))
            if not body or commas.count(width - 1) != len(lines):
                return None
            cells = body.replace("\n", ",").split(",")
            return [cells[k::width] for k in range(width)]
    try:
        rows = list(csv.reader(io.StringIO(text, newline="")))[1:]
    except csv.Error:
        return None
    if not rows or any(len(cells) != width for cells in rows):
        return None
    return [list(map(operator.itemgetter(k), rows)) for k in range(width)]


def _parse_columns(columns: list[list[str]], header: list[str], rule: Rule) -> Trace | None:
    """The trace from whole columns, or None where `_parse_rows` must look (and may refuse)."""
    if len(columns[0]) > MAX_TRACE_ROWS:
        return None
    texts = [list(map(str.strip, column)) for column in columns]
    numbers = dict(zip(header, map(_numbers, texts), strict=True))
    times = numbers["t"]
    if any(column is None for column in numbers.values()) or times is None or None in times:
        return None
    moments = cast(list[float], times)
    if min(moments) < -MAX_TRACE_SECONDS or max(moments) > MAX_TRACE_SECONDS:
        return None
    if not all(map(operator.le, moments, moments[1:])):
        return None
    values = tuple(_when_empty(m, cast(list[float | None], numbers[m.name])) for m in rule.metrics)
    return Trace(texts[0], moments, values, numbers.get(CAPACITY_COLUMN))


def _numbers(texts: list[str]) -> list[float | None] | None:
    """A stripped column's numbers (None for an empty cell), or None if a cell is not a finite number that
    `_number` accepts. Empty cells (failed queries) are rare: found by str methods, not a loop in Python."""
    if max(map(len, texts)) > MAX_NUMBER_LENGTH:
        return None
    empty = []
    index = -1
    for _ in range(texts.count("")):
        index = texts.index("", index + 1)
        empty.append(index)
    if empty:
        texts = texts.copy()
        for index in empty:
            texts[index] = "0"
    try:
        numbers: list[float | None] = list(map(float, texts))
    except ValueError:
        return None
    if not all(map(math.isfinite, cast(list[float], numbers))):
        return None
    for index in empty:
        numbers[index] = None
    return numbers


def _when_empty(metric: MetricSpec, values: list[float | None]) -> list[float | None]:
    if metric.when_empty == "zero" and None in values:
        return [0.0 if value is None else value for value in values]
    return values


def _parse_rows(text: str, path: str, rule: Rule) -> Trace:
    """The trace checked row by row: the first problem raises a TraceError naming its line and column."""
    reader = csv.reader(io.StringIO(text, newline=""))
    header = _read_header(reader, path, rule)
    columns = header[1:]
    width = len(header)
    zero_when_empty = {m.name: m.when_empty == "zero" for m in rule.metrics}
    t_texts: list[str] = []
    times: list[float] = []
    values: dict[str, list[float | None]] = {name: [] for name in columns}
    previous: tuple[float, str] | None = None
    try:
        for cells in reader:
            line = reader.line_num
            if not cells or (len(cells) == 1 and not cells[0].strip()):
                continue
            if len(cells) != width:
                raise TraceError(Problem(path, line, "row",
                                         f"expected {width} cells ({','.join(header)}) (got {len(cells)})"))
            t_text = cells[0].strip()
            t = _number(path, line, "t", t_text)
            if t is None:
                raise TraceError(Problem(path, line, "t", "expected a time in seconds (got an empty cell)"))
            if abs(t) > MAX_TRACE_SECONDS:
                raise TraceError(Problem(path, line, "t", f"expected a time within ±{MAX_TRACE_SECONDS:g} s "
                                                          f"(got {t_text})"))
            if previous is not None and t < previous[0]:
                raise TraceError(Problem(path, line, "t", f"goes backwards ({t_text} < {previous[1]})"))
            previous = (t, t_text)
            row = [_number(path, line, name, cell.strip())
                   for name, cell in zip(columns, cells[1:], strict=True)]
            if len(times) == MAX_TRACE_ROWS:
                raise TraceError(Problem(path, line, "row", f"more than {MAX_TRACE_ROWS:,} rows; "
                                                            "split the trace"))
            t_texts.append(t_text)
            times.append(t)
            for name, value in zip(columns, row, strict=True):
                zero = value is None and zero_when_empty.get(name, False)
                values[name].append(0.0 if zero else value)
    except csv.Error as exc:
        raise TraceError(Problem(path, reader.line_num, "row", f"not valid CSV: {exc}")) from exc
    return Trace(t_texts, times, tuple(values[m.name] for m in rule.metrics), values.get(CAPACITY_COLUMN))


def _read_header(reader: Iterator[list[str]], path: str, rule: Rule) -> list[str]:
    try:
        header = [cell.strip() for cell in next(reader)]
    except StopIteration:
        raise TraceError(Problem(path, 1, "header",
                                 "the trace is empty (expected a header 't,<metric>,...')")) from None
    except csv.Error as exc:
        raise TraceError(Problem(path, 1, "header", f"not valid CSV: {exc}")) from exc
    expected = ",".join(("t", *(m.name for m in rule.metrics)))
    if not header or header[0] != "t":
        raise TraceError(Problem(path, 1, "header",
                                 f"the first column must be 't' (expected e.g. {expected!r})"))
    known = {m.name for m in rule.metrics}
    seen: set[str] = set()
    for name in header[1:]:
        if name in seen:
            raise TraceError(Problem(path, 1, name, "duplicate column"))
        if name == CAPACITY_COLUMN and rule.capacity is None:
            raise TraceError(Problem(path, 1, name, f"a capacity column, but rule {rule.name!r} has no "
                                                    "capacity guard (capacity: {query, gpusPerReplica})"))
        if name not in known and name != CAPACITY_COLUMN:
            raise TraceError(Problem(path, 1, name, f"unknown metric column: rule {rule.name!r} has metrics "
                                                    f"{', '.join(sorted(known))}"))
        seen.add(name)
    missing = [m.name for m in rule.metrics if m.name not in seen]
    if missing:
        raise TraceError(Problem(path, 1, "header", f"no column for metric(s) {', '.join(missing)} of rule "
                                                    f"{rule.name!r} (expected {expected!r})"))
    return header


def _number(path: str, line: int, field: str, text: str) -> float | None:
    if not text:
        return None
    if len(text) > MAX_NUMBER_LENGTH:
        raise TraceError(Problem(path, line, field, f"a number {len(text):,} characters long "
                                                    f"(at most {MAX_NUMBER_LENGTH})"))
    try:
        value = float(text)
    except ValueError:
        raise TraceError(Problem(path, line, field, f"expected a number (got {text!r})")) from None
    if not math.isfinite(value):
        raise TraceError(Problem(path, line, field,
                                 f"expected a finite number (got {text!r}); "
                                 "leave the cell empty for a failed query"))
    return value
