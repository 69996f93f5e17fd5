"""`gpu-fleet status`: every GPU of the cluster in one table (or JSON, CSV), from one query per series.

A GPU whose exporter is down is listed as stale (exit 3), never dropped. `--watch [SECONDS]` refreshes
the answer until SIGINT or SIGTERM, as `nvidia-smi -l` and `kubectl -w` do: in place on a terminal
(critical, down and stale rows in red), one plain answer after another in a pipe (a JSON document per line
with `-o json`).
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
import time
from collections.abc import Callable
from typing import TextIO

from fleet.errors import EXIT_NOT_FOUND, EXIT_OK, EXIT_STALE
from fleet.output import JSON, add_output_arguments
from fleet.placing.inventory import NOT_SCRAPED_HINT, Gpu, gather, only
from fleet.placing.table import as_json, formatted
from fleet.querying.connection import add_connection_arguments, connect
from fleet.querying.polling import Stop, attempts
from plumbing.cli import duration
from plumbing.display import visible
from plumbing.numbers import ascii_int
from plumbing.output import document

HELP = "every GPU of the cluster: utilization, memory, temperature, power, health, score, holder pods"
DEFAULT_WATCH_SECONDS = 2.0
CLEAR = "\033[H\033[2J"

SORT_KEYS: dict[str, Callable[[Gpu], object]] = {
    "node": lambda g: (g.node, ascii_int(g.index) or 0),
    "model": lambda g: g.model,
    "utilization": lambda g: g.utilization,
    "memory": lambda g: g.memory_used,
    "temperature": lambda g: g.temperature,
    "power": lambda g: g.power,
    "health": lambda g: g.health or "",
    "score": lambda g: g.rank,
    "holders": lambda g: ",".join(str(h) for h in g.holders),
}
"""`--sort` columns: text ascending, numbers highest first; unknown values last."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--node", metavar="NODE", help="only the GPUs of this node")
    parser.add_argument("--namespace", metavar="NS", help="only the GPUs held by pods of this namespace")
    parser.add_argument("--sort", choices=sorted(SORT_KEYS), default="node", metavar="COLUMN",
                        help=f"order of the rows: {', '.join(sorted(SORT_KEYS))} (default node; numbers "
                        "highest first; score is the ranking score: 0 for critical, down or stale GPUs)")
    parser.add_argument("--watch", "-w", nargs="?", const=DEFAULT_WATCH_SECONDS, default=None,
                        type=duration(0.1, 3600.0), metavar="SECONDS",
                        help=f"refresh every SECONDS (default {DEFAULT_WATCH_SECONDS:g}) until Ctrl-C")
    add_output_arguments(parser)
    add_connection_arguments(parser)


def ordered(gpus: list[Gpu], column: str) -> list[Gpu]:
    key = SORT_KEYS[column]
    known = [g for g in gpus if key(g) is not None]
    unknown = [g for g in gpus if key(g) is None]
    numeric = column in ("utilization", "memory", "temperature", "power", "score")
    return sorted(known, key=key, reverse=numeric) + unknown  # type: ignore[arg-type]


def exit_code(gpus: list[Gpu]) -> int:
    if not gpus:
        return EXIT_NOT_FOUND
    return EXIT_STALE if any(g.stale for g in gpus) else EXIT_OK


def answer(gpus: list[Gpu], args: argparse.Namespace, *, color: bool = False, now: float | None = None,
           compact: bool = False) -> str | None:
    """What one look prints on stdout; None for no GPU in a format for people (`nothing_found` says so)."""
    if args.output == JSON and compact:
        return json.dumps(document(gpus=[as_json(g) for g in gpus]), allow_nan=False)
    if gpus or args.output == JSON:
        return formatted(gpus, args.output, headers=not args.no_headers, color=color, now=now)
    return None


def nothing_found(args: argparse.Namespace) -> str:
    where = " ".join(f"{flag} {value}" for flag, value in (("--node", args.node),
                                                             ("--namespace", args.namespace)) if value)
    return f"no GPU found{' for ' + where if where else ''} ({NOT_SCRAPED_HINT})"


def stale_note(gpus: list[Gpu]) -> str | None:
    nodes = sorted({g.node for g in gpus if g.stale})
    if not nodes:
        return None
    count = sum(1 for g in gpus if g.stale)
    return (f"{count} GPU(s) stale on {visible(', '.join(nodes))}: their exporter is down or no longer "
            "reports them")


def watch(look: Callable[[], str], *, interval: float, stop: threading.Event, out: TextIO, tty: bool,
          title: str, lines: bool = False, clock: Callable[[], float] = time.time) -> int:
    """Print `look()` every `interval` seconds until `stop` is set: under a title line, redrawn in place on
    a terminal, one after another in a pipe (`lines`: each look alone on one line, as JSON lines). An
    unreachable Prometheus is shown as the answer of that look, and the watch goes on. Returns the looks."""
    looks = 0
    for tried in attempts(look, interval=interval, stop=stop):
        looks = tried.number
        text = f"error: {visible(str(tried.error))}" if tried.error is not None else str(tried.value)
        stamp = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(clock()))
        if lines:
            out.write(text + "\n")
        else:
            out.write(f"{CLEAR if tty else ''}Every {interval:g}s: {title}    {stamp}\n\n{text}\n"
                      + ("" if tty else "\n"))
        out.flush()
    return looks


def run(args: argparse.Namespace) -> int:
    if args.watch is not None:
        return _run_watch(args)
    with connect(args) as client:
        gpus = ordered(only(gather(client), args.node, args.namespace), args.sort)
    text, note = answer(gpus, args), stale_note(gpus)
    if text is not None:
        print(text)
    for message in (None if text is not None else nothing_found(args), note):
        if message:
            print(message, file=sys.stderr)
    return exit_code(gpus)


def _run_watch(args: argparse.Namespace) -> int:
    stop = Stop.on_signals()
    tty = sys.stdout.isatty()

    with connect(args, cancel=stop.cancel) as client:
        def look() -> str:
            gpus = ordered(only(gather(client), args.node, args.namespace), args.sort)
            text = answer(gpus, args, color=tty, compact=True)
            return nothing_found(args) if text is None else text

        title = "gpu-fleet status" + "".join(f" --{k} {v}" for k, v in (("node", args.node),
                                                                         ("namespace", args.namespace)) if v)
        watch(look, interval=args.watch, stop=stop.event, out=sys.stdout, tty=tty, title=title,
              lines=args.output == JSON)
    return EXIT_OK
