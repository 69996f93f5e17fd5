"""`gpu-exporter`: serve GPU metrics, or print the local GPUs once (`status`, `status -o json`).

Bad flags, a bad --simulate-config, --config or --web-config-file or a port in use print one message on stderr
(naming the file, line and field for a config file) and exit 2, no traceback.
"""

from __future__ import annotations

import argparse
import dataclasses
import logging
import os
import socket
import sys
import threading
from collections.abc import Sequence
from typing import Any

from exporter.config import ExporterConfig, load_config
from exporter.errors import ConfigError, ExporterError
from exporter.malloc import limit_malloc_arenas
from exporter.nvml.adapter import real_nvml
from exporter.pods.procfs import DEFAULT_PROC_ROOT
from exporter.simulator.config import MAX_SIMULATED_GPUS, default_config
from exporter.simulator.config_file import load_sim_config
from exporter.simulator.nvml import SimulatedNvml
from exporter.source import SourceSettings
from exporter.status_cli import run_status
from plumbing.cli import (
    HintingParser,
    add_version_argument,
    duration,
    fail,
    install_stop_handlers,
    port_number,
    silence_stdout,
    whole_number,
)
from plumbing.output import add_output_arguments
from plumbing.web import WebConfig, WebConfigError, load_web_config

PROG = "gpu-exporter"

log = logging.getLogger(__name__)


class UsageError(ExporterError):
    """A bad command line."""


class _Parser(HintingParser):
    def error(self, message: str) -> Any:  # one line, exit 2; a typo gets the usage above it
        if "invalid choice" in message or "unrecognized arguments" in message:
            self.print_usage(sys.stderr)
        raise UsageError(self.hinted(message))


def _backend_flags(suppress: bool) -> argparse.ArgumentParser:
    """Flags both `gpu-exporter` and `gpu-exporter status` take. On the subcommand their defaults are
    suppressed, so `gpu-exporter --simulate 2 status` keeps the value given before the subcommand."""
    default: dict[str, Any] = {"default": argparse.SUPPRESS} if suppress else {}
    backend = _Parser(add_help=False)
    group = backend.add_mutually_exclusive_group()
    group.add_argument("--simulate", type=whole_number(0, MAX_SIMULATED_GPUS, what="a GPU count"),
                       metavar="N",
                       help="serve N simulated H100-class GPUs instead of the real NVML", **default)
    group.add_argument("--simulate-config", metavar="FILE",
                       help="simulated GPUs, load patterns and faults from this YAML file", **default)
    backend.add_argument("--node-name", metavar="NAME",
                         help="value of the node label (default: $NODE_NAME, else the host name)", **default)
    backend.add_argument("--config", metavar="FILE",
                         help="YAML file: health thresholds, history, trend, pod-resources, XID settings",
                         **default)
    backend.add_argument("--temperature-from-board", action="store_true",
                         help="health temperature bands from each board's own NVML thresholds (throttled "
                              "from its max operating temperature, critical above its slowdown); the "
                              "config file's health.temperature_from_board", **default)
    backend.add_argument("--pod-resources-socket", metavar="PATH",
                         help="kubelet pod-resources socket (default: the config file's, else "
                              "/var/lib/kubelet/pod-resources/kubelet.sock)", **default)
    backend.add_argument("--proc-root", metavar="PATH",
                         help="where to read /proc/<pid>/cgroup of GPU processes and the driver's device "
                              "minors (the host's /proc mounted in the DaemonSet; default /proc)",
                         default=argparse.SUPPRESS if suppress else DEFAULT_PROC_ROOT)
    backend.add_argument("--log-level", choices=("DEBUG", "INFO", "WARNING", "ERROR"),
                         help="log level on stderr (default INFO; WARNING for status)", **default)
    return backend


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog=PROG, parents=[_backend_flags(suppress=False)],
                     description="NVIDIA GPU metrics for Prometheus.")
    add_version_argument(parser, PROG)
    parser.add_argument("--address", default="0.0.0.0",
                        help="listen address, IPv4 or IPv6 (default 0.0.0.0; '::' for every IPv6 address)")
    parser.add_argument("--port", type=port_number, default=9400, help="listen port (default 9400)")
    parser.add_argument("--min-interval", type=duration(0.0, 3600.0), default=1.0, metavar="DURATION",
                        help="minimum time between two NVML sweeps, e.g. 1s, 500ms or 0; scrapes in between "
                             "share one (default 1s)")
    parser.add_argument("--web-config-file", metavar="FILE",
                        help="TLS and basic auth of the HTTP endpoints, in the exporter-toolkit web config "
                             "format (node_exporter's --web.config.file); see docs/web-config.md")
    commands = parser.add_subparsers(dest="command", metavar="{status}")
    status = commands.add_parser("status", parents=[_backend_flags(suppress=True)],  # type: ignore[list-item]  # stubs: parents of the subparser class
                                 help="print the local GPUs once and exit")
    add_version_argument(status, PROG)
    add_output_arguments(status, json_alias="deprecated",
                         what=": wide adds the whole UUID and the PCI bus id; json and csv are "
                              "docs/exporter.md's shape")
    return parser


def node_name(flag: str | None) -> str:
    return flag or os.environ.get("NODE_NAME") or socket.gethostname()


def nvml_backend(args: argparse.Namespace) -> Any:
    """The real pynvml module, or a SimulatedNvml per --simulate / --simulate-config."""
    if args.simulate_config:
        return SimulatedNvml(load_sim_config(args.simulate_config))
    if args.simulate is not None:
        return SimulatedNvml(default_config(args.simulate))
    return real_nvml()


def exporter_config(args: argparse.Namespace) -> ExporterConfig:
    """The --config file (defaults without one), with --pod-resources-socket and --temperature-from-board
    taking precedence."""
    config = load_config(args.config) if args.config else ExporterConfig()
    if getattr(args, "temperature_from_board", False):
        config = dataclasses.replace(config, health=dataclasses.replace(config.health,
                                                                        temperature_from_board=True))
    if args.pod_resources_socket:
        config = dataclasses.replace(config, pod_resources=dataclasses.replace(
            config.pod_resources, socket=args.pod_resources_socket))
    return config


def main(argv: Sequence[str] | None = None) -> int:
    try:
        args = build_parser().parse_args(argv)
        if args.simulate is not None and args.simulate_config:
            raise UsageError("argument --simulate: not allowed with argument --simulate-config")
        level = args.log_level or ("WARNING" if args.command == "status" else "INFO")
        logging.basicConfig(level=level, stream=sys.stderr,
                            format="%(asctime)s %(levelname)s %(name)s: %(message)s")
        config = exporter_config(args)  # a bad file: ConfigError, exit 2, before anything starts
        if args.command == "status":
            return run_status(nvml_backend(args), node_name(args.node_name), config, args.output, PROG,
                              args.proc_root, headers=not args.no_headers)
        return serve(args, config)
    except (UsageError, ConfigError, ExporterError, WebConfigError) as exc:
        return fail(PROG, f"error: {exc}")
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:  # `gpu-exporter status | head`: the reader left, which is not an error
        silence_stdout()
        return 0


def serve(args: argparse.Namespace, config: ExporterConfig) -> int:
    # The server (aiohttp, prometheus_client's exposition: 0.2 s to import) loads here: `status` and a bad
    # flag or file, answered before, never pay for it.
    from exporter.app import ExporterApp

    limit_malloc_arenas()  # before any thread starts
    web_config: WebConfig | None = load_web_config(args.web_config_file) if args.web_config_file else None
    nvml = nvml_backend(args)
    app = ExporterApp(nvml, node_name(args.node_name), SourceSettings(min_interval=args.min_interval),
                      config=config, proc_root=args.proc_root)
    server = app.bind(args.address, args.port, web_config)  # ServeError (port in use) before threads start
    stop = threading.Event()
    install_stop_handlers(stop)
    app.start()
    host = f"[{server.address}]" if ":" in server.address else server.address
    log.info("serving /metrics, /healthz, /readyz, /api/v1/gpus on %s://%s:%d (%s%s)", server.scheme, host,
             server.port, "basic auth, " if web_config is not None and web_config.users else "",
             "simulated NVML" if isinstance(nvml, SimulatedNvml) else "NVML")
    try:
        stop.wait()
    finally:
        app.stop()
    log.info("stopped")
    return 0


if __name__ == "__main__":
    sys.exit(main())
