#!/usr/bin/env python3
"""`scripts/helm`: the `helm` commands the docs use, run by Helm's own Go library (helm-python-sdk, installed
into .venv with the locked set by ./scripts/setup.sh), for a machine without the helm binary.

    scripts/helm install gpu-autoscaler charts/gpu-autoscaler -n gpu-autoscaler [-f FILE] [--set K=V]
    scripts/helm upgrade gpu-autoscaler charts/gpu-autoscaler -n gpu-autoscaler [-f FILE] [--set K=V]
    scripts/helm template gpu-autoscaler charts/gpu-autoscaler -n gpu-autoscaler [-f FILE] [--set K=V]
    scripts/helm uninstall gpu-autoscaler -n gpu-autoscaler

The flags mean what helm's do (`--set`, `--set-string` and `--set-file` are parsed by Helm's own parser;
values files and `--set` are merged in the order given, later wins); only these commands and flags exist.
`install`/`upgrade` read the kubeconfig as helm does (`--kubeconfig`, `$KUBECONFIG`, ~/.kube/config);
`--dry-run` renders and validates without a cluster. A bad flag or file is one line and exit 2, a failed Helm
action exit 1.
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml

try:
    import helm_python as helm
except ImportError:  # the test extra, in .venv by ./scripts/setup.sh
    sys.exit("scripts/helm: helm-python-sdk is not installed here: run ./scripts/setup.sh (or install the "
             "helm binary, docs/alerts-dashboards-manifests.md#installing-with-helm)")

NOTES = "templates/NOTES.txt"


def merge(base: dict[str, Any], override: dict[str, Any]) -> dict[str, Any]:
    """`override` over `base`, maps merged key by key, as helm merges -f files and --set."""
    merged = dict(base)
    for key, value in override.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = merge(merged[key], value)
        else:
            merged[key] = value
    return merged


class ValuesAction(argparse.Action):
    """-f, --set, --set-string and --set-file, kept in the order given (later wins, as in helm)."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any,
                 option_string: str | None = None) -> None:
        namespace.values_in_order = [*getattr(namespace, "values_in_order", []), (self.dest, str(values))]


def user_values(sources: Sequence[tuple[str, str]]) -> dict[str, Any]:
    """The values -f/--set/--set-string/--set-file give; ValueError naming the flag and what was wrong."""
    values: dict[str, Any] = {}
    for kind, text in sources:
        if kind == "values":
            try:
                loaded = yaml.safe_load(Path(text).read_text()) or {}
            except OSError as exc:
                raise ValueError(f"-f {text}: cannot read ({exc.strerror})") from None
            except yaml.YAMLError as exc:
                raise ValueError(f"-f {text}: not YAML ({exc})") from None
            if not isinstance(loaded, dict):
                raise ValueError(f"-f {text}: expected a mapping of values")
        else:
            parse = {"set": helm.parse_set_string, "set_string": helm.parse_set_string_values,
                     "set_file": helm.parse_set_file}[kind]
            try:
                loaded = parse(text)
            except helm.HelmError as exc:
                raise ValueError(f"--{kind.replace('_', '-')} {text}: {exc}") from None
        values = merge(values, loaded)
    return values


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="scripts/helm", description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name, help_text in (("install", "install a chart as a release"),
                            ("upgrade", "upgrade a release to a chart"),
                            ("template", "print the objects a chart renders to, offline")):
        command = commands.add_parser(name, help=help_text)
        command.add_argument("release")
        command.add_argument("chart", help="a chart directory, e.g. charts/gpu-autoscaler")
        command.add_argument("-f", "--values", action=ValuesAction, metavar="FILE", help="a values file")
        command.add_argument("--set", action=ValuesAction, metavar="K=V", help="a value, as helm --set")
        command.add_argument("--set-string", action=ValuesAction, metavar="K=V", help="a string value")
        command.add_argument("--set-file", action=ValuesAction, metavar="K=FILE", help="a value from FILE")
        if name != "template":
            command.add_argument("--dry-run", nargs="?", const="client", choices=("client", "server"),
                                 help="render and validate, change nothing (client: no cluster at all)")
        if name == "install":
            command.add_argument("--create-namespace", action="store_true")
    uninstall = commands.add_parser("uninstall", help="remove a release")
    uninstall.add_argument("release")
    for command in commands.choices.values():
        command.add_argument("-n", "--namespace", default="default")
        command.add_argument("--kubeconfig", metavar="FILE")
        command.add_argument("--kube-context", metavar="NAME")
    return parser


def template(args: argparse.Namespace, values: dict[str, Any]) -> str:
    """The rendered objects as helm template prints them: one `# Source:` document per template."""
    chart = helm.Chart.load(args.chart)
    rendered = chart.render(values, name=args.release, namespace=args.namespace, is_install=True)
    return "".join(f"---\n# Source: {path}\n{text.strip()}\n" for path, text in sorted(rendered.items())
                   if not path.endswith(NOTES) and text.strip())


def release_action(args: argparse.Namespace, values: dict[str, Any]) -> str:
    """Install, upgrade or uninstall through the kubeconfig; what helm prints after it."""
    dry_run = getattr(args, "dry_run", None)
    config = helm.Config(kubeconfig_path=args.kubeconfig, kube_context=args.kube_context,
                         namespace=args.namespace, storage_driver="memory" if dry_run == "client" else None)
    if args.command == "uninstall":
        config.uninstall(args.release)
        return f'release "{args.release}" uninstalled'
    if args.command == "install":
        release = config.install(args.chart, args.release, values, namespace=args.namespace,
                                 dry_run=dry_run, create_namespace=args.create_namespace)
    else:
        release = config.upgrade(args.chart, args.release, values, namespace=args.namespace, dry_run=dry_run)
    lines = [f"NAME: {release['name']}", f"NAMESPACE: {release['namespace']}",
             f"STATUS: {release['status']}", f"REVISION: {release['revision']}"]
    if dry_run:
        lines.append(f"MANIFEST:\n{release['manifest'].strip()}")
    if release.get("notes"):
        lines.append(f"NOTES:\n{release['notes'].strip()}")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        values = user_values(getattr(args, "values_in_order", []))
    except ValueError as exc:
        parser.exit(2, f"scripts/helm {args.command}: {exc}\n")
    helm.enable_logging(logging.WARNING)  # Helm's warnings and errors only, through logging (stderr)
    logging.basicConfig(format="scripts/helm: %(message)s", level=logging.WARNING)
    try:
        print(template(args, values) if args.command == "template" else release_action(args, values))
    except helm.HelmError as exc:
        print(f"scripts/helm {args.command}: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
