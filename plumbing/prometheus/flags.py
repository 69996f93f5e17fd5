"""The flags that name a Prometheus connection, spelled the same in `gpu-autoscaler` and `gpu-fleet`, and
read from the same place: `--prometheus URL`, else `$PROMETHEUS_URL`, else the command's fallback."""

from __future__ import annotations

import argparse
import os

from plumbing.prometheus.config import PrometheusConfig, endpoints_of

DEFAULT_PROMETHEUS = "http://localhost:9090"
ENVIRONMENT_VARIABLE = "PROMETHEUS_URL"


def prometheus_url(fallback: str | None = DEFAULT_PROMETHEUS) -> str | None:
    """`$PROMETHEUS_URL` (an empty value is unset), else `fallback`: the default of `--prometheus`."""
    return os.environ.get(ENVIRONMENT_VARIABLE) or fallback


def add_prometheus_arguments(parser: argparse.ArgumentParser, *,
                             fallback: str | None = DEFAULT_PROMETHEUS) -> None:
    """`--prometheus URL` or `--prometheus-config FILE` (named endpoints with auth and TLS), not both.
    `--prometheus` defaults to `$PROMETHEUS_URL`, else `fallback` (None: no Prometheus, `check` offline)."""
    group = parser.add_mutually_exclusive_group()
    shown = f"${ENVIRONMENT_VARIABLE}, else {fallback if fallback is not None else 'none: no query is run'}"
    group.add_argument(
        "--prometheus",
        default=prometheus_url(fallback),
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
