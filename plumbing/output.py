"""The one output flag of every command that prints a table or a result: `-o table|wide|json|csv`.

People read `table` (aligned columns) and `wide` (more of them); programs read `json` (one document, its
shape documented with the command, `"schemaVersion"` at the top) and `csv` (one row per line, where rows are
the point). `gpu-exporter status`, `gpu-autoscaler status|check|simulate|tune` and every `gpu-fleet`
subcommand take the flag from here, so `-o json` means the same everywhere. The tables and CSV themselves are
written by `plumbing.display`.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from typing import Any

__all__ = ["CSV", "FORMATS", "JSON", "SCHEMA_VERSION", "TABLE", "WIDE", "add_output_arguments", "document",
           "failure_json"]

TABLE = "table"
WIDE = "wide"
JSON = "json"
CSV = "csv"
FORMATS: tuple[str, ...] = (TABLE, WIDE, JSON, CSV)

SCHEMA_VERSION = 1
"""The `schemaVersion` of every JSON document a command prints: raised when a field changes meaning or goes
away (a new field does not raise it), so a script can refuse a shape it does not know."""


class _DeprecatedJson(argparse.Action):
    """`--json`, the old spelling of `-o json`: works, and says on stderr what to write instead."""

    def __init__(self, option_strings: Sequence[str], dest: str, prog: str = "", **kwargs: Any) -> None:
        super().__init__(option_strings, dest, nargs=0, **kwargs)
        self.prog = prog

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: object, option_string: str | None = None) -> None:
        print(f"{self.prog or parser.prog}: --json is deprecated: use -o json", file=sys.stderr)
        setattr(namespace, self.dest, JSON)


def add_output_arguments(parser: argparse.ArgumentParser, formats: Sequence[str] = FORMATS,
                         default: str = TABLE, what: str = "", *, headers: bool = True,
                         json_alias: str = "hidden") -> None:
    """`-o/--output FORMAT` among `formats`, its old name `--json` (`json_alias`: "hidden", kept silently;
    "deprecated", kept with a line on stderr; "none") and, with `headers`, `--no-headers`."""
    parser.add_argument("-o", "--output", choices=formats, default=default, metavar="FORMAT",
                        help=f"{' | '.join(formats)} (default {default}){what}")
    if json_alias == "hidden":
        parser.add_argument("--json", dest="output", action="store_const", const=JSON, help=argparse.SUPPRESS)
    elif json_alias == "deprecated":
        parser.add_argument("--json", dest="output", action=_DeprecatedJson, prog=parser.prog,
                            help="deprecated spelling of -o json")
    if headers:
        parser.add_argument("--no-headers", action="store_true",
                            help="leave out the header line of table, wide and csv output")


def document(**fields: object) -> dict[str, object]:
    """A JSON document of a command: `schemaVersion` first, then `fields`."""
    return {"schemaVersion": SCHEMA_VERSION, **fields}


def failure_json(message: str, exit_code: int, **extra: object) -> str:
    """The document printed on stdout for a failure under `-o json` (the message also goes to stderr), so a
    script that parses stdout never reads an empty document."""
    return json.dumps(document(error=message, exit_code=exit_code, **extra), indent=2)
