"""`gpu-fleet select`: the best free GPUs for a job, and where to tell Kubernetes (or Docker) to put it.

Flags and output only: the request and the printed choice are `fleet.placing.choosing`'s (shared with `wait`
and `estimate --then-select`), the choice itself `fleet.placing.selection`'s.
"""

from __future__ import annotations

import argparse

from fleet.output import add_output_arguments
from fleet.placing.choosing import EPILOG as EPILOG
from fleet.placing.choosing import SELECT_FORMATS, add_request_arguments, request_of, select_and_report
from fleet.querying.connection import add_connection_arguments

HELP = "choose the best free GPUs (ranking score) and print a nodeSelector (or docker --gpus) for them"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_request_arguments(parser)
    add_output_arguments(parser, SELECT_FORMATS, what="; docker: the --gpus argument of docker run; "
                         "kubernetes: the nodeSelector or nodeAffinity alone")
    add_connection_arguments(parser)


def run(args: argparse.Namespace) -> int:
    return select_and_report(args, request_of(args))
