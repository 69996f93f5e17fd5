"""`gpu-fleet wait`: run `select` every `--interval` until it succeeds (exit 0, the choice printed) or
`--timeout` passes (exit 1); SIGTERM and SIGINT end it at once (exit 128 + the signal's number).

Flags and output only: the loop is `fleet.placing.waiting`'s (shared with `estimate --then-wait`), each
attempt a choice as `select` makes it (`fleet.placing.choosing`).
"""

from __future__ import annotations

import argparse

from fleet.output import add_output_arguments
from fleet.placing.choosing import EPILOG as EPILOG
from fleet.placing.choosing import SELECT_FORMATS, add_request_arguments, request_of
from fleet.placing.waiting import add_wait_arguments, wait_and_report
from fleet.querying.connection import add_connection_arguments

HELP = "repeat select until enough GPUs are free (exit 0) or the timeout passes (exit 1)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_request_arguments(parser)
    add_wait_arguments(parser)
    add_output_arguments(parser, SELECT_FORMATS, what="; as select")
    add_connection_arguments(parser)


def run(args: argparse.Namespace) -> int:
    return wait_and_report(args, request_of(args))
