"""The exporter config file: defaults, values, and every problem reported as file:line: field: message."""

from __future__ import annotations

from pathlib import Path

import pytest

from exporter.config import ExporterConfig, ExporterConfigError, load_config, parse_config
from exporter.errors import ConfigError
from exporter.health.state import Bands


def problems(text: str) -> list[str]:
    with pytest.raises(ExporterConfigError) as caught:
        parse_config(text, "cfg.yaml")
    return [str(p) for p in caught.value.problems]


@pytest.mark.parametrize("text", ["", "# only a comment\n", "---\n"])
def test_empty_file_is_all_defaults(text: str) -> None:
    config = parse_config(text, "cfg.yaml")
    assert config == ExporterConfig(path="cfg.yaml")
    assert config.health.temperature_celsius == Bands(65, 75, 85)
    assert config.history.max_samples == 720


def test_full_file(tmp_path: Path) -> None:
    path = tmp_path / "exporter.yaml"
    path.write_text(
        """
health:
  temperature_celsius: {normal: 60, throttled: 70, critical: 80.5}
  memory_percent:
    critical: 98
history:
  max_samples: 100
  retention_seconds: 600
trend:
  temperature_celsius_per_minute: 0.25
pod_resources:
  socket: /run/kubelet.sock
  refresh_interval_seconds: 2.5
  max_receive_message_bytes: 134217728
"""
    )
    config = load_config(path)
    assert config.health.temperature_celsius == Bands(60, 70, 80.5)
    assert config.health.memory_percent == Bands(70, 85, 98)  # partial section keeps the other defaults
    assert (config.history.max_samples, config.history.retention_seconds) == (100, 600.0)
    assert config.trend.temperature_celsius_per_minute == 0.25
    assert config.trend.utilization_percent_per_minute == 1.0
    settings = config.pod_resources.client_settings()
    assert (settings.socket_path, settings.max_receive_message_bytes) == ("/run/kubelet.sock", 134217728)
    assert config.pod_resources.refresh_interval_seconds == 2.5
    assert config.path == str(path)


def test_every_problem_with_its_line() -> None:
    text = """health:
  temperature_celsius: {normal: 80, throttled: 75, critical: 85}
  memory_percent:
    normal: high
    warm: 3
history:
  max_samples: 1
  retention_seconds: -5
trend:
  utilization_percent_per_minute: true
pod_resources:
  socket: ""
  max_receive_message_bytes: 1024
  timeout_seconds: [1]
extra: 1
"""
    assert problems(text) == [  # in line order, worded as the rules file's (one shared reader)
        "cfg.yaml:2: health.temperature_celsius: expected normal < throttled < critical "
        "(got normal=80, throttled=75, critical=85)",
        "cfg.yaml:4: health.memory_percent.normal: expected a number in [-1000, 1000] (got 'high')",
        "cfg.yaml:5: health.memory_percent.warm: unknown field "
        "(expected one of: critical, normal, throttled)",
        "cfg.yaml:7: history.max_samples: expected an integer in [2, 86400] (got 1)",
        "cfg.yaml:8: history.retention_seconds: expected a number of seconds in (0, 604800] (got -5)",
        "cfg.yaml:10: trend.utilization_percent_per_minute: expected a number in (0, 1000000] (got true)",
        "cfg.yaml:12: pod_resources.socket: expected a non-empty path (got '')",
        "cfg.yaml:13: pod_resources.max_receive_message_bytes: "
        "expected an integer in [4194304 (4 MiB), 2147483647] (got 1024)",
        "cfg.yaml:14: pod_resources.timeout_seconds: expected a number of seconds in (0, 300] (got a list)",
        "cfg.yaml:15: extra: unknown field (expected one of: health, history, pod_resources, trend, xid)",
    ]


def test_order_violation_against_defaults_is_reported() -> None:
    assert problems("health:\n  memory_percent:\n    normal: 90\n") == [
        "cfg.yaml:3: health.memory_percent: expected normal < throttled < critical "
        "(got normal=90, throttled=85, critical=95)"
    ]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("- 1\n- 2\n", "cfg.yaml:1: (top level): expected a mapping (got a list)"),
        ("health: 3\n", "cfg.yaml:1: health: expected a mapping (got 3)"),
        ("history:\n  max_samples: 5\n  max_samples: 6\n", "cfg.yaml:3: history.max_samples: duplicate key"),
        ("histroy: {}\n", "cfg.yaml:1: histroy: unknown field (expected one of: health, history, "
         "pod_resources, trend, xid); did you mean 'history'?"),
        ("xid: {recovery_grace_second: 5}\n", "cfg.yaml:1: xid.recovery_grace_second: unknown field "
         "(expected one of: recovery_grace_seconds); did you mean 'recovery_grace_seconds'?"),
        ("health: {\n  x: [\n", "cfg.yaml:3: yaml: not valid YAML"),
        ("history:\n  retention_seconds: .nan\n", "cfg.yaml:2: history.retention_seconds: expected a num"),
    ],
)
def test_shape_problems(text: str, expected: str) -> None:
    found = problems(text)
    assert len(found) == 1 and found[0].startswith(expected), found


def test_unreadable_file_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"/missing\.yaml: not found$"):
        load_config(tmp_path / "missing.yaml")


def test_pod_resources_names_grace_and_trend_sample_rules() -> None:
    config = parse_config("""
pod_resources:
  stale_grace_intervals: 0
  resource_names: [nvidia.com/gpu, example.com/vgpu]
trend: {min_samples: 3, min_window_coverage: 0.25}
""", "cfg.yaml")
    assert config.pod_resources.stale_grace_intervals == 0
    assert config.pod_resources.resource_names == ("nvidia.com/gpu", "example.com/vgpu")
    accepts = config.pod_resources.resource_filter()
    assert accepts("example.com/vgpu") and accepts("nvidia.com/mig-1g.10gb")
    assert not accepts("nvidia.com/gpu.shared")
    assert (config.trend.min_samples, config.trend.min_window_coverage) == (3, 0.25)
    defaults = ExporterConfig().pod_resources
    assert defaults.resource_names == ("nvidia.com/gpu", "nvidia.com/gpu.shared")
    assert defaults.stale_grace_intervals == 3


def test_bad_resource_names_and_trend_rules_name_the_field() -> None:
    with pytest.raises(ExporterConfigError) as caught:
        parse_config("pod_resources:\n  resource_names: []\n  stale_grace_intervals: -1\n"
                     "trend:\n  min_samples: 1\n  min_window_coverage: 2\n", "cfg.yaml")
    text = str(caught.value)
    for field in ("pod_resources.resource_names", "pod_resources.stale_grace_intervals", "trend.min_samples",
                  "trend.min_window_coverage"):
        assert "cfg.yaml:" in text and f"{field}: expected" in text, field
    with pytest.raises(ExporterConfigError, match="resource_names: expected a non-empty list"):
        parse_config("pod_resources:\n  resource_names: nvidia.com/gpu\n", "cfg.yaml")
