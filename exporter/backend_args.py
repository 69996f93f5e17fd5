"""The flags choosing and configuring the GPU backend, which both `gpu-exporter` and `gpu-exporter status`
take, and what they build: the NVML module (real or simulated), the node name, the exporter config."""

from __future__ import annotations

import argparse
import dataclasses
import os
import socket
from typing import Any

from exporter.config import ExporterConfig, load_config
from exporter.nvml.adapter import real_nvml
from exporter.pods.procfs import DEFAULT_PROC_ROOT
from exporter.simulator.config import MAX_SIMULATED_GPUS, default_config
from exporter.simulator.config_file import load_sim_config
from exporter.simulator.nvml import SimulatedNvml
from plumbing.cli import whole_number


def add_backend_arguments(parser: argparse.ArgumentParser, suppress: bool) -> None:
    """On the subcommand (`suppress`) their defaults are suppressed, so `gpu-exporter --simulate 2 status`
    keeps the value given before the subcommand."""
    default: dict[str, Any] = {"default": argparse.SUPPRESS} if suppress else {}
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--simulate", type=whole_number(0, MAX_SIMULATED_GPUS, what="a GPU count"),
                       metavar="N",
                       help="serve N simulated H100-class GPUs instead of the real NVML", **default)
    group.add_argument("--simulate-config", metavar="FILE",
                       help="simulated GPUs, load patterns and faults from this YAML file", **default)
    parser.add_argument("--node-name", metavar="NAME",
                        help="value of the node label (default: $NODE_NAME, else the host name)", **default)
    parser.add_argument("--config", metavar="FILE",
                        help="YAML file: health thresholds, history, trend, pod-resources, XID settings",
                        **default)
    parser.add_argument("--temperature-from-board", action="store_true",
                        help="health temperature bands from each board's own NVML thresholds (throttled "
                             "from its max operating temperature, critical above its slowdown); the "
                             "config file's health.temperature_from_board", **default)
    parser.add_argument("--pod-resources-socket", metavar="PATH",
                        help="kubelet pod-resources socket (default: the config file's, else "
                             "/var/lib/kubelet/pod-resources/kubelet.sock)", **default)
    parser.add_argument("--proc-root", metavar="PATH",
                        help="where to read /proc/<pid>/cgroup of GPU processes and the driver's device "
                             "minors (the host's /proc mounted in the DaemonSet; default /proc)",
                        default=argparse.SUPPRESS if suppress else DEFAULT_PROC_ROOT)
    parser.add_argument("--log-level", choices=("DEBUG", "INFO", "WARNING", "ERROR"),
                        help="log level on stderr (default INFO; WARNING for status)", **default)


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
