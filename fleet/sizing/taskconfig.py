"""The parallel sizes of `gpu-fleet estimate`, from flags or from our users' task configuration JSON.

    {"model": {"id_or_path": "llama-3-70b"},
     "parameters": {"tp-size": [1, 2, 4], "pp-size": [1], "dp-size": [1], "cp-size": [1], "dcp-size": [1]}}

Each of tp, pp, dp, cp and dcp goes by the names the task scheduler takes (`tensor-parallel-size`,
`tp-size`, `tp_size`, `tp`, ...), hyphenated or underscored alike; a value is a whole number >= 1 or a list
of them, and the estimate has one row per combination. Other parameters of the file (runtime settings) are
not ours and are left alone; the ones read here are validated, each problem naming the file and the field.
"""

from __future__ import annotations

import itertools
import json
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from fleet.errors import UsageError
from plumbing.files import NOT_FOUND, read_regular
from plumbing.numbers import ascii_int

DIMENSIONS: dict[str, tuple[str, ...]] = {
    "tp": ("tensor-parallel-size", "tp-size", "tp"),
    "pp": ("pipeline-parallel-size", "pp-size", "pp"),
    "dp": ("data-parallel-size", "dp-size", "dp"),
    "cp": ("context-parallel-size", "cp-size", "cp"),
    "dcp": ("decode-context-parallel-size", "dcp-size", "dcp"),
}
"""Each dimension's names, hyphenated (underscored names are the same with `_`)."""
MAX_SIZE = 1 << 16
MAX_FILE_BYTES = 1024 * 1024
MAX_ROWS = 1024
_MODEL_SIZE = re.compile(r"(?<![0-9.])([0-9]{1,4}(?:\.[0-9]{1,3})?)[bB](?![a-zA-Z0-9])")


def flag_names(dimension: str) -> list[str]:
    """Every flag spelling of a dimension: --tp, --tp-size, --tp_size, --tensor-parallel-size, ..."""
    names = DIMENSIONS[dimension]
    spellings = {*names, *(n.replace("-", "_") for n in names)}
    return [f"--{n}" for n in sorted(spellings, key=lambda n: (len(n), n))]


def canonical(name: str) -> str | None:
    """The dimension a parameter name means ('tp_size' -> 'tp'), or None for a name not ours."""
    spelled = name.strip().lower().replace("_", "-")
    return next((dim for dim, names in DIMENSIONS.items() if spelled in names), None)


def sizes(value: object, where: str) -> list[int]:
    """A whole number >= 1, a list of them, or text of them separated by commas; UsageError naming `where`."""
    items: Sequence[object]
    if isinstance(value, str):
        items = [part.strip() for part in value.split(",")]
    elif isinstance(value, list):
        items = value
    else:
        items = [value]
    found: list[int] = []
    for item in items:
        number = ascii_int(item) if isinstance(item, str) else item
        if isinstance(number, bool) or not isinstance(number, int) or not 1 <= number <= MAX_SIZE:
            raise UsageError(f"{where}: expected a whole number from 1 to {MAX_SIZE} or a list of them "
                             f"(got {json.dumps(value)[:60]})")
        found.append(number)
    if not found:
        raise UsageError(f"{where}: expected at least one size (got an empty list)")
    return list(dict.fromkeys(found))


@dataclass(frozen=True)
class TaskConfig:
    """What the file says: the model's name (when it has one) and the sizes of each dimension it names."""

    model: str | None
    sizes: Mapping[str, list[int]]


def read_task_config(path: str) -> TaskConfig:
    """The file's model name and parallel sizes; UsageError naming the file and the field otherwise."""
    where = f"--task-config {path}"
    try:
        raw = read_regular(path, MAX_FILE_BYTES)  # a FIFO, /dev/zero or a sparse 4 GiB file: refused unread
    except OSError as exc:
        if isinstance(exc, FileNotFoundError):  # `FILE: not found`, as every tool says it
            raise UsageError(f"{path}: {NOT_FOUND} (--task-config)") from exc
        raise UsageError(f"{where}: cannot read it: {exc.strerror or type(exc).__name__}") from exc
    if len(raw) > MAX_FILE_BYTES:
        raise UsageError(f"{where}: larger than {MAX_FILE_BYTES:,} bytes")
    try:
        document = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as exc:
        line = f" line {exc.lineno}" if isinstance(exc, json.JSONDecodeError) else ""
        raise UsageError(f"{where}:{line}: not JSON ({type(exc).__name__})") from None
    except ValueError:  # an integer past the interpreter's 4,300 digits
        raise UsageError(f"{where}: a number too long to read (more than 4,300 digits)") from None
    if not isinstance(document, dict):
        raise UsageError(f"{where}: expected a JSON object with \"parameters\"")
    model = document.get("model")
    name = model.get("id_or_path") if isinstance(model, dict) else model
    if model is not None and not isinstance(name, str):
        raise UsageError(f"{where}: model: expected {{\"id_or_path\": \"NAME\"}} or a name")
    parameters = document.get("parameters", {})
    if not isinstance(parameters, dict):
        raise UsageError(f"{where}: parameters: expected an object of parameter names")
    found: dict[str, list[int]] = {}
    for key, value in parameters.items():
        dimension = canonical(str(key))
        if dimension is None:
            continue
        if dimension in found:
            raise UsageError(f"{where}: parameters.{key}: {dimension} is given twice (under two names)")
        found[dimension] = sizes(value, f"{where}: parameters.{key}")
    return TaskConfig(name if isinstance(name, str) else None, found)


def params_from_name(name: str) -> str | None:
    """The parameter count a model's name carries: 'meta-llama/Llama-3.1-70B-Instruct' -> '70B'."""
    match = _MODEL_SIZE.search(name)
    return f"{match.group(1)}B" if match else None


Combination = dict[str, int | None]


def combinations(given: Mapping[str, list[int] | None]) -> list[Combination]:
    """One row per combination of the sizes given; a dimension not given is None (tp, pp: search the
    smallest that fits; dp, cp, dcp: 1)."""
    axes: list[list[tuple[str, int | None]]] = []
    for dim in DIMENSIONS:
        values = given.get(dim)
        chosen: list[int | None] = list(values) if values else [None]
        axes.append([(dim, size) for size in chosen])
    count = math.prod(len(axis) for axis in axes)
    if count > MAX_ROWS:
        raise UsageError(f"the sizes give {count:,} combinations, more than {MAX_ROWS:,}")
    return [dict(row) for row in itertools.product(*axes)]
