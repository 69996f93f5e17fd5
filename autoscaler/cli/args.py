"""Flags shared by the subcommands that talk to a cluster (`run`, `status`) and to Prometheus (`check` too):
one spelling, one default."""

from __future__ import annotations

import argparse
import re

from autoscaler.errors import UsageError
from plumbing.prometheus.flags import DEFAULT_PROMETHEUS, add_prometheus_arguments, prometheus_config

__all__ = [
    "DEFAULT_PROMETHEUS", "add_cluster_arguments", "add_namespaces_argument", "add_prometheus_arguments",
    "add_rules_argument", "namespace_list", "prometheus_config", "rules_file",
]

def add_cluster_arguments(parser: argparse.ArgumentParser, *, rules_help: str = "rules file") -> None:
    """`--rules FILE` (required), the Prometheus flags and `--kubeconfig PATH`."""
    parser.add_argument("--rules", required=True, metavar="FILE", help=rules_help)
    add_prometheus_arguments(parser)
    parser.add_argument(
        "--kubeconfig",
        metavar="PATH",
        help="kubeconfig file (default: in-cluster config in a pod, else $KUBECONFIG or ~/.kube/config)",
    )


_NAMESPACE = re.compile(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?")


def namespace_list(text: str) -> frozenset[str]:
    """argparse type of --namespaces: 'ml,research' -> the set of names (DNS-1123 labels, as the API)."""
    names = [n.strip() for n in text.split(",")]
    bad = [n for n in names if not _NAMESPACE.fullmatch(n)]
    if bad or not names:
        raise argparse.ArgumentTypeError(
            f"expected namespace names separated by commas, like ml,research (got {bad[0][:70]!r}: a "
            "namespace is lowercase letters, digits and '-', at most 63 characters)"
        )
    return frozenset(names)


def add_namespaces_argument(parser: argparse.ArgumentParser) -> None:
    """`--namespaces NS[,NS...]`: the only namespaces whose targets may be read and scaled."""
    parser.add_argument(
        "--namespaces",
        type=namespace_list,
        metavar="NS[,NS...]",
        help="only read and scale targets in these namespaces; a rule whose target is elsewhere is refused "
        "(default: every namespace; docs/least-privilege.md)",
    )


def add_rules_argument(parser: argparse.ArgumentParser, *, metavar: str = "FILE",
                       positional_help: str | None = None) -> None:
    """`--rules FILE`, as `run` and `status` take it, for the subcommands that once took the rules file as
    their first positional argument (`check`, `simulate`): that form still works, `--rules` is documented.
    The other positional arguments (`simulate`'s trace) land in `files`, resolved by `rules_file`."""
    parser.add_argument("--rules", metavar="FILE", help="rules file (YAML)")
    parser.add_argument("files", nargs="*", metavar=metavar, help=positional_help or argparse.SUPPRESS)


def rules_file(args: argparse.Namespace, command: str, after: tuple[str, ...] = ()) -> tuple[str, list[str]]:
    """The rules file (from --rules, or else the first positional) and the positionals that follow it, named
    `after`; raises UsageError naming what is missing or extra."""
    words = list(args.files)
    rules = args.rules
    if rules is None and len(words) > len(after):
        rules, words = words[0], words[1:]
    missing = (["--rules FILE"] if rules is None else []) + list(after[len(words):])
    if missing:
        raise UsageError(f"gpu-autoscaler {command}: the following arguments are required: "
                         f"{', '.join(missing)}")
    if len(words) > len(after):
        raise UsageError(f"gpu-autoscaler {command}: unrecognized arguments: {' '.join(words[len(after):])}"
                         + (" (the rules file is given once, with --rules)" if args.rules else ""))
    return rules, words
