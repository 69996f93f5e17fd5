"""`gpu-fleet report` (being written: registered first so the registry line lands early)."""

from __future__ import annotations

import argparse

from fleet.errors import UsageError

HELP = "utilization, idle and allocated-but-idle GPU-hours, energy, cost, incidents and scaling over a window"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    del parser


def run(args: argparse.Namespace) -> int:
    raise UsageError("not available yet")
