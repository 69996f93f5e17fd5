"""One choice of GPUs, shared by `select`, `wait` and `estimate --then-select/--then-wait`: the request their
flags describe, and the chosen GPUs printed with where to tell Kubernetes (or Docker) to put the job.

Prints the chosen GPUs (the status table's columns) and a nodeSelector (or a nodeAffinity when they span
nodes) to paste into the pod spec; `-o json` prints both as one object, `-o kubernetes` the placement alone,
`-o docker` the `--gpus '"device=UUID,..."'` argument of `docker run` (one node: it implies --same-node),
shell-quoted; with it, a GPU whose uuid label is not a GPU or MIG UUID (`selection.DEVICE_ID`) is not
eligible, so it never reaches a command line (the `docker` field of `-o json` leaves such GPUs out, named on
stderr).
Not enough GPUs is exit 1 (with `-o json`, a JSON document saying why on stdout too).
"""

from __future__ import annotations

import argparse
import json
import math
import sys

import yaml

from fleet.errors import EXIT_CODES, EXIT_NOT_FOUND, EXIT_OK, UsageError
from fleet.output import CSV, FORMATS, JSON, failure_json
from fleet.placing.inventory import gather
from fleet.placing.selection import (
    DEFAULT_MAX_UTILIZATION_PERCENT,
    ELIGIBILITY,
    Request,
    Selection,
    device_id,
    placement,
    select,
)
from fleet.placing.table import as_json, formatted
from fleet.querying.connection import connect
from fleet.units import parse_bytes
from plumbing.display import shell_word, visible
from plumbing.numbers import ascii_int
from plumbing.output import document

EPILOG = f"{ELIGIBILITY}\n\n{EXIT_CODES}"
"""The end of the `--help` of the commands that choose GPUs: who is eligible, then the exit statuses."""
DOCKER = "docker"
KUBERNETES = "kubernetes"
SELECT_FORMATS = (*FORMATS, DOCKER, KUBERNETES)
MAX_GPUS = 4096


def add_request_arguments(parser: argparse.ArgumentParser, gpus_required: bool = True) -> None:
    """The flags of a request, shared with `wait` and `estimate --then-select`."""
    if gpus_required:
        parser.add_argument("--gpus", required=True, metavar="N", help="how many GPUs")
        parser.add_argument("--min-free-memory", metavar="SIZE",
                            help="free memory each GPU must have, e.g. 40GiB, 80G, 512MiB")
    parser.add_argument("--model", metavar="NAME",
                        help="only GPUs whose model name contains NAME (case-insensitive), e.g. H100")
    parser.add_argument("--same-node", action="store_true", help="all GPUs on one node")
    parser.add_argument("--max-utilization", metavar="PERCENT",
                        help=f"leave out GPUs busier than this (default {DEFAULT_MAX_UTILIZATION_PERCENT}; "
                        "100 takes any)")
    parser.add_argument("--idle", action="store_true",
                        help="only idle GPUs: utilization below 30%% and memory used below 50%% (instead "
                        "of --max-utilization)")
    parser.add_argument("--allow-throttled", action="store_true",
                        help="throttled GPUs are eligible too (ranked at half their score)")


def percent(text: str, flag: str) -> float:
    """A percentage from 0 to 100; UsageError naming `flag` otherwise."""
    try:
        value = float(str(text).strip().removesuffix("%"))
    except ValueError:
        value = math.nan
    if not 0 <= value <= 100:
        raise UsageError(f"{flag}: expected a percentage from 0 to 100 (got {str(text)[:40]!r})")
    return value


def request_of(args: argparse.Namespace, gpus: int | None = None, memory: int | None = None) -> Request:
    """The request the flags describe (`gpus`/`memory` given by `estimate`); UsageError naming the flag."""
    if gpus is None:
        text = str(args.gpus)
        gpus = ascii_int(text.strip())
        if gpus is None or not 1 <= gpus <= MAX_GPUS:
            raise UsageError(f"--gpus: expected a whole number from 1 to {MAX_GPUS} (got {text[:40]!r})")
    if memory is None:
        memory = 0
        if args.min_free_memory is not None:
            try:
                memory = parse_bytes(args.min_free_memory)
            except ValueError as exc:
                raise UsageError(f"--min-free-memory: {exc}") from None
    model = args.model.strip() if args.model is not None else None
    if model == "":
        raise UsageError("--model: expected a model name such as H100 (got an empty string)")
    if args.idle and args.max_utilization is not None:
        raise UsageError("--idle: give either --idle or --max-utilization, not both")
    most = (DEFAULT_MAX_UTILIZATION_PERCENT if args.max_utilization is None
            else percent(args.max_utilization, "--max-utilization"))
    docker = getattr(args, "output", None) == DOCKER
    return Request(gpus, memory, model, bool(args.same_node) or docker, max_utilization_percent=most,
                   idle=bool(args.idle), allow_throttled=bool(args.allow_throttled), device_ids_only=docker)


def docker_argument(selection: Selection) -> str | None:
    """`docker run`'s --gpus argument for the chosen GPUs whose uuid label is a device id, quoted for a shell
    (--gpus '"device=A,B"'); None when none is."""
    ids = [g.uuid for g in selection.chosen if device_id(g.uuid)]
    return f"--gpus {shell_word(chr(34) + 'device=' + ','.join(ids) + chr(34))}" if ids else None


def refused_ids(selection: Selection) -> str | None:
    """The message for chosen GPUs whose uuid label is not a device id (None when every one is)."""
    bad = [g for g in selection.chosen if not device_id(g.uuid)]
    if not bad:
        return None
    shown = ", ".join(f"{visible(g.node)} GPU {visible(g.index)} ({visible(g.uuid)[:80]!r})" for g in bad)
    return (f"left out of the docker argument: {len(bad)} GPU(s) whose uuid label is not a GPU or MIG UUID: "
            f"{shown}")


def report(selection: Selection, output: str, headers: bool = True) -> str:
    """What `select` (and `wait`, once found) prints on stdout for a selection that succeeded."""
    where = placement(selection)
    if output == JSON:
        one_node = len({g.node for g in selection.chosen}) == 1
        return json.dumps(document(gpus=[as_json(g) for g in selection.chosen], **where,
                                   docker=docker_argument(selection) if one_node else None),
                          indent=2, allow_nan=False)
    if output == DOCKER:
        return docker_argument(selection) or ""
    snippet = yaml.safe_dump(where, sort_keys=False).rstrip()
    if output == KUBERNETES:
        return snippet
    table = formatted(selection.chosen, output, headers=headers)
    return table if output == CSV else f"{table}\n\n{snippet}"


def print_report(selection: Selection, output: str, headers: bool = True) -> int:
    """Print `report` of a selection that succeeded, the GPUs left out of its docker argument named on stderr
    (`-o json`; `-o docker` never chose them, and would exit 1 rather than print fewer GPUs than asked)."""
    text = report(selection, output, headers)
    if text:
        print(text)
    refused = refused_ids(selection) if output in (DOCKER, JSON) else None
    if refused is not None:
        print(refused, file=sys.stderr)
    return EXIT_NOT_FOUND if refused is not None and output == DOCKER else EXIT_OK


def shortfall(selection: Selection, output: str) -> int:
    """Not enough GPUs: the reason on stderr (and as JSON on stdout with `-o json`), exit 1."""
    summary = selection.summary()
    if output == JSON:
        print(failure_json(summary, EXIT_NOT_FOUND, requested=selection.request.gpus,
                           eligible=selection.eligible,
                           excluded={str(why): count for why, count in sorted(selection.excluded.items())}))
    print(summary, file=sys.stderr)
    return EXIT_NOT_FOUND


def select_and_report(args: argparse.Namespace, request: Request) -> int:
    """Select for `request` with the flags of `args`, print the outcome; the exit status."""
    with connect(args) as client:
        selection = select(gather(client), request)
    if not selection.ok:
        return shortfall(selection, args.output)
    return print_report(selection, args.output, not args.no_headers)
