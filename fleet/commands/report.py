"""`gpu-fleet report`: utilization, idle and allocated-but-idle GPU-hours per node, namespace and workload,
energy and cost, throttling, XIDs, health incidents and the autoscaler's decisions over a window.

Flags and output only: the queries are `fleet.reporting.fetch`, the numbers `reporting.usage`, the formats
`reporting.render_md`, `reporting.render_json` and `reporting.render_html` (which alone needs matplotlib).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

from fleet.errors import UsageError
from fleet.output import output_of
from fleet.querying.connection import add_connection_arguments, connect
from fleet.reporting.fetch import MAX_ANSWER_BYTES, fetch, gpus_in_window
from fleet.reporting.render_json import render_csv, render_json
from fleet.reporting.render_md import render_md
from fleet.reporting.timeline import add_window_arguments, parse_span, parse_time, report_window
from fleet.reporting.usage import Prices, compute
from plumbing.cli import bounded_number

HELP = "utilization, idle and allocated-but-idle GPU-hours, energy, cost, incidents and scaling over a window"
FORMATS = ("table", "wide", "md", "json", "csv", "html")
MARKDOWN = ("table", "wide", "md")
MAX_PRICE = 1e9
"""Per GPU-hour or kWh, in any currency: a bound that no price reaches, so a cost stays a finite number."""
"""table (and its old name md) is the Markdown report (its tables are the people's view); wide adds columns
and the scale events."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_connection_arguments(parser)
    add_window_arguments(parser, "7d")
    parser.add_argument("-o", "--output", metavar="FORMAT",
                        help="table (default: Markdown tables; md is its old name), wide (more columns and "
                        "the scale events), json, csv (the usage rows) or html (PNG plots; needs the "
                        "`report` extra, matplotlib)")
    parser.add_argument("--format", help=argparse.SUPPRESS)
    parser.add_argument("--no-headers", action="store_true", help="leave out the csv header line")
    parser.add_argument("--out", metavar="DIR", help="write report.<md|json|csv|html> (and the PNGs) into "
                        "DIR (html needs it; the others go to stdout without it)")
    parser.add_argument("--price-per-gpu-hour", metavar="X", help="adds the GPU cost (GPU-hours x X)")
    parser.add_argument("--price-per-kwh", metavar="Y", help="adds the energy cost (kWh x Y)")
    parser.add_argument("--idle-below", metavar="RATIO", default="0.05",
                        help="an hour averaging below this utilization is idle (default 0.05)")
    parser.add_argument("--quiet", action="store_true", help="no progress lines on stderr")


def number(text: str | None, flag: str, high: float, what: str) -> float | None:
    """A finite number in [0, high] for `flag` (plumbing.cli's), or None when not given; UsageError naming the
    flag otherwise: one line, as every check of this command (after the flags are parsed)."""
    if text is None:
        return None
    try:
        return bounded_number(text, 0, high, what=what)
    except ValueError as exc:
        raise UsageError(f"{flag}: {exc}") from None


def writable_dir(out: Path) -> None:
    """`--out DIR`, made if missing, and proven writable by writing a file in it; UsageError otherwise."""
    if out.exists() and not out.is_dir():
        raise UsageError(f"--out: {out} is not a directory")
    try:
        out.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=out, prefix=".gpu-fleet-", delete=True):
            pass
    except OSError as exc:
        raise UsageError(f"--out: cannot write into {out}: {exc.strerror or type(exc).__name__}") from exc


def run(args: argparse.Namespace) -> int:
    args.output = output_of(args, FORMATS, "table")
    if args.output == "html" and not args.out:
        raise UsageError("-o html: give --out DIR for the page and its PNG plots")
    prices = Prices(number(args.price_per_gpu_hour, "--price-per-gpu-hour", MAX_PRICE, "a price"),
                    number(args.price_per_kwh, "--price-per-kwh", MAX_PRICE, "a price"))
    threshold = number(args.idle_below, "--idle-below", 1.0, "a ratio")
    window = report_window(parse_span(args.since), parse_time(args.until, time.time()))
    if args.out:
        writable_dir(Path(args.out))  # a bad --out is one message before minutes of queries, not after
    if args.output == "html":
        from fleet.reporting.render_html import _pyplot

        _pyplot()  # the missing extra is one message before minutes of queries, not after

    def progress(line: str) -> None:
        if not args.quiet:
            print(f"{args.prog}: {line}", file=sys.stderr, flush=True)

    with connect(args, max_body_bytes=MAX_ANSWER_BYTES) as client:
        gpus = gpus_in_window(client, window.seconds, window.end)
        window = report_window(window.seconds, window.end, gpus)  # a larger fleet, a coarser step
        progress(f"{gpus:,} GPUs in the window: one point every {window.step:g}s")
        inputs = fetch(client, window, progress)
    report = compute(inputs, 0.05 if threshold is None else threshold, prices)
    if args.output == "html":
        from fleet.reporting.render_html import write_html

        page = write_html(report, Path(args.out))
        progress(f"wrote {page}")
        return 0
    suffix = "md" if args.output in MARKDOWN else args.output
    if suffix == "json":
        text = render_json(report)
    elif suffix == "csv":
        text = render_csv(report, not args.no_headers)
    else:
        text = render_md(report, wide=args.output == "wide")
    if args.out:
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        (out / f"report.{suffix}").write_text(text)
        progress(f"wrote {out / f'report.{suffix}'}")
    else:
        sys.stdout.write(text)
    return 0
