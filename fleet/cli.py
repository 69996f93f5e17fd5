"""`gpu-fleet` command line: a registry of subcommands, each a module `fleet/commands/<name>.py`.

A subcommand module exposes the three names of `gpu-autoscaler`'s `check`, `simulate` and `tune`: `HELP: str`
(one line), `add_arguments(parser) -> None` and `run(args) -> int` (the exit status: 0 ok, 1 not found / not
enough / timed out), and may expose `EPILOG` (the end of its `--help`; default: the exit statuses). To add
one, add its name to SUBCOMMANDS.
A `FleetError` raised by `run`, and a flag argparse refuses, become one message on stderr and an exit status
(2: bad input, or a Prometheus that cannot be reached or answers nonsense), never a traceback; with
`-o json` the same failure is also a JSON document on stdout (fleet/output.py).
"""

from __future__ import annotations

import argparse
import importlib
import logging
import sys
from collections.abc import Sequence
from types import ModuleType
from typing import NoReturn

from fleet.errors import EXIT_CODES, EXIT_USAGE, FleetError
from fleet.output import JSON, add_version_argument, failure_json, wants_json
from plumbing.cli import HintingParser, fail, silence_stdout
from plumbing.display import visible

PROG = "gpu-fleet"
COMMANDS = "fleet.commands"
"""The package of the subcommands' modules."""

SUBCOMMANDS: tuple[str, ...] = (
    "status",
    "select",
    "wait",
    "estimate",
    "report",
    "export",
)
"""The subcommands, in the order `--help` lists them: each names the module `fleet.commands.<name>`."""


def load(name: str) -> ModuleType:
    """The module of subcommand `name`, checked for the three names every subcommand exposes."""
    module = importlib.import_module(f"{COMMANDS}.{name}")
    missing = [attr for attr in ("HELP", "add_arguments", "run") if not hasattr(module, attr)]
    if missing:
        raise TypeError(f"{COMMANDS}.{name} lacks {', '.join(missing)}")
    return module


class Refused(Exception):
    """A command line argparse refused: its usage line and message, printed by `main`."""

    def __init__(self, prog: str, usage: str, message: str) -> None:
        super().__init__(message)
        self.prog = prog
        self.usage = usage


class FleetParser(HintingParser):
    """Raises `Refused` (with the hint: plumbing.cli) instead of printing and exiting, so `main` can answer in
    JSON too."""

    def error(self, message: str) -> NoReturn:
        raise Refused(self.prog, self.format_usage(), self.hinted(message))


def build_parser(subcommands: Sequence[str] = SUBCOMMANDS) -> argparse.ArgumentParser:
    parser = FleetParser(
        prog=PROG,
        description="The GPUs of a whole cluster, from the exporter's series in Prometheus.",
        epilog=EXIT_CODES, formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_version_argument(parser, PROG)
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name in subcommands:
        module = load(name)
        child = subparsers.add_parser(name, help=module.HELP, description=module.HELP,
                                      epilog=getattr(module, "EPILOG", EXIT_CODES),
                                      formatter_class=argparse.RawDescriptionHelpFormatter)
        add_version_argument(child, PROG)
        module.add_arguments(child)
        child.set_defaults(run=module.run, prog=f"{PROG} {name}")
    return parser


def main(argv: Sequence[str] | None = None, subcommands: Sequence[str] = SUBCOMMANDS) -> int:
    """Parse, dispatch, and turn FleetError into one message on stderr and its exit status."""
    args_list = list(sys.argv[1:] if argv is None else argv)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    try:
        args = build_parser(subcommands).parse_args(args_list)
    except Refused as refused:
        sys.stderr.write(refused.usage)
        print(f"{refused.prog}: error: {visible(str(refused))}", file=sys.stderr)
        if wants_json(args_list):
            print(failure_json(str(refused), EXIT_USAGE))
        return EXIT_USAGE
    try:
        return int(args.run(args))
    except FleetError as exc:
        sys.stdout.flush()
        if getattr(args, "output", None) == JSON:
            print(failure_json(str(exc), exc.exit_code), flush=True)
        fail(args.prog, str(exc))
        return exc.exit_code
    except BrokenPipeError:  # `gpu-fleet status | head`: the reader left, which is not an error
        silence_stdout()
        return 0
    except OSError as exc:  # a full disk, a file that vanished under --out: one message, not a traceback
        silence_stdout()  # what is left in stdout's buffer cannot be written either
        where = f" {exc.filename}" if exc.filename else ""
        return fail(args.prog, f"cannot write the output{where}: {exc.strerror or type(exc).__name__}")
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
