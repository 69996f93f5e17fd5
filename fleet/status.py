"""`gpu-fleet status`: every GPU of the cluster in one table (or JSON), from one query per series."""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable

from fleet.connection import add_connection_arguments, connect
from fleet.errors import EXIT_NOT_FOUND, EXIT_OK
from fleet.inventory import Gpu, gather, only
from fleet.table import as_json, render
from plumbing.numbers import ascii_int

HELP = "every GPU of the cluster: utilization, memory, temperature, power, health, score, holder pods"

SORT_KEYS: dict[str, Callable[[Gpu], object]] = {
    "node": lambda g: (g.node, ascii_int(g.index) or 0),
    "model": lambda g: g.model,
    "utilization": lambda g: g.utilization,
    "memory": lambda g: g.memory_used,
    "temperature": lambda g: g.temperature,
    "power": lambda g: g.power,
    "health": lambda g: g.health or "",
    "score": lambda g: g.availability,
    "holders": lambda g: ",".join(str(h) for h in g.holders),
}
"""`--sort` columns: text ascending, numbers highest first; unknown values last."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--node", metavar="NODE", help="only the GPUs of this node")
    parser.add_argument("--namespace", metavar="NS", help="only the GPUs held by pods of this namespace")
    parser.add_argument("--sort", choices=sorted(SORT_KEYS), default="node", metavar="COLUMN",
                        help=f"order of the rows: {', '.join(sorted(SORT_KEYS))} (default node; numbers "
                        "highest first)")
    parser.add_argument("--json", action="store_true", help="print a JSON list instead of the table")
    add_connection_arguments(parser)


def ordered(gpus: list[Gpu], column: str) -> list[Gpu]:
    key = SORT_KEYS[column]
    known = [g for g in gpus if key(g) is not None]
    unknown = [g for g in gpus if key(g) is None]
    numeric = column in ("utilization", "memory", "temperature", "power", "score")
    return sorted(known, key=key, reverse=numeric) + unknown  # type: ignore[arg-type]


def run(args: argparse.Namespace) -> int:
    with connect(args) as client:
        gpus = ordered(only(gather(client), args.node, args.namespace), args.sort)
    if args.json:
        print(json.dumps([as_json(g) for g in gpus], indent=2))
    elif gpus:
        print(render(gpus))
    else:
        where = " ".join(f"{flag} {value}" for flag, value in (("--node", args.node),
                                                                 ("--namespace", args.namespace)) if value)
        print(f"no GPU found{' for ' + where if where else ''} (is the exporter scraped by this Prometheus?)")
    return EXIT_OK if gpus else EXIT_NOT_FOUND
