"""`gpu-autoscaler` command line: one small registry of subcommands, each living in its own module.

To add a subcommand, add one entry to SUBCOMMANDS naming a module that defines the three names every
subcommand of the three CLIs exposes (gpu-fleet's too): `HELP: str` (one line, the same as its entry here),
`add_arguments(parser: argparse.ArgumentParser) -> None` and `run(args: argparse.Namespace) -> int`. Only the
module of the subcommand being run is imported, so `check` never pays for the Kubernetes client.
Every ReportedError (ours, or the Prometheus client's) becomes its message on stderr and exit status 2, never
a traceback.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import os
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import cast

from plumbing.cli import EXIT_USAGE, HintingParser, add_version_argument, fail
from plumbing.errors import ReportedError
from plumbing.output import JSON, failure_json

PROG = "gpu-autoscaler"


@dataclass(frozen=True)
class Subcommand:
    """A subcommand: its one-line help (listed without importing the module) and the module (see above)."""

    help: str
    module: str


SUBCOMMANDS: dict[str, Subcommand] = {
    "check": Subcommand("validate a rules file; with --prometheus (or $PROMETHEUS_URL) also run every query "
                        "once", "autoscaler.cli.check"),
    "simulate": Subcommand("replay a metric trace (CSV) through a rule and print the replica count after "
                           "each sync", "autoscaler.cli.simulate"),
    "tune": Subcommand("replay a rule's metric history with candidate behaviors and targets; recommend the "
                       "cheapest", "autoscaler.cli.tune"),
    "run": Subcommand("run the controller: query Prometheus, decide, patch the scale of the targets",
                      "autoscaler.cli.run"),
    "status": Subcommand("show what the controller would decide now for every rule (read-only)",
                         "autoscaler.cli.status"),
}


def _chosen(argv: Sequence[str], subcommands: Mapping[str, Subcommand]) -> str | None:
    """The subcommand named on the command line (the first word not starting with '-'), if any."""
    for word in argv:
        if not word.startswith("-"):
            return word if word in subcommands else None
    return None


def build_parser(argv: Sequence[str] = (), subcommands: Mapping[str, Subcommand] = SUBCOMMANDS,
                 ) -> argparse.ArgumentParser:
    """The parser; the arguments of the chosen subcommand only (all of them when none is chosen)."""
    parser = HintingParser(
        prog=PROG,
        description="An autoscaler for GPU services that decides exactly what the Kubernetes HPA would.",
    )
    add_version_argument(parser, PROG)
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    chosen = _chosen(argv, subcommands)
    for name, sub in subcommands.items():
        if chosen is not None and chosen != name:
            subparsers.add_parser(name, help=sub.help, description=sub.help)  # listed, not loaded
            continue
        module = importlib.import_module(sub.module)
        child = subparsers.add_parser(name, help=sub.help, description=sub.help)
        cast(Callable[[argparse.ArgumentParser], None], module.add_arguments)(child)
        add_version_argument(child, PROG)
    return parser


def _handler(args: argparse.Namespace, subcommands: Mapping[str, Subcommand],
             ) -> Callable[[argparse.Namespace], int]:
    module = importlib.import_module(subcommands[args.command].module)
    return cast(Callable[[argparse.Namespace], int], module.run)


def main(argv: Sequence[str] | None = None, subcommands: Mapping[str, Subcommand] = SUBCOMMANDS) -> int:
    """Parse, dispatch, and turn ReportedError into one message on stderr and exit status 2."""
    args_list = list(sys.argv[1:] if argv is None else argv)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    args = build_parser(args_list, subcommands).parse_args(args_list)
    handler = _handler(args, subcommands)
    try:
        return handler(args)
    except ReportedError as exc:
        sys.stdout.flush()
        if getattr(args, "output", None) == JSON:  # stdout is never an empty document under -o json
            print(failure_json(str(exc), EXIT_USAGE), flush=True)
        return fail(None, str(exc))
    except BrokenPipeError:  # e.g. `simulate ... | head`: the reader left, which is not an error
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())  # so the interpreter's final flush does not fail again
        return 0
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
