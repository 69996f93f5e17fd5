"""`gpu-fleet export`: the per-GPU series behind the report, one row per GPU and step, streamed to stdout as
CSV (the default), JSON (an array of objects; numbers as numbers: integer GPU indexes and byte counts; a
series without a value at that step null/empty), or aligned columns for people (`table`; `wide` adds the
UUID and model). A streamed table is aligned chunk by chunk: a column only widens, from the chunk that needs
it on, so the header is written before the whole window is read. Labels are shown as `plumbing.display`
shows them: control characters as escapes, a CSV text cell a spreadsheet would run as a formula quoted.

Bounded: at most `MAX_STEPS` steps (window / step + 1); a larger window x step is refused before any query.
The window is read in chunks of `CHUNK_STEPS` steps, one range query per series per chunk, and each chunk's
rows are written before the next is read. Rows are ordered by time, node, GPU index.
"""

from __future__ import annotations

import argparse
import csv
import itertools
import json
import math
import sys
import time
from collections.abc import Iterable, Iterator, Sequence
from typing import TextIO

from fleet.errors import UsageError
from fleet.output import CSV, FORMATS, JSON, TABLE, WIDE, output_of, padded, whole, widths
from fleet.querying.connection import add_connection_arguments, connect
from fleet.querying.prom import FleetPrometheus
from fleet.reporting.fetch import MAX_ANSWER_BYTES, gpus_in_window
from fleet.reporting.timeline import Window, add_window_arguments, merge, parse_span, parse_time
from fleet.units import GIB
from plumbing.cli import duration
from plumbing.display import csv_cell
from plumbing.numbers import ascii_int

HELP = "the per-GPU series behind the report, one row per GPU and step, as CSV, JSON or a table on stdout"
MAX_STEPS = 10_000
"""At most this many steps per export (a week every 60 s is 10,081: use --step 2m); rows = steps x GPUs."""
CHUNK_STEPS = 720
ROWS_PER_CHUNK = 50_000
"""Rows (GPUs x steps) held at once: a chunk's steps shrink as the fleet grows, so an export stays under
256 MiB of memory whatever the fleet."""
SERIES: dict[str, str] = {
    "utilization": "gpu_utilization_ratio",
    "memory_used_bytes": "gpu_memory_used_bytes",
    "memory_total_bytes": "gpu_memory_total_bytes",
    "power_watts": "gpu_power_usage_watts",
    "temperature_celsius": "gpu_temperature_celsius",
    "health": "gpu_health_state == 1",
}
"""Column -> query; `health` is the name of the state whose series is 1."""
LABELS = ("node", "gpu", "uuid", "model", "namespace", "pod")
BYTE_COLUMNS = ("memory_used_bytes", "memory_total_bytes")
HEADINGS = {"utilization": "UTIL", "memory_used_bytes": "MEMORY USED", "memory_total_bytes": "MEMORY TOTAL",
            "power_watts": "POWER", "temperature_celsius": "TEMP", "health": "HEALTH"}
"""`-o table|wide`: each value column's header."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_connection_arguments(parser)
    add_window_arguments(parser, "1h")
    parser.add_argument("-o", "--output", metavar="FORMAT",
                        help=f"{' | '.join(FORMATS)} (default csv); table and wide are aligned chunk by "
                        "chunk as the rows stream; wide adds UUID and MODEL")
    parser.add_argument("--json", dest="output", action="store_const", const=JSON, help=argparse.SUPPRESS)
    parser.add_argument("--format", help=argparse.SUPPRESS)
    parser.add_argument("--no-headers", action="store_true",
                        help="leave out the header line of table, wide and csv output")
    parser.add_argument("--step", type=duration(1.0, 86400.0), default=60.0, metavar="DURATION",
                        help="seconds between two rows of a GPU, e.g. 60s, 5m (default 60s)")
    parser.add_argument("--series", metavar="NAME,...",
                        help=f"the value columns, comma-separated (default all: {','.join(SERIES)})")


def columns_of(text: str | None) -> list[str]:
    if text is None:
        return list(SERIES)
    names = [name.strip() for name in text.split(",") if name.strip()]
    unknown = [name for name in names if name not in SERIES]
    if unknown or not names:
        raise UsageError(f"--series: expected names from {', '.join(SERIES)} (got {text!r})")
    return list(dict.fromkeys(names))


def run(args: argparse.Namespace) -> int:
    args.output = output_of(args, FORMATS, CSV)
    columns = columns_of(args.series)
    since = parse_span(args.since)
    end = parse_time(args.until, time.time())
    window = Window(end - since, end, args.step)
    if window.points > MAX_STEPS:
        raise UsageError(f"--since {args.since} every {args.step:g}s is {window.points:,} steps, more than "
                         f"{MAX_STEPS:,}: shorten --since or lengthen --step")
    with connect(args, max_body_bytes=MAX_ANSWER_BYTES) as client:
        steps = chunk_steps(gpus_in_window(client, since, end))
        write(chunks(client, window, columns, steps), columns, args.output, sys.stdout,
              headers=not args.no_headers)
    return 0


def chunk_steps(gpus: int) -> int:
    """Steps per range query: at most CHUNK_STEPS, and at most ROWS_PER_CHUNK rows of all GPUs."""
    return max(1, min(CHUNK_STEPS, ROWS_PER_CHUNK // max(gpus, 1)))


def chunks(client: FleetPrometheus, window: Window, columns: Sequence[str],
           steps: int = CHUNK_STEPS) -> Iterator[list[dict[str, object]]]:
    """The rows of the window, chunk after chunk of `steps` steps, each chunk's in order; an answer of more
    than 4 times the rows a chunk should hold (a Prometheus that undercounts) is refused."""
    for first in range(0, window.points, steps):
        start = window.start + first * window.step
        end = min(window.end, start + (steps - 1) * window.step)
        table: dict[tuple[float, str, str], dict[str, object]] = {}
        for column in columns:
            series = client.matrix(SERIES[column], start, end, window.step, max_points=4 * ROWS_PER_CHUNK)
            for (node, uuid, *_), points in merge(series, window.step).items():
                for point in points:
                    row = table.get((point.t, node, uuid))
                    if row is None:
                        row = {"time": point.t, **{name: point.labels.get(name, "") for name in LABELS},
                               **dict.fromkeys(columns)}
                        table[(point.t, node, uuid)] = row
                    row[column] = point.labels.get("state", "") if column == "health" else point.value
        yield [table[key] for key in sorted(table, key=lambda k: (k[0], k[1], _index(table[k])))]


def _index(row: dict[str, object]) -> float:
    text = str(row.get("gpu", ""))
    index = ascii_int(text)
    return math.inf if index is None else float(index)


def write(parts: Iterable[list[dict[str, object]]], columns: Sequence[str], form: str, out: TextIO,
          headers: bool = True) -> None:
    """The rows in `-o form`, each chunk written as soon as it comes."""
    if form in (TABLE, WIDE):
        write_table(parts, columns, out, wide=form == WIDE, headers=headers)
    elif form == CSV:
        writer = csv.DictWriter(out, ["time", *LABELS, *columns], lineterminator="\n")
        if headers:
            writer.writeheader()
        for record in itertools.chain.from_iterable(parts):
            writer.writerow({key: csv_cell(_plain(value)) for key, value in record.items()})
    else:
        out.write("[")
        for number, record in enumerate(itertools.chain.from_iterable(parts)):
            out.write(("," if number else "") + "\n" + json.dumps(as_json(record), allow_nan=False))
        out.write("\n]\n")


def as_json(record: dict[str, object]) -> dict[str, object]:
    """A row as JSON carries it: the GPU index and byte counts as integers (None when not one)."""
    out = dict(record)
    out["gpu"] = ascii_int(str(record.get("gpu", "")))
    for column in BYTE_COLUMNS:
        value = record.get(column)
        if isinstance(value, float | int):
            out[column] = whole(value)
    return out


def write_table(parts: Iterable[list[dict[str, object]]], columns: Sequence[str], out: TextIO, *,
                wide: bool = False, headers: bool = True) -> None:
    """Aligned columns for people: the header with the first chunk; a column only widens, from the chunk
    that needs it on."""
    labels = ["TIME", "NODE", "GPU", *(["UUID", "MODEL"] if wide else [])]
    header = [*labels, *(HEADINGS[c] for c in columns), "POD"]
    sizes: list[int] = []
    pending = [header] if headers else []
    for part in parts:
        lines = [*pending, *(table_row(record, columns, wide) for record in part)]
        sizes = widths(lines, len(header), sizes)
        out.writelines(line + "\n" for line in padded(lines, sizes))
        out.flush()
        pending = []
    if pending:  # no chunk at all: the header alone, as csv
        out.write(padded(pending, widths(pending, len(header)))[0] + "\n")


def table_row(record: dict[str, object], columns: Sequence[str], wide: bool = False) -> list[str]:
    """One row as `-o table|wide` shows it: UTC time, values in the units `status` shows, `-` for none."""
    t = record["time"]
    stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t)) if isinstance(t, float | int) else str(t)
    labels = [stamp, str(record["node"]), str(record["gpu"])]
    if wide:
        labels += [str(record["uuid"]), str(record["model"]) or "-"]
    pod = f"{record['namespace']}/{record['pod']}" if record.get("pod") else "-"
    return [*labels, *(cell(c, record.get(c)) for c in columns), pod]


def cell(column: str, value: object) -> str:
    """A value in the units `status` shows: 42%, 12.3 GiB, 300W, 65C, a health state; `-` for none."""
    if isinstance(value, bool) or not isinstance(value, float | int):
        return "-" if value in (None, "") else str(value)
    if column == "utilization":
        return f"{value * 100:.0f}%"
    if column in BYTE_COLUMNS:
        return f"{value / GIB:.1f} GiB"
    return f"{value:.0f}{'W' if column == 'power_watts' else 'C'}"


def _plain(value: object) -> object:
    return int(value) if isinstance(value, float) and value.is_integer() else value
