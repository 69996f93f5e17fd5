"""The one output convention of every `gpu-fleet` subcommand: `-o table|wide|json|csv`, `--no-headers`,
`--version`, and JSON on failure too.

People read `table` (aligned columns) and `wide` (more of them); programs read `json` (numbers as numbers:
integers for indexes and byte counts, unix seconds for times) and `csv` (the same fields, one row per line).
Messages always go to stderr; with `-o json` a failure also prints `{"error": ..., "exit_code": ...}` on
stdout, so a script that parses stdout never reads an empty document. `--json` (and `--format` where a
subcommand had it) are kept as hidden aliases of `-o`.
"""

from __future__ import annotations

import argparse
import csv
import io
import json
from collections.abc import Mapping, Sequence
from importlib import metadata

TABLE = "table"
WIDE = "wide"
JSON = "json"
CSV = "csv"
FORMATS: tuple[str, ...] = (TABLE, WIDE, JSON, CSV)
DISTRIBUTION = "gpu-autoscaler"


def version() -> str:
    """The installed distribution's version ('unknown' when run from a tree that was never installed)."""
    try:
        return metadata.version(DISTRIBUTION)
    except metadata.PackageNotFoundError:
        return "unknown"


def add_version_argument(parser: argparse.ArgumentParser, prog: str) -> None:
    parser.add_argument("--version", action="version", version=f"{prog} {version()}",
                        help="print the version and exit")


def add_output_arguments(parser: argparse.ArgumentParser, formats: Sequence[str] = FORMATS,
                         default: str = TABLE, what: str = "") -> None:
    """`-o/--output FORMAT` (with the hidden `--json` alias) and `--no-headers`."""
    parser.add_argument("-o", "--output", choices=formats, default=default, metavar="FORMAT",
                        help=f"{' | '.join(formats)} (default {default}){what}")
    parser.add_argument("--json", dest="output", action="store_const", const=JSON, help=argparse.SUPPRESS)
    parser.add_argument("--no-headers", action="store_true",
                        help="leave out the header line of table, wide and csv output")


def wants_json(argv: Sequence[str]) -> bool:
    """Whether the command line asks for JSON output (read before argparse, for its own errors)."""
    for number, arg in enumerate(argv):
        if arg in ("--json", "-ojson", "--output=json", "--format=json"):
            return True
        if arg in ("-o", "--output", "--format") and number + 1 < len(argv) and argv[number + 1] == JSON:
            return True
    return False


def failure_json(message: str, exit_code: int, **extra: object) -> str:
    """The JSON document printed on stdout for a failure under `-o json`."""
    return json.dumps({"error": message, "exit_code": exit_code, **extra}, indent=2)


def aligned(header: Sequence[str], rows: Sequence[Sequence[str]], headers: bool = True) -> str:
    """Columns padded to their widest cell, two spaces apart; the last column unpadded."""
    shown = [tuple(header), *map(tuple, rows)] if headers else [tuple(r) for r in rows]
    return "\n".join(padded(shown, widths(shown, len(header))))


def widths(rows: Sequence[Sequence[str]], columns: int, at_least: Sequence[int] = ()) -> list[int]:
    """The width of each column but the last: its widest cell, and at least `at_least`'s."""
    return [max([len(r[i]) for r in rows] + list(at_least[i:i + 1]), default=0) for i in range(columns - 1)]


def padded(rows: Sequence[Sequence[str]], sizes: Sequence[int]) -> list[str]:
    """Each row's cells padded to `sizes`, two spaces apart, the last cell unpadded; no trailing blanks."""
    return [("  ".join(c.ljust(w) for c, w in zip(r[:-1], sizes, strict=True)) + "  " + r[-1]).rstrip()
            for r in rows]


def as_csv(records: Sequence[Mapping[str, object]], fields: Sequence[str], headers: bool = True) -> str:
    """RFC 4180 lines; None is empty, lists are joined with spaces."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    if headers:
        writer.writerow(fields)
    for record in records:
        writer.writerow(["" if record.get(f) is None else _cell(record.get(f)) for f in fields])
    return out.getvalue().rstrip("\n")


def _cell(value: object) -> object:
    if isinstance(value, list | tuple):
        return " ".join(str(v) for v in value)
    return value


def whole(value: float | None) -> int | None:
    """A byte count (or an index) as JSON wants it: an integer, None when unknown."""
    return None if value is None else round(value)
