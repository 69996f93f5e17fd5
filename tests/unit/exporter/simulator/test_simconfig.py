"""--simulate-config parsing: a full file, and bad files naming the file and the field."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from exporter.errors import ConfigError
from exporter.simulator.config import GIB, MAX_SIMULATED_GPUS, default_config
from exporter.simulator.config_file import load_sim_config, parse_sim_config

FULL = """
seed: 7
pcie_latency_seconds: 0
gpus:
  - model: H100
    count: 2
    load: {pattern: square, low: 0.1, high: 0.9, period_seconds: 60, duty: 0.25}
    processes:
      - {pid: 4242, memory_gib: 30}
      - {pid: 4243, memory_gib: 10, sm_share: 3}
  - model: L4
    count: 1
    load: {pattern: ramp, start: 0, end: 1, duration_seconds: 120}
faults:
  - {type: gpu_lost, gpu: 1, at: 30, until: 90}
  - {type: not_supported, gpu: [0, 2], calls: [nvmlDeviceGetFanSpeed]}
  - {type: function_not_found, calls: [nvmlDeviceGetCurrentClocksEventReasons]}
  - {type: xid, gpu: 2, at: 45, code: 79}
  - {type: nvml_unavailable, error: DriverNotLoaded, until: 5}
  - {type: overheat, gpu: 0, at: 60, until: 600, celsius: 92.5}
"""


def test_full_file() -> None:
    config = parse_sim_config(FULL, "fleet.yaml")
    assert config.seed == 7 and config.pcie_latency_seconds == 0
    assert [g.model.key for g in config.gpus] == ["H100", "H100", "L4"]
    first = config.gpus[0]
    assert [(p.pid, p.memory_bytes, p.sm_share) for p in first.processes] == [
        (4242, 30 * GIB, 1.0), (4243, 10 * GIB, 3.0)]
    assert first.load.at(0) == 0.9 and first.load.at(20) == 0.1
    assert config.gpus[2].load.at(60) == 0.5
    lost, unsupported, missing, xid, unavailable, overheat = config.faults
    assert (lost.gpus, lost.at, lost.until) == ((1,), 30, 90)
    assert lost.active(30) and not lost.active(90) and not lost.active(29.9)
    assert unsupported.gpus == (0, 2) and unsupported.calls == ("nvmlDeviceGetFanSpeed",)
    assert missing.gpus is None and missing.applies_to(2)
    assert (xid.code, xid.at) == (79, 45)
    assert unavailable.error == "DriverNotLoaded"
    assert (overheat.type, overheat.gpus, overheat.at, overheat.until) == ("overheat", (0,), 60, 600)
    assert overheat.celsius == 92.5 and overheat.active(60) and not overheat.active(600)


@pytest.mark.parametrize("text, field, expected", [
    ("gpus: []", "gpus", "non-empty list"),
    ("gpus: [{model: H200}]", "gpus[0].model", "expected one of H100"),
    ("gpus: [{model: H100, count: 0}]", "gpus[0].count", "expected an integer in [1, 64] (got 0)"),
    ("gpus: [{model: H100, count: two}]", "gpus[0].count", "an integer"),
    ("gpus: [{model: H100, colour: red}]", "gpus[0].colour", "unknown field"),
    ("gpus: [{model: H100, count: 100000}]", "gpus[0].count", "expected an integer in [1, 64] (got 100000)"),
    ("gpus: [{count: 40}, {count: 20}, {count: 5}]", "gpus", "at most 64 GPUs in all (got 65)"),
    ("gpus: [{load: {pattern: zigzag}}]", "gpus[0].load.pattern", "expected one of constant"),
    ("gpus: [{load: {pattern: constant, value: 1.5}}]", "gpus[0].load.value", "<= 1"),
    ("gpus: [{processes: [{memory_gib: 3}]}]", "gpus[0].processes[0].pid", "required"),
    ("gpus: [{processes: [{pid: 7, memory_share: -1}]}]", "gpus[0].processes[0].memory_share", ">= 0"),
    ("gpus: [{processes: [{pid: 7, memory_share: lots}]}]", "gpus[0].processes[0].memory_share",
     "a finite number"),
    ("gpus: [{processes: [{pid: 7}, {pid: 8}, {pid: 7}]}]", "gpus[0].processes[2].pid",
     "pid 7 is already listed at gpus[0].processes[0]"),
    ("gpus: [{}]\nfaults: [{type: meteor}]", "faults[0].type", "expected one of gpu_lost"),
    ("gpus: [{}]\nfaults: [{type: gpu_lost, gpu: 3}]", "faults[0].gpu", "GPU index 0..0"),
    ("gpus: [{}]\nfaults: [{type: xid}]", "faults[0].code", "required"),
    ("gpus: [{}]\nfaults: [{type: not_supported, calls: [fan]}]", "faults[0].calls", "NVML call names"),
    ("gpus: [{}]\nfaults: [{type: gpu_lost, at: 10, until: 5}]", "faults[0].until", "after 'at'"),
    ("gpus: [{}]\nfaults: [{type: nvml_unavailable, error: Oops}]", "faults[0].error", "LibraryNotFound"),
    ("gpus: [{}]\nfaults: [{type: overheat}]", "faults[0].celsius", "required for an overheat fault"),
    ("gpus: [{}]\nfaults: [{type: overheat, celsius: null}]", "faults[0].celsius", "required"),
    ("gpus: [{}]\nfaults: [{type: overheat, celsius: hot}]", "faults[0].celsius", "expected a finite number"),
    ("gpus: [{}]\nfaults: [{type: overheat, celsius: 200}]", "faults[0].celsius", "<= 120"),
    ("gpus: [{}]\nfaults: [{type: overheat, celsius: 10}]", "faults[0].celsius", ">= 30"),
    ("gpus: [{}]\nfaults: [{type: overheat, celsius: .nan}]", "faults[0].celsius", "a finite number"),
    ("gpus: [{}]\nfaults: [{type: overheat, gpu: 1, celsius: 92}]", "faults[0].gpu", "GPU index 0..0"),
    ("gpus: [{}]\nfaults: [{type: overheat, celsius: 92, until: 0}]", "faults[0].until", "after 'at'"),
    ("gpus: [{}]\nfaults: [{type: gpu_lost, celsius: 92}]", "faults[0].celsius", "only for an overheat"),
    ("gpus: [{}]\nfaults: [{type: overheat, celsius: 92, offset: 3}]", "faults[0].offset", "unknown field"),
    ("- 1\n- 2", "(top level)", "expected a mapping"),
], ids=lambda v: v if isinstance(v, str) and "." in v and " " not in v else None)
def test_bad_file_names_file_and_field(text: str, field: str, expected: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse_sim_config(text, "fleet.yaml")
    message = str(info.value)
    assert re.match(rf"fleet\.yaml:[1-9]\d*: {re.escape(field)}: ", message), message
    assert expected in message


def test_every_problem_is_reported_together_each_at_its_line() -> None:
    with pytest.raises(ConfigError) as info:
        parse_sim_config("gpus:\n  - model: X\n    count: -1\nfaults: [{type: y}]", "f.yaml")
    lines = str(info.value).splitlines()  # one problem a line, `file:line: field: message`, as the rules file
    assert [line.split(": ")[0:2] for line in lines] == [
        ["f.yaml:2", "gpus[0].model"], ["f.yaml:3", "gpus[0].count"], ["f.yaml:4", "faults[0].type"]]


def test_yaml_syntax_error_names_the_line() -> None:
    with pytest.raises(ConfigError, match=r"^f\.yaml:2: not valid YAML"):
        parse_sim_config("gpus:\n\t- {model: H100}\n", "f.yaml")


def test_non_utf8_file_names_the_file_and_line(tmp_path: Path) -> None:
    latin1 = tmp_path / "fleet.yaml"
    latin1.write_bytes("gpus:\n  - {model: H100}  # caf\u00e9\n".encode("latin-1"))
    with pytest.raises(ConfigError) as info:
        load_sim_config(latin1)
    message = str(info.value)
    assert message.startswith(f"{latin1}:2: not UTF-8 text")
    assert "0xe9" in message and "\n" not in message


def test_unreadable_file(tmp_path: Path) -> None:
    missing = tmp_path / "nope.yaml"
    with pytest.raises(ConfigError, match=r"nope\.yaml: not found$"):
        load_sim_config(missing)


def test_the_gpu_limit_is_the_same_as_for_simulate() -> None:
    config = parse_sim_config("gpus: [{count: 60}, {model: L4, count: 4}]", "f.yaml")
    assert len(config.gpus) == MAX_SIMULATED_GPUS == 64
    with pytest.raises(ConfigError, match=r"f\.yaml:1: gpus: expected at most 64 GPUs in all \(got 65\)"):
        parse_sim_config("gpus: [{count: 64}, {model: L4}]", "f.yaml")


def test_default_fleet_is_h100_with_a_process_each() -> None:
    config = default_config(3)
    assert [g.model.name for g in config.gpus] == ["NVIDIA H100 80GB HBM3"] * 3
    assert all(len(g.processes) == 1 for g in config.gpus)
    with pytest.raises(ConfigError):
        default_config(-1)
