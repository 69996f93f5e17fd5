"""The Prometheus flags of every `gpu-fleet` subcommand, the controller's own: `--prometheus URL` or
`--prometheus-config FILE` (http_config: auth, TLS, headers; docs/prometheus-connections.md), plus
`--endpoint NAME` to pick one of the file's endpoints and `--query-timeout`.

The flags, the file's reader and the HTTP session are the autoscaler's (`autoscaler.cli.args`,
`plumbing.prometheus.config`, `plumbing.prometheus.session`), imported, not copied, so a connection that
works for `gpu-autoscaler check` works here.
"""

from __future__ import annotations

import argparse

from fleet.errors import UsageError
from fleet.querying.prom import MAX_BODY_BYTES, FleetPrometheus
from plumbing.cli import duration
from plumbing.deadline import Cancel
from plumbing.errors import ReportedError
from plumbing.prometheus.config import DEFAULT_ENDPOINT, Endpoint
from plumbing.prometheus.flags import add_prometheus_arguments, prometheus_config

DEFAULT_QUERY_TIMEOUT = 10.0


def add_connection_arguments(parser: argparse.ArgumentParser) -> None:
    """`--prometheus URL` | `--prometheus-config FILE`, `--endpoint NAME`, `--query-timeout DURATION`."""
    add_prometheus_arguments(parser)
    parser.add_argument("--endpoint", metavar="NAME",
                        help="which endpoint of --prometheus-config to query (default: 'default', or the "
                        "file's only endpoint)")
    parser.add_argument("--query-timeout", type=duration(0.0, 600.0, above=True),
                        default=DEFAULT_QUERY_TIMEOUT, metavar="DURATION",
                        help="timeout of each query, e.g. 10s, 500ms (default 10s)")


def endpoint(args: argparse.Namespace) -> Endpoint:
    """The endpoint the flags name; raises UsageError naming the flag for a bad URL, file or name."""
    try:
        config = prometheus_config(args)
    except ReportedError as exc:
        flag = "--prometheus-config" if getattr(args, "prometheus_config", None) else "--prometheus"
        message = str(exc)  # a bad --prometheus URL already names its flag
        raise UsageError(message if message.startswith(f"{flag}:") else f"{flag}: {message}") from exc
    if config is None:
        raise UsageError("--prometheus: no Prometheus URL given (or set $PROMETHEUS_URL)")
    name = getattr(args, "endpoint", None)
    if name is None:
        if DEFAULT_ENDPOINT in config.endpoints or len(config.endpoints) != 1:
            name = DEFAULT_ENDPOINT
        else:
            name = next(iter(config.endpoints))
    if name not in config.endpoints:
        names = ", ".join(sorted(config.endpoints))
        raise UsageError(f"--endpoint: no endpoint {name!r} in {config.path} (endpoints: {names})")
    return config.endpoints[name]


def connect(args: argparse.Namespace, max_body_bytes: int = MAX_BODY_BYTES,
            cancel: Cancel | None = None) -> FleetPrometheus:
    """A client for the endpoint the flags name (close it, or use it as a context manager); `cancel` cuts
    its queries in flight (a stop signal)."""
    return FleetPrometheus(endpoint(args), timeout=args.query_timeout, max_body_bytes=max_body_bytes,
                           cancel=cancel)
