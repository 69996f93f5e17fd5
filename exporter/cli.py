"""`gpu-exporter`: serve GPU metrics, or print the local GPUs once (`status`, `status --json`).

Bad flags, a bad --simulate-config file or a port in use print one line on stderr and exit 2, no traceback.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import signal
import socket
import sys
import threading
from collections.abc import Sequence
from dataclasses import asdict
from typing import Any

from exporter.app import ExporterApp
from exporter.errors import ConfigError, ExporterError, NvmlUnavailableError
from exporter.nvml import NodeSnapshot, NvmlAdapter, real_nvml
from exporter.simconfig import default_config, load_sim_config
from exporter.simulated import SimulatedNvml
from exporter.source import SourceSettings

PROG = "gpu-exporter"
EXIT_USAGE = 2
MAX_SIMULATED_GPUS = 64

log = logging.getLogger(__name__)


class UsageError(ExporterError):
    """A bad command line."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> Any:  # argparse prints usage + exits; we want one line and exit 2
        raise UsageError(message)


def _gpu_count(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a GPU count (got {text!r})") from None
    if not 0 <= value <= MAX_SIMULATED_GPUS:
        raise argparse.ArgumentTypeError(f"expected 0..{MAX_SIMULATED_GPUS} GPUs (got {value})")
    return value


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected seconds (got {text!r})") from None
    if not 0 <= value < 3600:
        raise argparse.ArgumentTypeError(f"expected seconds in 0..3600 (got {text})")
    return value


def _port(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a TCP port (got {text!r})") from None
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"expected a TCP port 0..65535 (got {value})")
    return value


def _backend_flags(suppress: bool) -> argparse.ArgumentParser:
    """Flags both `gpu-exporter` and `gpu-exporter status` take. On the subcommand their defaults are
    suppressed, so `gpu-exporter --simulate 2 status` keeps the value given before the subcommand."""
    default: dict[str, Any] = {"default": argparse.SUPPRESS} if suppress else {}
    backend = _Parser(add_help=False)
    group = backend.add_mutually_exclusive_group()
    group.add_argument("--simulate", type=_gpu_count, metavar="N",
                       help="serve N simulated H100-class GPUs instead of the real NVML", **default)
    group.add_argument("--simulate-config", metavar="FILE",
                       help="simulated GPUs, load patterns and faults from this YAML file", **default)
    backend.add_argument("--node-name", metavar="NAME",
                         help="value of the node label (default: $NODE_NAME, else the host name)", **default)
    backend.add_argument("--log-level", choices=("DEBUG", "INFO", "WARNING", "ERROR"),
                         help="log level on stderr (default INFO; WARNING for status)", **default)
    return backend


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog=PROG, parents=[_backend_flags(suppress=False)],
                     description="NVIDIA GPU metrics for Prometheus.")
    parser.add_argument("--address", default="0.0.0.0", help="listen address (default 0.0.0.0)")
    parser.add_argument("--port", type=_port, default=9400, help="listen port (default 9400)")
    parser.add_argument("--min-interval", type=_seconds, default=1.0, metavar="SECONDS",
                        help="minimum seconds between two NVML sweeps; scrapes in between share one "
                             "(default 1)")
    commands = parser.add_subparsers(dest="command", metavar="{status}")
    status = commands.add_parser("status", parents=[_backend_flags(suppress=True)],
                                 help="print the local GPUs once and exit")
    status.add_argument("--json", action="store_true", help="print JSON instead of a table")
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


def main(argv: Sequence[str] | None = None) -> int:
    try:
        args = build_parser().parse_args(argv)
        if args.simulate is not None and args.simulate_config:
            raise UsageError("argument --simulate: not allowed with argument --simulate-config")
        level = args.log_level or ("WARNING" if args.command == "status" else "INFO")
        logging.basicConfig(level=level, stream=sys.stderr,
                            format="%(asctime)s %(levelname)s %(name)s: %(message)s")
        if args.command == "status":
            return status(args)
        return serve(args)
    except (UsageError, ConfigError, ExporterError) as exc:
        print(f"{PROG}: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:  # `gpu-exporter status | head`
        sys.stderr.close()
        return 1


def serve(args: argparse.Namespace) -> int:
    nvml = nvml_backend(args)
    app = ExporterApp(nvml, node_name(args.node_name), SourceSettings(min_interval=args.min_interval))
    server = app.bind(args.address, args.port)  # ServeError (port in use) before any thread starts
    stop = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: stop.set())
    app.start()
    log.info("serving /metrics, /healthz, /readyz on http://%s:%d (%s)", server.address, server.port,
             "simulated NVML" if isinstance(nvml, SimulatedNvml) else "NVML")
    try:
        stop.wait()
    finally:
        app.stop()
    log.info("stopped")
    return 0


def status(args: argparse.Namespace) -> int:
    adapter = NvmlAdapter(nvml_backend(args))
    node = node_name(args.node_name)
    try:
        adapter.init()
        snapshot = adapter.read()
    except NvmlUnavailableError as exc:
        print(f"{PROG}: {exc}", file=sys.stderr)
        return 1
    finally:
        adapter.shutdown()
    if args.json:
        print(json.dumps(status_document(snapshot, node), indent=2))
    else:
        print(status_table(snapshot, node))
    return 0


def status_document(snapshot: NodeSnapshot, node: str) -> dict[str, Any]:
    """The JSON of `status --json`: node facts plus every DeviceSnapshot field (None = not supported)."""
    gpus = []
    for device in snapshot.devices:
        item = asdict(device)
        reasons = device.clocks_event_reasons
        item["clocks_event_reasons"] = None if reasons is None else [r for r, active in reasons if active]
        gpus.append(item)
    return {"node": node, "nvml_up": snapshot.nvml_up, "driver_version": snapshot.driver_version,
            "cuda_version": snapshot.cuda_version, "collected_at": snapshot.collected_at, "gpus": gpus}


def _fmt(value: float | None, pattern: str, scale: float = 1.0) -> str:
    return "-" if value is None else pattern.format(value * scale)


def status_table(snapshot: NodeSnapshot, node: str) -> str:
    header = ("GPU", "NAME", "UUID", "UP", "UTIL", "MEM USED/TOTAL", "TEMP", "POWER/LIMIT", "SM CLOCK", "P",
              "THROTTLE", "PROCS")
    rows = [header]
    gib = 1024**3
    for d in snapshot.devices:
        active = [r for r, on in d.clocks_event_reasons or () if on]
        rows.append((
            str(d.index), d.name or "?", d.uuid[:12] + "…" if len(d.uuid) > 13 else d.uuid or "?",
            "yes" if d.up else f"NO ({d.error})",
            _fmt(d.utilization, "{:.0f}%", 100),
            f"{_fmt(d.memory_used_bytes, '{:.1f}', 1 / gib)}/"
            f"{_fmt(d.memory_total_bytes, '{:.1f}', 1 / gib)} GiB",
            _fmt(d.temperature_celsius, "{:.0f}C"),
            f"{_fmt(d.power_watts, '{:.0f}')}/{_fmt(d.power_limit_watts, '{:.0f}')} W",
            _fmt(d.sm_clock_hertz, "{:.0f} MHz", 1e-6),
            _fmt(d.performance_state, "P{:.0f}"),
            ",".join(active) or ("-" if d.clocks_event_reasons is None else "none"),
            "-" if d.processes is None else str(len(d.processes)),
        ))
    widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
    lines = [f"node {node}  driver {snapshot.driver_version}  CUDA {snapshot.cuda_version or '?'}  "
             f"{len(snapshot.devices)} GPU(s)"]
    lines += ["  ".join(cell.ljust(widths[i]) for i, cell in enumerate(row)).rstrip() for row in rows]
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
