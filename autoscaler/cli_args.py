"""Flags shared by the subcommands that talk to a cluster (`run`, `status`): one spelling, one default."""

from __future__ import annotations

import argparse
import os

DEFAULT_PROMETHEUS = "http://localhost:9090"


def add_cluster_arguments(parser: argparse.ArgumentParser, *, rules_help: str = "rules file") -> None:
    """`--rules FILE` (required), `--prometheus URL` (default $PROMETHEUS_URL) and `--kubeconfig PATH`."""
    parser.add_argument("--rules", required=True, metavar="FILE", help=rules_help)
    parser.add_argument(
        "--prometheus",
        default=os.environ.get("PROMETHEUS_URL", DEFAULT_PROMETHEUS),
        metavar="URL",
        help="Prometheus base URL (default: $PROMETHEUS_URL or %(default)s)",
    )
    parser.add_argument(
        "--kubeconfig",
        metavar="PATH",
        help="kubeconfig file (default: in-cluster config in a pod, else $KUBECONFIG or ~/.kube/config)",
    )
