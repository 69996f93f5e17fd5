"""`gpu-exporter`: serve GPU metrics, or print the local GPUs once (`status`, `status -o json`).

Bad flags, a bad --simulate-config, --config or --web-config-file or a port in use print one message on stderr
(naming the file, line and field for a config file) and exit 2, no traceback.
"""

from __future__ import annotations

import argparse
import logging
import sys
import threading
from collections.abc import Sequence
from types import ModuleType
from typing import Any

from exporter import status_cli
from exporter.backend_args import add_backend_arguments, exporter_config, node_name, nvml_backend
from exporter.config import ExporterConfig
from exporter.errors import ConfigError, ExporterError
from exporter.malloc import limit_malloc_arenas
from exporter.simulator.nvml import SimulatedNvml
from exporter.source import SourceSettings
from plumbing.cli import (
    HintingParser,
    add_version_argument,
    duration,
    fail,
    install_stop_handlers,
    port_number,
    silence_stdout,
)
from plumbing.web import WebConfig, WebConfigError, load_web_config

PROG = "gpu-exporter"
COMMANDS: dict[str, ModuleType] = {"status": status_cli}
"""The subcommands: each module exposes `HELP`, `add_arguments(parser)` and `run(args) -> int`, the contract
of every subcommand of the three CLIs (docs/development.md)."""

log = logging.getLogger(__name__)


class UsageError(ExporterError):
    """A bad command line."""


class _Parser(HintingParser):
    def error(self, message: str) -> Any:  # one line, exit 2; a typo gets the usage above it
        if "invalid choice" in message or "unrecognized arguments" in message:
            self.print_usage(sys.stderr)
        raise UsageError(self.hinted(message))


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog=PROG, description="NVIDIA GPU metrics for Prometheus.")
    add_backend_arguments(parser, suppress=False)
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
    for name, command in COMMANDS.items():
        child = commands.add_parser(name, help=command.HELP)
        command.add_arguments(child)
        add_version_argument(child, PROG)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    try:
        args = build_parser().parse_args(argv)
        if args.simulate is not None and args.simulate_config:
            raise UsageError("argument --simulate: not allowed with argument --simulate-config")
        level = args.log_level or ("WARNING" if args.command == "status" else "INFO")
        logging.basicConfig(level=level, stream=sys.stderr,
                            format="%(asctime)s %(levelname)s %(name)s: %(message)s")
        if args.command is not None:
            return int(COMMANDS[args.command].run(args))
        config = exporter_config(args)  # a bad file: ConfigError, exit 2, before anything starts
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
