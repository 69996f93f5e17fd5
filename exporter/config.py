"""The exporter's YAML config file (`gpu-exporter --config FILE`): typed, validated, every problem at once.

Every section and field is optional; a missing one keeps its default:

    health:
      temperature_celsius: {normal: 65, throttled: 75, critical: 85}
      memory_percent: {normal: 70, throttled: 85, critical: 95}
    history:
      max_samples: 720
      retention_seconds: 3600
      sample_interval_seconds: 5
    xid:
      recovery_grace_seconds: 30
    trend:
      temperature_celsius_per_minute: 0.5
      utilization_percent_per_minute: 1.0
      memory_percent_per_minute: 1.0
      min_samples: 5              # fewer samples in the window -> trend "unknown"
      min_window_coverage: 0.5    # samples spanning less of the window -> "unknown"
    pod_resources:
      socket: /var/lib/kubelet/pod-resources/kubelet.sock
      refresh_interval_seconds: 10
      timeout_seconds: 5
      max_receive_message_bytes: 67108864
      stale_grace_intervals: 3    # refresh intervals the last pod labels outlive a kubelet failure
      resource_names: [nvidia.com/gpu, nvidia.com/gpu.shared]   # and always nvidia.com/mig-*, gpu.nvidia.com

A bad file raises `ExporterConfigError` listing every problem as `file:line: field: message`, read by the
same `NodeReader` as the autoscaler's rules file so both CLIs word a mistake alike.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from yaml.nodes import Node, ScalarNode

from exporter.errors import ConfigError
from exporter.health.history import HistorySettings, TrendThresholds
from exporter.health.state import Bands, HealthThresholds
from exporter.pods.podresources.cache import DEFAULT_REFRESH_INTERVAL_SECONDS, DEFAULT_STALE_GRACE_INTERVALS
from exporter.pods.podresources.client import (
    DEFAULT_MAX_RECEIVE_MESSAGE_BYTES,
    DEFAULT_SOCKET,
    DEFAULT_TIMEOUT_SECONDS,
    PodResourcesClientSettings,
)
from exporter.pods.podresources.mapping import DEFAULT_RESOURCE_NAMES, resource_filter
from plumbing import yamlsafe
from plumbing.problems import Problem
from plumbing.yamlnodes import NodeReader, line_of

CONFIG_LIMITS = yamlsafe.YamlLimits(max_bytes=1024 * 1024)  # the full file with comments is under 2 KB


@dataclass(frozen=True)
class PodResourcesConfig:
    socket: str = DEFAULT_SOCKET
    refresh_interval_seconds: float = DEFAULT_REFRESH_INTERVAL_SECONDS
    timeout_seconds: float = DEFAULT_TIMEOUT_SECONDS
    max_receive_message_bytes: int = DEFAULT_MAX_RECEIVE_MESSAGE_BYTES
    stale_grace_intervals: float = DEFAULT_STALE_GRACE_INTERVALS
    resource_names: tuple[str, ...] = DEFAULT_RESOURCE_NAMES

    def resource_filter(self) -> Callable[[str], bool]:
        return resource_filter(self.resource_names)

    def client_settings(self) -> PodResourcesClientSettings:
        return PodResourcesClientSettings(
            socket_path=self.socket,
            timeout_seconds=self.timeout_seconds,
            max_receive_message_bytes=self.max_receive_message_bytes,
        )


@dataclass(frozen=True)
class XidConfig:
    # Seconds a GPU marked down by XID 79/48 stays gpu_up 0 at least (see exporter/health/xid.py).
    recovery_grace_seconds: float = 30.0


@dataclass(frozen=True)
class ExporterConfig:
    health: HealthThresholds = field(default_factory=HealthThresholds)
    history: HistorySettings = field(default_factory=HistorySettings)
    trend: TrendThresholds = field(default_factory=TrendThresholds)
    pod_resources: PodResourcesConfig = field(default_factory=PodResourcesConfig)
    xid: XidConfig = field(default_factory=XidConfig)
    path: str | None = None  # the file it came from; None for the defaults


class ExporterConfigError(ConfigError):
    """Every problem of one config file, as the shared `Problem`s; str() lists them one per line."""

    def __init__(self, problems: list[Problem]) -> None:
        self.problems = tuple(problems)
        super().__init__("\n".join(str(p) for p in self.problems))


# --- field kinds: (expected text, converter returning None when the YAML value does not fit) ---
def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        return None
    return float(value)


def _number_in(low: float, high: float, *, above: bool = False) -> Callable[[Any], float | None]:
    """A finite number in [low, high] ((low, high] with `above`)."""

    def convert(value: Any) -> float | None:
        number = _number(value)
        if number is None or number > high or number < low or (above and number == low):
            return None
        return number

    return convert


def _int_in(low: int, high: int) -> Callable[[Any], int | None]:
    def convert(value: Any) -> int | None:
        ok = isinstance(value, int) and not isinstance(value, bool) and low <= value <= high
        return value if ok else None

    return convert


def _bool(value: Any) -> bool | None:
    return value if isinstance(value, bool) else None


def _non_empty_str(value: Any) -> str | None:
    return value if isinstance(value, str) and value.strip() else None


def _names(value: Any) -> tuple[str, ...] | None:
    if not isinstance(value, list) or not value:
        return None
    if not all(isinstance(v, str) and v.strip() and not any(c.isspace() for c in v) for v in value):
        return None
    return tuple(value)


_Kind = tuple[str, Callable[[Any], Any]]
PATH: _Kind = ("a non-empty path", _non_empty_str)
# Upper bounds: a value past them is a typo, and some would kill a background thread at run time (an interval
# of 1e300 s overflows Event.wait, 1e-300 s spins a core, a huge retention overflows datetime arithmetic).
MAX_INTERVAL_SECONDS = 3600.0
MIN_INTERVAL_SECONDS = 0.01
MAX_SAMPLES = 86_400  # a day of samples at one a second, per GPU
MAX_RETENTION_SECONDS = 7 * 86_400.0
MAX_GRACE_SECONDS = 86_400.0
MAX_RATE_PER_MINUTE = 1e6
MAX_STALE_GRACE_INTERVALS = 1000.0
MAX_GRPC_MESSAGE_BYTES = 2**31 - 1  # gRPC's option is an int32
BAND: _Kind = ("a number in [-1000, 1000]", _number_in(-1000.0, 1000.0))
INTERVAL: _Kind = (f"a number of seconds in [{MIN_INTERVAL_SECONDS:g}, {MAX_INTERVAL_SECONDS:g}]",
                   _number_in(MIN_INTERVAL_SECONDS, MAX_INTERVAL_SECONDS))
RATE: _Kind = (f"a number in (0, {MAX_RATE_PER_MINUTE:.0f}]",
               _number_in(0.0, MAX_RATE_PER_MINUTE, above=True))
SAMPLES: _Kind = (f"an integer in [2, {MAX_SAMPLES}]", _int_in(2, MAX_SAMPLES))

_BANDS = {"normal": BAND, "throttled": BAND, "critical": BAND}
_SCHEMA: dict[str, dict[str, Any]] = {
    "health": {"temperature_celsius": _BANDS, "memory_percent": _BANDS,
               "temperature_from_board": ("true or false", _bool)},
    "history": {
        "max_samples": SAMPLES,
        "retention_seconds": (f"a number of seconds in (0, {MAX_RETENTION_SECONDS:g}]",
                              _number_in(0.0, MAX_RETENTION_SECONDS, above=True)),
        "sample_interval_seconds": INTERVAL,
    },
    "trend": {
        "temperature_celsius_per_minute": RATE,
        "utilization_percent_per_minute": RATE,
        "memory_percent_per_minute": RATE,
        "min_samples": SAMPLES,
        "min_window_coverage": ("a number in 0..1", _number_in(0.0, 1.0)),
    },
    "pod_resources": {
        "socket": PATH,
        "refresh_interval_seconds": INTERVAL,
        "timeout_seconds": ("a number of seconds in (0, 300]", _number_in(0.0, 300.0, above=True)),
        "max_receive_message_bytes": (f"an integer in [4194304 (4 MiB), {MAX_GRPC_MESSAGE_BYTES}]",
                                      _int_in(4 * 1024 * 1024, MAX_GRPC_MESSAGE_BYTES)),
        "stale_grace_intervals": (f"a number in [0, {MAX_STALE_GRACE_INTERVALS:g}]",
                                  _number_in(0.0, MAX_STALE_GRACE_INTERVALS)),
        "resource_names": ("a non-empty list of resource names", _names),
    },
    "xid": {"recovery_grace_seconds": (f"a number of seconds in [0, {MAX_GRACE_SECONDS:g}]",
                                       _number_in(0.0, MAX_GRACE_SECONDS))},
}


@dataclass
class _Fields:
    """The valid fields of one mapping: leaf values converted, nested mappings read the same way."""

    node: Node | None = None  # None when the section is absent: problems about it point at line 1
    values: dict[str, Any] = field(default_factory=dict)
    sections: dict[str, _Fields] = field(default_factory=dict)

    def section(self, name: str) -> _Fields:
        return self.sections.get(name, _Fields())


def _read(reader: NodeReader, node: Node, schema: dict[str, Any], where: str) -> _Fields:
    """Walks `node` by `schema`; the shared reader reports unknown (with "did you mean"), duplicate and
    ill-typed fields, so this file's mistakes read like the rules file's."""
    found = _Fields(node)
    for key, value_node in (reader.mapping(node, where, known=list(schema)) or {}).items():
        name = f"{where}.{key}" if where else key
        spec = schema[key]
        if isinstance(spec, dict):
            found.sections[key] = _read(reader, value_node, spec, name)
            continue
        expected, convert = spec
        value = reader.converted(value_node, name, expected, convert)
        if value is not None:
            found.values[key] = value
    return found


def parse_config(text: str, path: str = "<config>") -> ExporterConfig:
    """Parse and validate; raises ExporterConfigError with every problem found, in line order."""
    try:
        root = yamlsafe.compose(text, path, CONFIG_LIMITS)
    except yamlsafe.YamlFileError as e:
        raise ExporterConfigError([Problem(path, e.line or 1, "yaml", e.message)]) from e
    if root is None or (isinstance(root, ScalarNode) and root.value == ""):
        return ExporterConfig(path=path)
    reader = NodeReader(path)
    top = _read(reader, root, _SCHEMA, "")
    health = top.section("health")
    bands: dict[str, Bands] = {}
    for quantity, default in (
        ("temperature_celsius", HealthThresholds().temperature_celsius),
        ("memory_percent", HealthThresholds().memory_percent),
    ):
        given = health.section(quantity)
        merged = {"normal": default.normal, "throttled": default.throttled, "critical": default.critical}
        merged.update(given.values)
        if merged["normal"] < merged["throttled"] < merged["critical"]:
            bands[quantity] = Bands(**merged)
        else:
            shown = ", ".join(f"{k}={v:g}" for k, v in merged.items())
            line = line_of(given.node) if given.node is not None else 1
            message = f"expected normal < throttled < critical (got {shown})"
            reader.problem(line, f"health.{quantity}", message)
    if reader.problems:
        raise ExporterConfigError(sorted(reader.problems, key=lambda p: p.line))
    return ExporterConfig(
        health=HealthThresholds(**bands, temperature_from_board=health.values.get("temperature_from_board",
                                                                                   False)),
        history=HistorySettings(**top.section("history").values),
        trend=TrendThresholds(**top.section("trend").values),
        pod_resources=PodResourcesConfig(**top.section("pod_resources").values),
        xid=XidConfig(**top.section("xid").values),
        path=path,
    )


def load_config(path: str | Path) -> ExporterConfig:
    """Read and parse a config file; an unreadable file is an ExporterConfigError too."""
    name = str(path)
    try:
        text = yamlsafe.read_text(path, CONFIG_LIMITS, "config file")
    except yamlsafe.YamlFileError as e:
        raise ExporterConfigError([Problem(name, e.line, "file", e.message)]) from e
    return parse_config(text, name)
