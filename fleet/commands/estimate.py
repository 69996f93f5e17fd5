"""`gpu-fleet estimate`: memory per GPU and the GPU count of serving a model (`sizing.memory`'s formula).

Given --tp/--pp it says whether that split fits in the GPU's memory (exit 0) or not (exit 1); without them it
finds the smallest tp * pp that fits. Sizes may be lists (`--tp 1,2,4`) or come from a task configuration
file (`sizing.taskconfig`): one row per combination, exit 0 only when every row fits. The GPU's memory is
`--gpu-memory`, else the fleet's real per-model total from Prometheus (an "80GB" H100 has 79.6 GiB), else
80 GiB. `--then-select` / `--then-wait` go on to choose GPUs that fit the estimate (as `select`, `wait`).
A split the model cannot take is refused with the flag named (exit 2).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from dataclasses import dataclass

from fleet.errors import EXIT_CODES, EXIT_NOT_FOUND, EXIT_OK, PrometheusError, UsageError
from fleet.output import CSV, JSON, WIDE, add_output_arguments, aligned, as_csv, failure_json
from fleet.placing.choosing import (
    DOCKER,
    KUBERNETES,
    SELECT_FORMATS,
    add_request_arguments,
    request_of,
    select_and_report,
)
from fleet.placing.selection import ELIGIBILITY
from fleet.placing.waiting import add_wait_arguments, wait_and_report
from fleet.querying.connection import add_connection_arguments, connect
from fleet.sizing.memory import (
    DEFAULT_FRAGMENTATION,
    PRESETS,
    Architecture,
    Estimate,
    InvalidSplit,
    Split,
    Workload,
    estimate,
    kv_bytes_per_token,
    smallest_fit,
)
from fleet.sizing.taskconfig import (
    DIMENSIONS,
    Combination,
    combinations,
    flag_names,
    params_from_name,
    read_task_config,
    sizes,
)
from fleet.units import MAX_BYTES, format_bytes, parse_bytes, parse_count
from plumbing.cli import bounded_int, bounded_number
from plumbing.display import visible
from plumbing.output import document

HELP = "memory per GPU and GPU count to serve a model (weights, KV cache, activations, overhead)"
EPILOG = f"""\
GPUs = tp * pp * max(dp, cp, dcp). Without --gpu-memory, the GPU's memory is the smallest
total of the fleet's GPUs (those matching --model) in Prometheus, else 80GiB.

With --then-select or --then-wait (--gpus and --min-free-memory are the estimate's GPU count
and memory per GPU): {ELIGIBILITY[0].lower()}{ELIGIBILITY[1:]}

{EXIT_CODES}"""
DTYPES = ("bf16", "fp16", "fp8", "int8", "int4", "fp32")
MAX_INT = 1 << 24
DEFAULT_GPU_MEMORY = "80GiB"
FLEET_MEMORY_QUERY = "min by (model) (gpu_memory_total_bytes)"
"""The smallest total memory of each GPU model in the fleet."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--params", metavar="COUNT",
                        help=f"parameters, e.g. 70B, 6.7B, 350M (presets: {', '.join(PRESETS)}); default: "
                        "the size in --task-config's model name")
    parser.add_argument("--dtype", choices=DTYPES, default="bf16", help="weight precision (default bf16)")
    parser.add_argument("--kv-dtype", choices=DTYPES, default="bf16",
                        help="KV cache precision (default bf16)")
    for dim, what in (("tp", "tensor-parallel size (default: the smallest that fits)"),
                      ("pp", "pipeline-parallel size (default: the smallest that fits)"),
                      ("dp", "data-parallel replicas (default 1)"),
                      ("cp", "context-parallel size (default 1)"),
                      ("dcp", "decode-context-parallel size (default 1)")):
        parser.add_argument(*flag_names(dim), dest=dim, metavar="N[,N...]", help=what)
    parser.add_argument("--task-config", metavar="FILE",
                        help='a task configuration JSON: {"model": {"id_or_path": ...}, "parameters": '
                        '{"tp-size": [1, 2, 4], ...}}; one row per combination (flags override it)')
    parser.add_argument("--context", metavar="TOKENS", default="8192", help="context length (default 8192)")
    parser.add_argument("--batch", metavar="N", default="1", help="concurrent sequences (default 1)")
    for flag in ("--layers", "--hidden", "--heads", "--kv-heads"):
        parser.add_argument(flag, metavar="N", help="model shape (default: the --params preset's)")
    parser.add_argument("--gpu-memory", metavar="SIZE",
                        help="memory of one GPU (default: the fleet's from Prometheus, else "
                        f"{DEFAULT_GPU_MEMORY})")
    parser.add_argument("--cuda-context", metavar="SIZE", default="1GiB",
                        help="fixed per-GPU overhead: CUDA context, library workspaces (default 1GiB)")
    parser.add_argument("--fragmentation", metavar="PERCENT", default=f"{DEFAULT_FRAGMENTATION * 100:g}",
                        help="allocator overhead on top of the model's memory, in percent (default 10)")
    then = parser.add_mutually_exclusive_group()
    then.add_argument("--then-select", action="store_true",
                      help="then choose GPUs that fit the estimate, as select (prints what select prints)")
    then.add_argument("--then-wait", action="store_true", help="then wait for them, as wait")
    add_request_arguments(parser, gpus_required=False)
    add_wait_arguments(parser)
    add_output_arguments(parser, SELECT_FORMATS,
                         what="; docker and kubernetes with --then-select/--then-wait")
    add_connection_arguments(parser)


def _int(args: argparse.Namespace, name: str) -> int | None:
    text = getattr(args, name.replace("-", "_"))
    if text is None:
        return None
    try:
        return bounded_int(str(text), 1, MAX_INT)
    except ValueError as exc:
        raise UsageError(f"--{name}: {exc}") from None


def _size(args: argparse.Namespace, name: str) -> int:
    try:
        return parse_bytes(getattr(args, name.replace("-", "_")))
    except ValueError as exc:
        raise UsageError(f"--{name}: {exc}") from None


def workload_of(args: argparse.Namespace, params_text: str | None = None) -> Workload:
    text = params_text if params_text is not None else args.params
    if text is None:
        raise UsageError("--params: expected a parameter count like 70B (or a --task-config whose model name "
                         "carries one)")
    try:
        params = parse_count(text)
    except ValueError as exc:
        raise UsageError(f"--params: {exc}") from None
    preset = PRESETS.get(text.strip().upper())
    shape = {name: _int(args, name) for name in ("layers", "hidden", "heads", "kv-heads")}
    if preset is None and None in (shape["layers"], shape["hidden"], shape["heads"]):
        raise UsageError(f"--params {text}: no preset of that size ({', '.join(PRESETS)}): give "
                         "--layers, --hidden and --heads (and --kv-heads with grouped-query attention)")
    base = preset[0] if preset else Architecture(1, 1, 1, 1)
    heads = shape["heads"] or base.heads
    arch = Architecture(shape["layers"] or base.layers, shape["hidden"] or base.hidden, heads,
                        shape["kv-heads"] or (base.kv_heads if preset and not shape["heads"] else heads))
    try:
        fragmentation = bounded_number(str(args.fragmentation), 0, 100, what="a percentage")
    except ValueError as exc:
        raise UsageError(f"--fragmentation: {exc}") from None
    return Workload(params, args.dtype, arch, context=_int(args, "context") or 1,
                    batch=_int(args, "batch") or 1,
                    kv_dtype=args.kv_dtype, cuda_context=_size(args, "cuda-context"),
                    fragmentation=fragmentation / 100)


@dataclass(frozen=True)
class GpuMemory:
    """The memory one GPU has, and where the number comes from."""

    bytes: int
    source: str
    """'--gpu-memory', 'default', or the GPU model whose total it is (from Prometheus)."""


def gpu_memory_of(args: argparse.Namespace) -> GpuMemory:
    """--gpu-memory, else the smallest per-model total of the fleet's (matching) GPUs, else the default; a
    Prometheus that gives no usable answer is a note on stderr, not a failure."""
    if args.gpu_memory is not None:
        return GpuMemory(_size(args, "gpu-memory"), "--gpu-memory")
    default = GpuMemory(parse_bytes(DEFAULT_GPU_MEMORY), "default")
    try:
        with connect(args) as client:
            samples = client.vector(FLEET_MEMORY_QUERY)
    except PrometheusError as exc:
        print(f"{args.prog}: --gpu-memory not given and no answer from Prometheus ({visible(str(exc))}): "
              f"using {DEFAULT_GPU_MEMORY}", file=sys.stderr)
        return default
    wanted = (args.model or "").strip().lower()
    totals = [(s.value, s.labels.get("model", "")) for s in samples
              if 0 < s.value <= MAX_BYTES and wanted in s.labels.get("model", "").lower()]
    if not totals:
        which = f" matching --model {args.model}" if wanted else ""
        print(f"{args.prog}: --gpu-memory not given and no GPU{which} in Prometheus: using "
              f"{DEFAULT_GPU_MEMORY}", file=sys.stderr)
        return default
    value, model = min(totals)
    return GpuMemory(int(value), model or "the fleet's GPUs")


@dataclass(frozen=True)
class Row:
    """One combination of sizes and its estimate (None: no split fits)."""

    sizes: Combination
    result: Estimate | None
    gpu_memory: int

    @property
    def fits(self) -> bool:
        return self.result is not None and self.result.per_gpu <= self.gpu_memory


def given_sizes(args: argparse.Namespace) -> tuple[dict[str, list[int] | None], str | None]:
    """The sizes of each dimension (a flag over the file) and the task config's model name."""
    config = read_task_config(args.task_config) if args.task_config else None
    given: dict[str, list[int] | None] = {}
    for dim in DIMENSIONS:
        flag = getattr(args, dim)
        given[dim] = (sizes(flag, f"--{dim}") if flag is not None
                      else config.sizes.get(dim) if config else None)
    return given, config.model if config else None


def compute_row(work: Workload, sizes_: Combination, gpu_memory: int) -> Row:
    tp, pp = sizes_["tp"], sizes_["pp"]
    dp, cp, dcp = sizes_["dp"] or 1, sizes_["cp"] or 1, sizes_["dcp"] or 1
    try:
        if tp is not None and pp is not None:
            result: Estimate | None = estimate(work, Split(tp, pp, dp, cp, dcp))
        else:
            estimate(work, Split(tp or 1, pp or 1, dp, cp, dcp))  # the given half of the split, checked alone
            result = smallest_fit(work, gpu_memory, tp, pp, dp, max_tp=max(8, tp or 0), cp=cp, dcp=dcp)
    except InvalidSplit as exc:
        raise UsageError(str(exc)) from None
    return Row(sizes_, result, gpu_memory)


def _memory_note(memory: GpuMemory) -> str:
    if memory.source in ("--gpu-memory", "default"):
        return ""
    return f" ({visible(memory.source)}, from Prometheus)"


def _split_text(s: Split) -> str:
    if s.cp == 1 and s.dcp == 1:
        return f"tp {s.tp} x pp {s.pp} x dp {s.dp} = {s.gpus} GPU(s)"
    return f"tp {s.tp} x pp {s.pp} x max(dp {s.dp}, cp {s.cp}, dcp {s.dcp}) = {s.gpus} GPU(s)"


def describe(work: Workload, result: Estimate, memory: GpuMemory) -> str:
    s = result.split
    fits = "fits" if result.per_gpu <= memory.bytes else "does NOT fit"
    per_token = kv_bytes_per_token(work.arch, work.kv_dtype)
    rows = [("weights", result.weights), ("KV cache", result.kv_cache), ("activations", result.activations),
            (f"fragmentation ({work.fragmentation * 100:g}%)", result.fragmentation),
            ("CUDA context", result.cuda_context), ("per GPU", result.per_gpu)]
    width = max(len(name) for name, _ in rows)
    a = work.arch
    lines = [f"model: {work.params / 1e9:g}B parameters, {work.dtype}; {a.layers} layers, hidden {a.hidden}, "
             f"{a.heads} heads, {a.kv_heads} KV heads (head dim {a.head_dim}); KV cache "
             f"{per_token:,.0f} B per token ({work.kv_dtype})",
             f"workload: context {work.context}, batch {work.batch}",
             f"split: {_split_text(s)}", ""]
    lines += [f"  {name.ljust(width)}  {format_bytes(value):>10}" for name, value in rows]
    lines += ["", f"{fits} in {format_bytes(memory.bytes)} per GPU{_memory_note(memory)}: {s.gpus} GPU(s)"]
    return "\n".join(lines)


def row_json(work: Workload, row: Row, memory: GpuMemory) -> dict[str, object]:
    result = row.result
    s = result.split if result else None
    document: dict[str, object] = {
        "params": round(work.params), "dtype": work.dtype, "kv_dtype": work.kv_dtype,
        "architecture": {"layers": work.arch.layers, "hidden": work.arch.hidden, "heads": work.arch.heads,
                         "kv_heads": work.arch.kv_heads, "head_dim": work.arch.head_dim},
        "context": work.context, "batch": work.batch,
    }
    for dim in DIMENSIONS:
        document[dim] = getattr(s, dim) if s else row.sizes[dim]
    document["gpus"] = s.gpus if s else None
    document["bytes_per_gpu"] = None if result is None else {
        "weights": round(result.weights), "kv_cache": round(result.kv_cache),
        "activations": round(result.activations), "fragmentation": round(result.fragmentation),
        "cuda_context": round(result.cuda_context), "total": math.ceil(result.per_gpu)}
    document.update({"gpu_memory_bytes": memory.bytes, "gpu_memory_source": memory.source, "fits": row.fits})
    return document


ROW_HEADER = ("TP", "PP", "DP", "CP", "DCP", "GPUS", "PER GPU", "FITS")
WIDE_EXTRA = ("WEIGHTS", "KV CACHE", "ACTIVATIONS")


def _cells(row: Row, wide: bool) -> tuple[str, ...]:
    result = row.result
    if result is None:
        shown = [str(row.sizes[d]) if row.sizes[d] is not None else "-" for d in DIMENSIONS]
        return (*shown, "-", "-", "no split fits", *(("-",) * 3 if wide else ()))
    s = result.split
    cells = (*(str(getattr(s, d)) for d in DIMENSIONS), str(s.gpus), format_bytes(result.per_gpu),
             "yes" if row.fits else "NO")
    extra = (format_bytes(result.weights), format_bytes(result.kv_cache), format_bytes(result.activations))
    return (*cells, *extra) if wide else cells


def render(work: Workload, rows: list[Row], memory: GpuMemory, output: str, headers: bool = True) -> str:
    """The estimate in `-o output`: one row alone is the breakdown (table, wide) or one JSON object; several
    are a table, or `{"estimates": [...], "fits": ...}`."""
    if output == JSON:
        if len(rows) == 1:
            return json.dumps(document(**row_json(work, rows[0], memory)), indent=2, allow_nan=False)
        return json.dumps(document(estimates=[row_json(work, r, memory) for r in rows],
                                   fits=all(r.fits for r in rows)), indent=2, allow_nan=False)
    if output == CSV:
        records = []
        for r in rows:
            record = row_json(work, r, memory)
            terms = r.result
            if terms is not None:
                record.update(total_bytes=math.ceil(terms.per_gpu), weights_bytes=round(terms.weights),
                              kv_cache_bytes=round(terms.kv_cache),
                              activations_bytes=round(terms.activations))
            records.append(record)
        fields = [*DIMENSIONS, "gpus", "total_bytes", "weights_bytes", "kv_cache_bytes", "activations_bytes",
                  "gpu_memory_bytes", "fits"]
        return as_csv(records, fields, headers)
    only = rows[0].result
    if len(rows) == 1 and only is not None:
        return describe(work, only, memory)
    header = (*ROW_HEADER, *WIDE_EXTRA) if output == WIDE else ROW_HEADER
    table = aligned(header, [_cells(r, output == WIDE) for r in rows], headers)
    return f"{table}\n\nin {format_bytes(memory.bytes)} per GPU{_memory_note(memory)}"


def run(args: argparse.Namespace) -> int:
    then = args.then_select or args.then_wait
    if args.output in (DOCKER, KUBERNETES) and not then:
        raise UsageError(f"-o {args.output}: only with --then-select or --then-wait")
    request_of(args, gpus=1, memory=0)  # every flag checked before any work: exit 2, never 1 after the fit
    given, model_name = given_sizes(args)
    params_text = args.params if args.params is not None else params_from_name(model_name or "")
    if args.params is None and model_name is not None and params_text is None:
        raise UsageError(f"--params: the task config's model {model_name[:60]!r} names no size like 70B: "
                         "give --params")
    work = workload_of(args, params_text)
    rows_of = combinations(given)
    memory = gpu_memory_of(args)
    rows = [compute_row(work, sizes_, memory.bytes) for sizes_ in rows_of]
    fits = all(r.fits for r in rows)
    if then:
        return _then(args, rows, fits)
    print(render(work, rows, memory, args.output, not args.no_headers))
    for r in rows:
        if r.result is None:
            fixed = ", ".join(f"--{d} {v}" for d, v in r.sizes.items() if v is not None)
            print(f"no split{' with ' + fixed if fixed else ''} (tp up to 8) fits in "
                  f"{format_bytes(memory.bytes)} per GPU", file=sys.stderr)
    return EXIT_OK if fits else EXIT_NOT_FOUND


def _then(args: argparse.Namespace, rows: list[Row], fits: bool) -> int:
    """Select (or wait for) GPUs for the largest row: its GPU count, each with its memory free."""
    if not fits:
        message = "the estimate does not fit in one GPU's memory: nothing to select"
        if args.output == JSON:
            print(failure_json(message, EXIT_NOT_FOUND))
        print(message, file=sys.stderr)
        return EXIT_NOT_FOUND
    results = [r.result for r in rows if r.result is not None]
    gpus = max(r.split.gpus for r in results)
    memory = math.ceil(max(r.per_gpu for r in results))
    print(f"estimate: {gpus} GPU(s), each with {format_bytes(memory)} free", file=sys.stderr)
    request = request_of(args, gpus=gpus, memory=memory)
    return (wait_and_report if args.then_wait else select_and_report)(args, request)
