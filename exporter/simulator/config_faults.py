"""Faults and MIG layouts in the simulated-GPU file: the fields whose meaning depends on another one (which
fields a fault takes depends on its type; a MIG layout must fit the model's profiles and slices).

Kept apart from the file's structure (exporter/simulator/config_file.py), which inherits these readers: a
GPU group's `mig` fields and a mig_layout fault's are read by the one `mig_layout`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from exporter.simulator.config import (
    CALL_FAULT_TYPES,
    ERROR_FAULT_ERRORS,
    FAULT_TYPES,
    MAX_NVLINKS,
    MAX_OVERHEAT_CELSIUS,
    MAX_SECONDS,
    MAX_XID,
    MIN_OVERHEAT_CELSIUS,
    NVML_UNAVAILABLE_ERRORS,
    Fault,
    SimGpuSpec,
)
from exporter.simulator.config_fields import FieldReader, kind_of
from exporter.simulator.models import MAX_MIG_SLICES, MODELS, GpuModel, MigLayout

MIG_KEYS = ("mig", "mig_profile", "mig_compute_instances", "mig_enabled")
MAX_GPU_INSTANCE_ID = 14  # NVML's GPU instance ids on a 7-slice board run 0..14


class FaultReader(FieldReader):
    """Reads a fault (its type-dependent fields) and a MIG layout (a group's or a mig_layout fault's)."""

    def mig_layout(self, raw: Mapping[str, Any], field: str, model: GpuModel,
                   count: int = 0) -> MigLayout | None:
        """`mig: N` GPU instances of `mig_profile` (default the smallest), each of `mig_compute_instances`
        compute instances (default 1): N of them must fit in the GPU's seven compute slices, the compute
        instances in the profile's slices, and only a MIG-capable model takes `mig` at all."""
        mig = int(self.number(raw, "mig", f"{field}.mig", count, integer=True, minimum=0,
                              maximum=MAX_MIG_SLICES))
        name = raw.get("mig_profile")
        computes = int(self.number(raw, "mig_compute_instances", f"{field}.mig_compute_instances", 1,
                                   integer=True, minimum=1, maximum=MAX_MIG_SLICES))
        enabled = raw.get("mig_enabled", bool(mig))
        if not isinstance(enabled, bool):
            self.fail(f"{field}.mig_enabled", f"expected true or false (got {kind_of(enabled)})")
            enabled = bool(mig)
        if mig and not enabled:
            self.fail(f"{field}.mig_enabled", f"expected true with mig: {mig} (GPU instances need MIG mode)")
        if enabled and not mig and model.mig_capable:  # MIG mode on, no GPU instance yet
            for key in ("mig_profile", "mig_compute_instances"):
                if raw.get(key) is not None:
                    self.fail(f"{field}.{key}", "only with mig: N (N >= 1)")
            return MigLayout(model.mig_profiles[0], 0)
        if not mig and not enabled:
            for key in ("mig_profile", "mig_compute_instances"):
                if raw.get(key) is not None:
                    self.fail(f"{field}.{key}", "only with mig: N (N >= 1)")
            return None
        if not model.mig_capable:
            capable = ", ".join(m.key for m in MODELS.values() if m.mig_capable)
            where, got = ("mig", mig) if mig else ("mig_enabled", "true")
            self.fail(f"{field}.{where}", f"expected {0 if mig else 'false'}: {model.key} does not support "
                                          f"MIG (MIG-capable: {capable}) (got {got})")
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

    def fault(self, raw: Any, field: str, specs: list[SimGpuSpec]) -> Fault | None:
        if not isinstance(raw, Mapping):
            self.fail(field, f"expected a mapping with 'type' (got {kind_of(raw)})")
            return None
        self.unknown(raw, field, {"type", "gpu", "at", "until", "calls", "code", "error", "celsius", "link",
                                  "gpu_instance", *MIG_KEYS})
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
        destroyed = self.gpu_instance_ids(raw, str(kind), f"{field}.gpu_instance")
        return Fault(str(kind), gpus, float(at), None if until is None else float(until), calls, code, error,
                     celsius, links, mig, destroyed)

    def fault_mig(self, raw: Mapping[str, Any], kind: str, field: str,
                  specs: list[SimGpuSpec]) -> MigLayout | None:
        """The layout a mig_layout fault gives its GPUs (read as a group's `mig` fields; `mig: 0` turns MIG
        off); it must fit every GPU it names."""
        if kind == "mig_create":
            return self.created(raw, field, specs)
        if kind != "mig_layout":
            for key in MIG_KEYS:
                if key in raw:
                    self.fail(f"{field}.{key}", f"only for a mig_layout or mig_create fault (this fault is "
                                                f"{kind})")
            return None
        if "until" in raw:
            self.fail(f"{field}.until", "a mig_layout fault lasts: the next mig_layout fault changes it")
        if "mig" not in raw:
            self.fail(f"{field}.mig", "required for a mig_layout fault (GPU instances, 0 for MIG off)")
        layouts = {self.mig_layout(raw, field, model) for model in {spec.model for spec in specs}}
        return next(iter(layouts)) if len(layouts) == 1 else None

    def created(self, raw: Mapping[str, Any], field: str, specs: list[SimGpuSpec]) -> MigLayout | None:
        """What a mig_create fault adds: `mig` GPU instances (default 1) of `mig_profile` (default the
        smallest), each of `mig_compute_instances`, next to the GPU's others (where they still fit)."""
        if "until" in raw:
            self.fail(f"{field}.until", "a mig_create fault lasts: a mig_destroy fault removes the instance")
        if "mig_enabled" in raw:
            self.fail(f"{field}.mig_enabled", "only for a GPU group or a mig_layout fault")
        if raw.get("mig") == 0:
            self.fail(f"{field}.mig", "expected 1..7 GPU instances to create (got 0)")
            return None
        layouts = {self.mig_layout(raw, field, model, count=1) for model in {spec.model for spec in specs}}
        return next(iter(layouts)) if len(layouts) == 1 else None

    def gpu_instance_ids(self, raw: Mapping[str, Any], kind: str, field: str) -> tuple[int, ...]:
        """The GPU instance ids a mig_destroy fault destroys (an id the GPU does not have changes nothing)."""
        ids = self.numbers(raw, "gpu_instance", kind, "a mig_destroy", field, "a GPU instance id",
                           MAX_GPU_INSTANCE_ID)
        if ids and "until" in raw:
            self.fail(field.rsplit(".", 1)[0] + ".until", "a mig_destroy fault lasts")
        return ids

    def links(self, raw: Mapping[str, Any], kind: str, field: str) -> tuple[int, ...]:
        """The NVLink links an nvlink_down fault takes down (a link the GPU does not have changes nothing)."""
        return self.numbers(raw, "link", kind, "an nvlink_down", field, "a link number", MAX_NVLINKS - 1)

    def numbers(self, raw: Mapping[str, Any], key: str, kind: str, owner: str, field: str, what: str,
                highest: int) -> tuple[int, ...]:
        """`key`'s one number 0..`highest` or list of them on the one kind of fault that reads it, `owner` as
        the messages say it (`a mig_destroy`); () for any other kind, which must not carry the key."""
        if kind != owner.split()[-1]:
            if key in raw:
                self.fail(field, f"only for {owner} fault (this fault is {kind})")
            return ()
        value = raw.get(key)
        items = value if isinstance(value, list) else [value]
        if value is None or not items or not all(
                isinstance(i, int) and not isinstance(i, bool) and 0 <= i <= highest for i in items):
            self.fail(field, f"expected {what} 0..{highest} or a list of them (got {value!r})")
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
