"""Reading the simulated-GPU file (`--simulate-config FILE`, the YAML format documented in README.md, "The
simulated backend and --simulate-config"): its structure, the top level, GPU groups expanded to GPUs, load
patterns and processes. Validation gathers every problem and raises one ConfigError naming the file, line and
field of each; the faults and MIG layouts are read by exporter/simulator/config_faults.py.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from exporter.errors import ConfigError
from exporter.simulator.config import (
    GIB,
    MAX_LIST_ITEMS,
    MAX_MEMORY_GIB,
    MAX_PCIE_LATENCY_SECONDS,
    MAX_PID,
    MAX_SECONDS,
    MAX_SEED,
    MAX_SIMULATED_GPUS,
    MAX_SM_SHARE,
    OLDEST_DRIVER,
    PATTERNS,
    Fault,
    LoadPattern,
    ProcessSpec,
    SimConfig,
    SimGpuSpec,
)
from exporter.simulator.config_faults import MIG_KEYS, FaultReader
from exporter.simulator.config_fields import kind_of
from exporter.simulator.models import MODELS
from plumbing import yamlsafe
from plumbing.problems import Problem
from plumbing.yamlnodes import line_at

SIM_CONFIG_LIMITS = yamlsafe.YamlLimits(max_bytes=1024 * 1024)  # 64 GPUs with every field fit in 50 KB
DRIVER_VERSION = re.compile(r"[1-9][0-9]{2}\.[0-9]{1,3}(\.[0-9]{1,3})?")


def load_sim_config(path: str | Path) -> SimConfig:
    try:
        text = yamlsafe.read_text(path, SIM_CONFIG_LIMITS, "simulate config")
    except yamlsafe.YamlFileError as exc:
        raise _file_error(exc) from exc
    return parse_sim_config(text, str(path))


def parse_sim_config(text: str, path: str) -> SimConfig:
    try:
        root = yamlsafe.compose(text, path, SIM_CONFIG_LIMITS)
        data = yamlsafe.construct(root, path)
    except yamlsafe.YamlFileError as exc:
        raise _file_error(exc) from exc
    return _Parser(path, root).config(data)


def _file_error(exc: yamlsafe.YamlFileError) -> ConfigError:
    """The reader's own message, `file:line: message`, as every YAML file the processes read."""
    return ConfigError(str(exc))


class _Parser(FaultReader):
    """Walks the YAML data for its structure (groups expand to GPUs; a fault's fields, read by FaultReader,
    depend on its type); every value is read as exporter/simulator/config_fields.py reads it."""

    def config(self, data: Any) -> SimConfig:
        if not isinstance(data, Mapping):
            line = line_at(self.root, "")
            raise ConfigError(str(Problem(self.path, line, "(top level)",
                                          f"expected a mapping with 'gpus' (got {kind_of(data)})")))
        self.unknown(data, "", {"gpus", "faults", "seed", "pcie_latency_seconds", "driver_version",
                                "privileged"})
        gpus: list[SimGpuSpec] = []
        raw_gpus = data.get("gpus")
        if not isinstance(raw_gpus, list) or not raw_gpus:
            self.fail("gpus", f"expected a non-empty list of GPU groups (got {kind_of(raw_gpus)})")
            raw_gpus = []
        if len(raw_gpus) > MAX_SIMULATED_GPUS:  # each group has a GPU at least: refused before expanding
            self.fail("gpus", f"expected at most {MAX_SIMULATED_GPUS} GPUs in all "
                              f"(got {len(raw_gpus)} groups)")
            raw_gpus = []
        for i, group in enumerate(raw_gpus):
            gpus.extend(self.group(group, f"gpus[{i}]", len(gpus)))
        if len(gpus) > MAX_SIMULATED_GPUS:
            self.fail("gpus", f"expected at most {MAX_SIMULATED_GPUS} GPUs in all (got {len(gpus)})")
        raw_faults = data.get("faults", []) or []
        faults: list[Fault] = []
        if not isinstance(raw_faults, list):
            self.fail("faults", f"expected a list (got {kind_of(raw_faults)})")
            raw_faults = []
        if len(raw_faults) > MAX_LIST_ITEMS:
            self.fail("faults", f"expected at most {MAX_LIST_ITEMS} faults (got {len(raw_faults)})")
            raw_faults = []
        for i, raw in enumerate(raw_faults):
            fault = self.fault(raw, f"faults[{i}]", gpus)
            if fault is not None:
                faults.append(fault)
        seed = self.number(data, "seed", "seed", 1, integer=True, minimum=0, maximum=MAX_SEED)
        latency = self.number(data, "pcie_latency_seconds", "pcie_latency_seconds", 0.02, minimum=0,
                              maximum=MAX_PCIE_LATENCY_SECONDS)
        driver = data.get("driver_version", SimConfig.driver_version)
        if not isinstance(driver, str) or not DRIVER_VERSION.fullmatch(driver):
            self.fail("driver_version", f"expected a driver version like 550.54.15 (got {driver!r})")
        elif int(driver.split(".")[0]) < OLDEST_DRIVER:
            self.fail("driver_version", f"expected R{OLDEST_DRIVER} or newer, the oldest driver the "
                                        f"simulator models (got {driver!r})")
        privileged = data.get("privileged", False)
        if not isinstance(privileged, bool):
            self.fail("privileged", f"expected true or false (got {kind_of(privileged)})")
        if self.problems:
            raise ConfigError("\n".join(str(problem) for problem in sorted(
                self.problems, key=lambda problem: problem.line)))
        return SimConfig(tuple(gpus), tuple(faults), int(seed), float(latency), str(driver), privileged)

    def group(self, raw: Any, field: str, first_index: int) -> list[SimGpuSpec]:
        if not isinstance(raw, Mapping):
            self.fail(field, f"expected a mapping with 'model' and 'count' (got {kind_of(raw)})")
            return []
        self.unknown(raw, field, {"model", "count", "load", "processes", *MIG_KEYS})
        model_key = raw.get("model", "H100")
        model = MODELS.get(str(model_key))
        if model is None:
            self.fail(f"{field}.model", f"expected one of {', '.join(MODELS)} (got {model_key!r})")
        count = int(self.number(raw, "count", f"{field}.count", 1, integer=True, minimum=1,
                                maximum=MAX_SIMULATED_GPUS))
        load = self.load(raw.get("load"), f"{field}.load")
        processes = self.processes(raw.get("processes"), f"{field}.processes")
        if model is None:
            return []
        return [SimGpuSpec(model, load, processes, self.mig_layout(raw, field, model)) for _ in range(count)]

    def load(self, raw: Any, field: str) -> LoadPattern:
        if raw is None:
            return LoadPattern()
        if not isinstance(raw, Mapping):
            self.fail(field, f"expected a mapping with 'pattern' (got {kind_of(raw)})")
            return LoadPattern()
        ratio_fields = {"value", "base", "amplitude", "low", "high", "duty", "start", "end", "noise"}
        time_fields = {"period_seconds", "phase_seconds", "duration_seconds"}
        self.unknown(raw, field, {"pattern"} | ratio_fields | time_fields)
        kind = raw.get("pattern", "sine")
        if kind not in PATTERNS:
            self.fail(f"{field}.pattern", f"expected one of {', '.join(PATTERNS)} (got {kind!r})")
            kind = "sine"
        values: dict[str, Any] = {"kind": kind}
        defaults = LoadPattern()
        for name in ratio_fields:
            values[name] = self.number(raw, name, f"{field}.{name}", getattr(defaults, name), minimum=0,
                                       maximum=1)
        for name in time_fields:
            minimum = 0.0 if name == "phase_seconds" else 1e-3
            values[name] = self.number(raw, name, f"{field}.{name}", getattr(defaults, name), minimum=minimum,
                                       maximum=MAX_SECONDS)
        return LoadPattern(**values)

    def processes(self, raw: Any, field: str) -> tuple[ProcessSpec, ...]:
        if raw is None:
            return ()
        if not isinstance(raw, list):
            self.fail(field, f"expected a list of {{pid, memory_gib}} (got {kind_of(raw)})")
            return ()
        if len(raw) > MAX_LIST_ITEMS:
            self.fail(field, f"expected at most {MAX_LIST_ITEMS} processes (got {len(raw)})")
            return ()
        result = []
        seen: dict[int, str] = {}  # pid -> where it was first listed
        for i, item in enumerate(raw):
            where = f"{field}[{i}]"
            if not isinstance(item, Mapping):
                self.fail(where, f"expected a mapping with pid and memory_gib (got {kind_of(item)})")
                continue
            self.unknown(item, where, {"pid", "memory_gib", "sm_share", "memory_share"})
            if "pid" not in item:
                self.fail(f"{where}.pid", "required")
            pid = self.number(item, "pid", f"{where}.pid", 1, integer=True, minimum=1, maximum=MAX_PID)
            gib = self.number(item, "memory_gib", f"{where}.memory_gib", 1.0, minimum=0,
                              maximum=MAX_MEMORY_GIB)
            share = self.number(item, "sm_share", f"{where}.sm_share", 1.0, minimum=0, maximum=MAX_SM_SHARE)
            memory_share = self.number(item, "memory_share", f"{where}.memory_share", None, minimum=0,
                                       maximum=MAX_SM_SHARE)  # None: the SM weight
            valid = pid == item.get("pid") and not isinstance(item.get("pid"), bool)  # else reported above
            if valid and int(pid) in seen:
                self.fail(f"{where}.pid", f"pid {pid} is already listed at {seen[int(pid)]} (one entry per "
                                          f"process and GPU)")
                continue
            if valid:
                seen[int(pid)] = where
            result.append(ProcessSpec(int(pid), int(gib * GIB), float(share),
                                      None if memory_share is None else float(memory_share)))
        return tuple(result)
