"""The simulated GPU fleet's configuration: GPU models, load patterns, processes and injected faults.

`--simulate N` uses `default_config(N)`; `--simulate-config FILE` reads the YAML format documented in
README.md ("The simulated backend and --simulate-config"). Validation gathers every problem and raises one
ConfigError naming the file and the field of each.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from yaml.nodes import Node

from exporter.errors import ConfigError
from exporter.simulator.models import MAX_MIG_SLICES, MODELS, GpuModel, MigLayout
from plumbing import yamlsafe
from plumbing.problems import Problem
from plumbing.yamlnodes import NodeReader, line_at, node_at

GIB = 1024**3
MIB = 1024**2
MAX_SIMULATED_GPUS = 64  # per node: `--simulate N` and a --simulate-config file alike
SIM_CONFIG_LIMITS = yamlsafe.YamlLimits(max_bytes=1024 * 1024)  # 64 GPUs with every field fit in 50 KB
# Upper bounds, so no value overflows later (a sleep, a byte count, time arithmetic): docs/hardening.md
MAX_SECONDS = 365 * 86_400.0  # periods, phases, durations, fault times: one year of simulated time
MAX_PCIE_LATENCY_SECONDS = 10.0  # slept on every PCIe sample
MAX_PID = 4_194_304  # Linux's PID_MAX_LIMIT
MAX_MEMORY_GIB = 1024.0  # per process; no GPU holds a TiB
MAX_SM_SHARE = 1000.0
MAX_SEED = 2**64 - 1
MAX_XID = 65_535
MAX_LIST_ITEMS = 1000  # faults, and processes per GPU group
MAX_NVLINKS = 18  # links of the largest simulated model (H100)


PATTERNS = ("constant", "sine", "square", "ramp")
FAULT_TYPES = ("gpu_lost", "not_supported", "function_not_found", "error", "xid", "nvml_unavailable",
               "overheat", "row_remap_pending", "row_remap_failed", "nvlink_down", "mig_layout")
CALL_FAULT_TYPES = ("not_supported", "function_not_found", "error")  # faults that name NVML calls
MIN_OVERHEAT_CELSIUS, MAX_OVERHEAT_CELSIUS = 30.0, 120.0
NVML_UNAVAILABLE_ERRORS = ("LibraryNotFound", "DriverNotLoaded", "LibRmVersionMismatch")
# pynvml's NVMLError_<name> an `error` fault raises from the calls it names (the library-wide ones are the
# nvml_unavailable fault's): NotSupported / NoPermission leave a field out, the others mark the GPU down.
ERROR_FAULT_ERRORS = ("Unknown", "NoPermission", "NotSupported", "GpuIsLost", "ResetRequired",
                      "InsufficientPower", "IrqIssue", "CorruptedInforom", "OperatingSystem", "Memory",
                      "NoData", "NotReady", "Timeout")


@dataclass(frozen=True)
class LoadPattern:
    """Target utilization (0..1) as a function of simulated seconds; `noise` adds smooth jitter."""

    kind: str = "sine"
    value: float = 0.5
    base: float = 0.55
    amplitude: float = 0.3
    low: float = 0.1
    high: float = 0.9
    period_seconds: float = 300.0
    duty: float = 0.5
    phase_seconds: float = 0.0
    start: float = 0.0
    end: float = 1.0
    duration_seconds: float = 600.0
    noise: float = 0.03

    def at(self, t: float) -> float:
        t = t + self.phase_seconds
        if self.kind == "constant":
            value = self.value
        elif self.kind == "sine":
            value = self.base + self.amplitude * math.sin(2 * math.pi * t / self.period_seconds)
        elif self.kind == "square":
            value = self.high if (t % self.period_seconds) < self.duty * self.period_seconds else self.low
        else:  # ramp
            value = self.start + (self.end - self.start) * min(max(t / self.duration_seconds, 0.0), 1.0)
        return min(max(value, 0.0), 1.0)


@dataclass(frozen=True)
class ProcessSpec:
    """A compute process on a simulated GPU: pid, memory it holds at full load, weight of its SM share."""

    pid: int
    memory_bytes: int
    sm_share: float = 1.0


@dataclass(frozen=True)
class SimGpuSpec:
    model: GpuModel
    load: LoadPattern
    processes: tuple[ProcessSpec, ...]
    mig: MigLayout | None = None  # set: the GPU is in MIG mode with this layout (MIG devices `MIG-...`)


@dataclass(frozen=True)
class Fault:
    """An injected fault, active for `at` <= simulated t < `until`. gpus None = every GPU."""

    type: str
    gpus: tuple[int, ...] | None = None
    at: float = 0.0
    until: float | None = None
    calls: tuple[str, ...] = ()
    code: int = 0
    error: str = "LibraryNotFound"  # NVMLError_<error>: for nvml_unavailable and error faults
    celsius: float = 0.0  # overheat: the temperature the GPU heats up to (with the usual thermal lag)
    links: tuple[int, ...] = ()  # nvlink_down: the NVLink links that are down
    mig: MigLayout | None = None  # mig_layout: the GPU's MIG layout from `at` on (None: MIG off)

    def active(self, t: float) -> bool:
        return t >= self.at and (self.until is None or t < self.until)

    def applies_to(self, index: int | None) -> bool:
        return self.gpus is None or (index is not None and index in self.gpus)


@dataclass(frozen=True)
class SimConfig:
    gpus: tuple[SimGpuSpec, ...]
    faults: tuple[Fault, ...] = ()
    seed: int = 1
    pcie_latency_seconds: float = 0.02
    # What nvmlSystemGetDriverVersion answers; calls newer than this driver raise FunctionNotFound (R550 by
    # default: older than R580, so the exporter's fallbacks for older drivers run in the demo and the tests).
    driver_version: str = "550.54.15"

    @property
    def driver_major(self) -> int:
        return int(self.driver_version.split(".")[0])


def default_config(count: int, seed: int = 1) -> SimConfig:
    """N H100-class GPUs, each with one inference process and its own phase of a slow sine load."""
    if count < 0:  # the CLI caps N at MAX_SIMULATED_GPUS; the demo sizes its nodes from the rule itself
        raise ConfigError(f"--simulate: expected a GPU count >= 0 (got {count})")
    gpus = tuple(
        SimGpuSpec(MODELS["H100"], LoadPattern(kind="sine", base=0.55, amplitude=0.3, period_seconds=300.0,
                                               phase_seconds=37.0 * i),
                   (ProcessSpec(pid=10_000 + i, memory_bytes=(30 + 4 * (i % 5)) * GIB),))
        for i in range(count))
    return SimConfig(gpus=gpus, seed=seed)


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


class _Parser:
    """Walks the YAML data for its structure (groups expand to GPUs, a fault's fields depend on its type)
    and reads every value through the one config reader, plumbing.yamlnodes.NodeReader, from the node the
    value came from: every problem is `file:line: field: expected ... (got ...)`, worded as in every other
    file the processes read."""

    def __init__(self, path: str, root: Node | None) -> None:
        self.path = path
        self.root = root
        self.reader = NodeReader(path)
        self.problems: list[Problem] = self.reader.problems

    def fail(self, field: str, message: str) -> None:
        self.reader.problem(line_at(self.root, field), field, message)

    def config(self, data: Any) -> SimConfig:
        if not isinstance(data, Mapping):
            line = line_at(self.root, "")
            raise ConfigError(str(Problem(self.path, line, "(top level)",
                                          f"expected a mapping with 'gpus' (got {_kind(data)})")))
        self.unknown(data, "", {"gpus", "faults", "seed", "pcie_latency_seconds", "driver_version"})
        gpus: list[SimGpuSpec] = []
        raw_gpus = data.get("gpus")
        if not isinstance(raw_gpus, list) or not raw_gpus:
            self.fail("gpus", f"expected a non-empty list of GPU groups (got {_kind(raw_gpus)})")
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
            self.fail("faults", f"expected a list (got {_kind(raw_faults)})")
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
        if self.problems:
            raise ConfigError("\n".join(str(problem) for problem in sorted(
                self.problems, key=lambda problem: problem.line)))
        return SimConfig(tuple(gpus), tuple(faults), int(seed), float(latency), str(driver))

    def group(self, raw: Any, field: str, first_index: int) -> list[SimGpuSpec]:
        if not isinstance(raw, Mapping):
            self.fail(field, f"expected a mapping with 'model' and 'count' (got {_kind(raw)})")
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

    def mig_layout(self, raw: Mapping[str, Any], field: str, model: GpuModel) -> MigLayout | None:
        """`mig: N` GPU instances of `mig_profile` (default the smallest), each of `mig_compute_instances`
        compute instances (default 1): N of them must fit in the GPU's seven compute slices, the compute
        instances in the profile's slices, and only a MIG-capable model takes `mig` at all."""
        mig = int(self.number(raw, "mig", f"{field}.mig", 0, integer=True, minimum=0, maximum=MAX_MIG_SLICES))
        name = raw.get("mig_profile")
        computes = int(self.number(raw, "mig_compute_instances", f"{field}.mig_compute_instances", 1,
                                   integer=True, minimum=1, maximum=MAX_MIG_SLICES))
        if not mig:
            for key in ("mig_profile", "mig_compute_instances"):
                if raw.get(key) is not None:
                    self.fail(f"{field}.{key}", "only with mig: N (N >= 1)")
            return None
        if not model.mig_capable:
            capable = ", ".join(m.key for m in MODELS.values() if m.mig_capable)
            self.fail(f"{field}.mig", f"expected 0: {model.key} does not support MIG (MIG-capable: "
                                      f"{capable}) (got {mig})")
            return None
        profile = model.mig_profile(str(name)) if name is not None else model.mig_profiles[0]
        if profile is None:
            names = ", ".join(p.name for p in model.mig_profiles)
            self.fail(f"{field}.mig_profile", f"expected one of {names} (got {name!r})")
            return None
        if mig * profile.slices > MAX_MIG_SLICES or mig * profile.memory_eighths > 8:
            fits = min(MAX_MIG_SLICES // profile.slices, 8 // profile.memory_eighths)
            self.fail(f"{field}.mig", f"expected at most {fits} {profile.name} devices on one GPU "
                                      f"(got {mig})")
            return None
        layout = MigLayout(profile, mig, computes)
        problem = layout.fits()
        if problem is not None:
            self.fail(f"{field}.mig_compute_instances", problem)
            return None
        return layout

    def load(self, raw: Any, field: str) -> LoadPattern:
        if raw is None:
            return LoadPattern()
        if not isinstance(raw, Mapping):
            self.fail(field, f"expected a mapping with 'pattern' (got {_kind(raw)})")
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
            self.fail(field, f"expected a list of {{pid, memory_gib}} (got {_kind(raw)})")
            return ()
        if len(raw) > MAX_LIST_ITEMS:
            self.fail(field, f"expected at most {MAX_LIST_ITEMS} processes (got {len(raw)})")
            return ()
        result = []
        seen: dict[int, str] = {}  # pid -> where it was first listed
        for i, item in enumerate(raw):
            where = f"{field}[{i}]"
            if not isinstance(item, Mapping):
                self.fail(where, f"expected a mapping with pid and memory_gib (got {_kind(item)})")
                continue
            self.unknown(item, where, {"pid", "memory_gib", "sm_share"})
            if "pid" not in item:
                self.fail(f"{where}.pid", "required")
            pid = self.number(item, "pid", f"{where}.pid", 1, integer=True, minimum=1, maximum=MAX_PID)
            gib = self.number(item, "memory_gib", f"{where}.memory_gib", 1.0, minimum=0,
                              maximum=MAX_MEMORY_GIB)
            share = self.number(item, "sm_share", f"{where}.sm_share", 1.0, minimum=0, maximum=MAX_SM_SHARE)
            valid = pid == item.get("pid") and not isinstance(item.get("pid"), bool)  # else reported above
            if valid and int(pid) in seen:
                self.fail(f"{where}.pid", f"pid {pid} is already listed at {seen[int(pid)]} (one entry per "
                                          f"process and GPU)")
                continue
            if valid:
                seen[int(pid)] = where
            result.append(ProcessSpec(int(pid), int(gib * GIB), float(share)))
        return tuple(result)

    def fault(self, raw: Any, field: str, specs: list[SimGpuSpec]) -> Fault | None:
        if not isinstance(raw, Mapping):
            self.fail(field, f"expected a mapping with 'type' (got {_kind(raw)})")
            return None
        self.unknown(raw, field, {"type", "gpu", "at", "until", "calls", "code", "error", "celsius", "link",
                                  *MIG_KEYS})
        kind = raw.get("type")
        if kind not in FAULT_TYPES:
            self.fail(f"{field}.type", f"expected one of {', '.join(FAULT_TYPES)} (got {kind!r})")
            return None
        gpus = self.gpu_list(raw.get("gpu"), f"{field}.gpu", len(specs))
        at = self.number(raw, "at", f"{field}.at", 0.0, minimum=0, maximum=MAX_SECONDS)
        until = self.number(raw, "until", f"{field}.until", None, minimum=0, maximum=MAX_SECONDS)
        if until is not None and until <= at:
            self.fail(f"{field}.until", f"expected a time after 'at' ({at}) (got {until})")
        calls: tuple[str, ...] = ()
        if kind in CALL_FAULT_TYPES:
            raw_calls = raw.get("calls")
            if not isinstance(raw_calls, list) or not raw_calls or not all(
                    isinstance(c, str) and c.startswith("nvml") for c in raw_calls):
                self.fail(f"{field}.calls", f"expected a list of NVML call names like nvmlDeviceGetFanSpeed "
                                            f"(got {raw_calls!r})")
            else:
                calls = tuple(raw_calls)
        code = 0
        if kind == "xid":
            if "code" not in raw:
                self.fail(f"{field}.code", "required for an xid fault (the XID number, e.g. 79)")
            code = int(self.number(raw, "code", f"{field}.code", 0, integer=True, minimum=1, maximum=MAX_XID))
        error = self.error_name(raw, str(kind), f"{field}.error")
        celsius = self.overheat_celsius(raw, str(kind), f"{field}.celsius")
        links = self.links(raw, str(kind), f"{field}.link")
        mig = self.fault_mig(raw, str(kind), field, [specs[i] for i in gpus or range(len(specs))])
        return Fault(str(kind), gpus, float(at), None if until is None else float(until), calls, code, error,
                     celsius, links, mig)

    def fault_mig(self, raw: Mapping[str, Any], kind: str, field: str,
                  specs: list[SimGpuSpec]) -> MigLayout | None:
        """The layout a mig_layout fault gives its GPUs (read as a group's `mig` fields; `mig: 0` turns MIG
        off); it must fit every GPU it names."""
        if kind != "mig_layout":
            for key in MIG_KEYS:
                if key in raw:
                    self.fail(f"{field}.{key}", f"only for a mig_layout fault (this fault is {kind})")
            return None
        if "until" in raw:
            self.fail(f"{field}.until", "a mig_layout fault lasts: the next mig_layout fault changes it")
        if "mig" not in raw:
            self.fail(f"{field}.mig", "required for a mig_layout fault (GPU instances, 0 for MIG off)")
        layouts = {self.mig_layout(raw, field, model) for model in {spec.model for spec in specs}}
        return next(iter(layouts)) if len(layouts) == 1 else None

    def links(self, raw: Mapping[str, Any], kind: str, field: str) -> tuple[int, ...]:
        """The NVLink links an nvlink_down fault takes down (a link the GPU does not have changes nothing)."""
        if kind != "nvlink_down":
            if "link" in raw:
                self.fail(field, f"only for an nvlink_down fault (this fault is {kind})")
            return ()
        value = raw.get("link")
        items = value if isinstance(value, list) else [value]
        if value is None or not items or not all(
                isinstance(i, int) and not isinstance(i, bool) and 0 <= i < MAX_NVLINKS for i in items):
            self.fail(field, f"expected a link number 0..{MAX_NVLINKS - 1} or a list of them (got {value!r})")
            return ()
        return tuple(items)

    def error_name(self, raw: Mapping[str, Any], kind: str, field: str) -> str:
        """The pynvml error (NVMLError_<name>) an nvml_unavailable or error fault raises."""
        if kind not in ("nvml_unavailable", "error"):
            if "error" in raw:
                self.fail(field, f"only for an error or nvml_unavailable fault (this fault is {kind})")
            return "LibraryNotFound"
        error = raw.get("error", "LibraryNotFound" if kind == "nvml_unavailable" else "Unknown")
        choices = NVML_UNAVAILABLE_ERRORS if kind == "nvml_unavailable" else ERROR_FAULT_ERRORS
        if error not in choices:
            library_wide = error in NVML_UNAVAILABLE_ERRORS
            hint = " (a library-wide error is the nvml_unavailable fault)" if library_wide else ""
            self.fail(field, f"expected one of {', '.join(choices)} (got {error!r}){hint}")
        return str(error)

    def overheat_celsius(self, raw: Mapping[str, Any], kind: str, field: str) -> float:
        if kind != "overheat":
            if "celsius" in raw:
                self.fail(field, f"only for an overheat fault (this fault is {kind})")
            return 0.0
        if raw.get("celsius") is None:
            self.fail(field, "required for an overheat fault (the temperature the GPU heats up to, e.g. 92)")
        return float(self.number(raw, "celsius", field, 0.0, minimum=MIN_OVERHEAT_CELSIUS,
                                 maximum=MAX_OVERHEAT_CELSIUS))

    def gpu_list(self, raw: Any, field: str, gpu_count: int) -> tuple[int, ...] | None:
        if raw is None or raw == "all":
            return None
        items = raw if isinstance(raw, list) else [raw]
        result = []
        for item in items:
            if isinstance(item, bool) or not isinstance(item, int) or not 0 <= item < max(gpu_count, 1):
                self.fail(field, f"expected a GPU index 0..{max(gpu_count - 1, 0)}, a list of them, or 'all' "
                                 f"(got {raw!r})")
                return None
            result.append(item)
        return tuple(result)

    def number(self, raw: Mapping[str, Any], key: str, field: str, default: Any, *, integer: bool = False,
               minimum: float | None = None, maximum: float | None = None) -> Any:
        """`raw[key]` read by NodeReader (a finite number or an integer, within the bounds), else `default`
        (absent, null, or reported)."""
        node = node_at(self.root, field)
        if key not in raw or raw[key] is None or node is None:
            return default
        if integer:
            low = None if minimum is None else int(minimum)
            high = None if maximum is None else int(maximum)
            value: float | None = self.reader.integer(node, field, low, high)
        else:
            value = self.reader.number(node, field, low=minimum, high=maximum)
        return default if value is None else value

    def unknown(self, raw: Mapping[str, Any], field: str, allowed: set[str]) -> None:
        """Unknown and duplicate keys of the mapping at `field`, as NodeReader reports them."""
        node = node_at(self.root, field)
        if node is not None:
            self.reader.mapping(node, field, known=allowed)


MIG_KEYS = ("mig", "mig_profile", "mig_compute_instances")
DRIVER_VERSION = re.compile(r"[1-9][0-9]{2}\.[0-9]{1,3}(\.[0-9]{1,3})?")


def _kind(value: Any) -> str:
    return "nothing" if value is None else f"{type(value).__name__} {value!r}"[:60]
