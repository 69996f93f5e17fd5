"""`gpu-fleet export` (being written: registered first so the registry line lands early)."""

from __future__ import annotations

import argparse

from fleet.errors import UsageError

HELP = "the per-GPU series behind the report, as CSV or JSON on stdout"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    del parser


def run(args: argparse.Namespace) -> int:
    raise UsageError("not available yet")
