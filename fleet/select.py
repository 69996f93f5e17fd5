"""`gpu-fleet select`: the best free GPUs for a job, and where to tell Kubernetes to put it.

Prints the chosen GPUs (the status table's columns) and a nodeSelector (or a nodeAffinity when they span
nodes) to paste into the pod spec; `--json` prints both as one object. Exit 1 when there are not enough.
"""

from __future__ import annotations

import argparse
import json
import sys

import yaml

from fleet.connection import add_connection_arguments, connect
from fleet.errors import EXIT_NOT_FOUND, EXIT_OK, UsageError
from fleet.inventory import gather
from fleet.selection import Request, Selection, placement, select
from fleet.table import as_json, render
from fleet.units import parse_bytes
from plumbing.numbers import ascii_int

HELP = "choose the best free GPUs (availability score) and print a nodeSelector for them"
MAX_GPUS = 4096


def add_request_arguments(parser: argparse.ArgumentParser) -> None:
    """The flags of a request, shared with `wait`."""
    parser.add_argument("--gpus", required=True, metavar="N", help="how many GPUs")
    parser.add_argument("--min-free-memory", metavar="SIZE",
                        help="free memory each GPU must have, e.g. 40GiB, 80G, 512MiB")
    parser.add_argument("--model", metavar="NAME",
                        help="only GPUs whose model name contains NAME (case-insensitive), e.g. H100")
    parser.add_argument("--same-node", action="store_true", help="all GPUs on one node")
    parser.add_argument("--json", action="store_true", help="print the choice as JSON")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_request_arguments(parser)
    add_connection_arguments(parser)


def request_of(args: argparse.Namespace) -> Request:
    """The request the flags describe; UsageError naming the flag otherwise."""
    text = str(args.gpus)
    count = ascii_int(text.strip())
    if count is None or not 1 <= count <= MAX_GPUS:
        raise UsageError(f"--gpus: expected a whole number from 1 to {MAX_GPUS} (got {text[:40]!r})")
    memory = 0
    if args.min_free_memory is not None:
        try:
            memory = parse_bytes(args.min_free_memory)
        except ValueError as exc:
            raise UsageError(f"--min-free-memory: {exc}") from None
    model = args.model.strip() if args.model is not None else None
    if model == "":
        raise UsageError("--model: expected a model name such as H100 (got an empty string)")
    return Request(count, memory, model, bool(args.same_node))


def report(selection: Selection, as_json_output: bool) -> str:
    """What `select` (and `wait`, once found) prints on stdout for a selection that succeeded."""
    where = placement(selection)
    if as_json_output:
        return json.dumps({"gpus": [as_json(g) for g in selection.chosen], **where}, indent=2)
    return f"{render(selection.chosen)}\n\n{yaml.safe_dump(where, sort_keys=False).rstrip()}"


def run(args: argparse.Namespace) -> int:
    request = request_of(args)
    with connect(args) as client:
        selection = select(gather(client), request)
    if not selection.ok:
        print(selection.summary(), file=sys.stderr)
        return EXIT_NOT_FOUND
    print(report(selection, args.json))
    return EXIT_OK
