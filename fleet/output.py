"""The one output convention of every `gpu-fleet` subcommand: `-o table|wide|json|csv`, `--no-headers`,
`--version`, and JSON on failure too.

People read `table` (aligned columns) and `wide` (more of them); programs read `json` (numbers as numbers:
integers for indexes and byte counts, unix seconds for times) and `csv` (the same fields, one row per line).
Tables and CSV are written by `plumbing.display`: control characters of a label shown as escapes, a text cell
a spreadsheet would read as a formula prefixed with a single quote.
Messages always go to stderr; with `-o json` a failure also prints `{"error": ..., "exit_code": ...}` on
stdout, so a script that parses stdout never reads an empty document. `--json` (and `--format` where a
subcommand had it) are kept as hidden aliases of `-o`.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence

from fleet.errors import UsageError
from plumbing.cli import add_version_argument
from plumbing.display import aligned, as_csv, padded, widths
from plumbing.output import CSV, FORMATS, JSON, TABLE, WIDE, add_output_arguments, failure_json

__all__ = ["CSV", "FORMATS", "JSON", "TABLE", "WIDE", "add_output_arguments", "add_version_argument",
           "aligned", "as_csv", "failure_json", "output_of", "padded", "wants_json", "whole",
           "widths"]


def output_of(args: argparse.Namespace, formats: tuple[str, ...], default: str) -> str:
    """`-o` (or its old name `--format`), checked against `formats`; UsageError naming the flag used."""
    flag, value = ("-o", args.output) if args.output is not None else ("--format", args.format)
    if value is None:
        return default
    if value not in formats:
        raise UsageError(f"{flag}: expected one of {', '.join(formats)} (got {value!r})")
    return str(value)


def wants_json(argv: Sequence[str]) -> bool:
    """Whether the command line asks for JSON output (read before argparse, for its own errors)."""
    for number, arg in enumerate(argv):
        if arg in ("--json", "-ojson", "--output=json", "--format=json"):
            return True
        if arg in ("-o", "--output", "--format") and number + 1 < len(argv) and argv[number + 1] == JSON:
            return True
    return False


def whole(value: float | None) -> int | None:
    """A byte count (or an index) as JSON wants it: an integer, None when unknown."""
    return None if value is None else round(value)
