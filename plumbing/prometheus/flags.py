"""The flags that name a Prometheus connection, spelled the same in `gpu-autoscaler` and `gpu-fleet`."""

from __future__ import annotations

import argparse

from plumbing.prometheus.config import PrometheusConfig, endpoints_of

DEFAULT_PROMETHEUS = "http://localhost:9090"


def add_prometheus_arguments(parser: argparse.ArgumentParser, *, default: str | None) -> None:
    """`--prometheus URL` or `--prometheus-config FILE` (named endpoints with auth and TLS), not both."""
    group = parser.add_mutually_exclusive_group()
    shown = f"$PROMETHEUS_URL or {DEFAULT_PROMETHEUS}" if default is not None else "none: no query is run"
    group.add_argument(
        "--prometheus",
        default=default,
        metavar="URL",
        help=f"Prometheus base URL without auth settings (user:pass@ in it is basic auth) (default: {shown})",
    )
    group.add_argument(
        "--prometheus-config",
        metavar="FILE",
        help="Prometheus endpoints with auth, TLS and headers (docs/prometheus-connections.md)",
    )


def prometheus_config(args: argparse.Namespace) -> PrometheusConfig | None:
    """The endpoints the flags name (None: neither); raises PrometheusConfigError for a bad file or URL."""
    return endpoints_of(getattr(args, "prometheus", None), getattr(args, "prometheus_config", None))
