"""`gpu-fleet estimate`: memory per GPU and the GPU count of serving a model (fleet/memory.py's formula).

Given --tp/--pp it says whether that split fits in --gpu-memory (exit 0) or not (exit 1); without them it
finds the smallest tp * pp that fits. A split the model cannot take is refused with the flag named (exit 2).
"""

from __future__ import annotations

import argparse
import json

from fleet.errors import EXIT_NOT_FOUND, EXIT_OK, UsageError
from fleet.memory import (
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
from fleet.units import format_bytes, parse_bytes, parse_count
from plumbing.numbers import ascii_int

HELP = "memory per GPU and GPU count to serve a model (weights, KV cache, activations, overhead)"
DTYPES = ("bf16", "fp16", "fp8", "int8", "int4", "fp32")
MAX_INT = 1 << 24


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--params", required=True, metavar="COUNT",
                        help=f"parameters, e.g. 70B, 6.7B, 350M (presets: {', '.join(PRESETS)})")
    parser.add_argument("--dtype", required=True, choices=DTYPES, help="weight precision")
    parser.add_argument("--kv-dtype", choices=DTYPES, default="bf16",
                        help="KV cache precision (default bf16)")
    for flag, what in (("--tp", "tensor-parallel size"), ("--pp", "pipeline-parallel size")):
        parser.add_argument(flag, metavar="N", help=f"{what} (default: the smallest that fits)")
    parser.add_argument("--dp", metavar="N", default="1", help="data-parallel replicas (default 1)")
    parser.add_argument("--context", metavar="TOKENS", default="8192", help="context length (default 8192)")
    parser.add_argument("--batch", metavar="N", default="1", help="concurrent sequences (default 1)")
    for flag in ("--layers", "--hidden", "--heads", "--kv-heads"):
        parser.add_argument(flag, metavar="N", help="model shape (default: the --params preset's)")
    parser.add_argument("--gpu-memory", metavar="SIZE", default="80GiB",
                        help="memory of one GPU (default 80GiB)")
    parser.add_argument("--cuda-context", metavar="SIZE", default="1GiB",
                        help="fixed per-GPU overhead: CUDA context, library workspaces (default 1GiB)")
    parser.add_argument("--fragmentation", metavar="PERCENT", default=f"{DEFAULT_FRAGMENTATION * 100:g}",
                        help="allocator overhead on top of the model's memory, in percent (default 10)")
    parser.add_argument("--json", action="store_true", help="print the estimate as JSON")


def _int(args: argparse.Namespace, name: str) -> int | None:
    text = getattr(args, name.replace("-", "_"))
    if text is None:
        return None
    value = ascii_int(str(text).strip())
    if value is None or not 1 <= value <= MAX_INT:
        raise UsageError(f"--{name}: expected a whole number of at least 1 (got {str(text)[:40]!r})")
    return value


def _size(args: argparse.Namespace, name: str) -> int:
    try:
        return parse_bytes(getattr(args, name.replace("-", "_")))
    except ValueError as exc:
        raise UsageError(f"--{name}: {exc}") from None


def workload_of(args: argparse.Namespace) -> Workload:
    try:
        params = parse_count(args.params)
    except ValueError as exc:
        raise UsageError(f"--params: {exc}") from None
    preset = PRESETS.get(args.params.strip().upper())
    shape = {name: _int(args, name) for name in ("layers", "hidden", "heads", "kv-heads")}
    if preset is None and None in (shape["layers"], shape["hidden"], shape["heads"]):
        raise UsageError(f"--params {args.params}: no preset of that size ({', '.join(PRESETS)}): give "
                         "--layers, --hidden and --heads (and --kv-heads with grouped-query attention)")
    base = preset[0] if preset else Architecture(1, 1, 1, 1)
    heads = shape["heads"] or base.heads
    arch = Architecture(shape["layers"] or base.layers, shape["hidden"] or base.hidden, heads,
                        shape["kv-heads"] or (base.kv_heads if preset and not shape["heads"] else heads))
    try:
        fragmentation = float(args.fragmentation)
    except ValueError:
        fragmentation = -1.0
    if not 0 <= fragmentation <= 100:
        raise UsageError(f"--fragmentation: expected a percentage from 0 to 100 (got {args.fragmentation!r})")
    return Workload(params, args.dtype, arch, context=_int(args, "context") or 1,
                    batch=_int(args, "batch") or 1,
                    kv_dtype=args.kv_dtype, cuda_context=_size(args, "cuda-context"),
                    fragmentation=fragmentation / 100)


def describe(work: Workload, result: Estimate, gpu_memory: int) -> str:
    s = result.split
    fits = "fits" if result.per_gpu <= gpu_memory else "does NOT fit"
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
             f"split: tp {s.tp} x pp {s.pp} x dp {s.dp} = {s.gpus} GPU(s)", ""]
    lines += [f"  {name.ljust(width)}  {format_bytes(value):>10}" for name, value in rows]
    lines += ["", f"{fits} in {format_bytes(gpu_memory)} per GPU: {s.gpus} GPU(s)"]
    return "\n".join(lines)


def as_json(work: Workload, result: Estimate, gpu_memory: int) -> str:
    s = result.split
    return json.dumps({
        "params": work.params, "dtype": work.dtype, "kv_dtype": work.kv_dtype,
        "architecture": {"layers": work.arch.layers, "hidden": work.arch.hidden, "heads": work.arch.heads,
                         "kv_heads": work.arch.kv_heads, "head_dim": work.arch.head_dim},
        "context": work.context, "batch": work.batch,
        "tp": s.tp, "pp": s.pp, "dp": s.dp, "gpus": s.gpus,
        "bytes_per_gpu": {"weights": result.weights, "kv_cache": result.kv_cache,
                          "activations": result.activations, "fragmentation": result.fragmentation,
                          "cuda_context": result.cuda_context, "total": result.per_gpu},
        "gpu_memory_bytes": gpu_memory, "fits": result.per_gpu <= gpu_memory,
    }, indent=2)


def run(args: argparse.Namespace) -> int:
    work = workload_of(args)
    gpu_memory = _size(args, "gpu-memory")
    tp, pp, dp = _int(args, "tp"), _int(args, "pp"), _int(args, "dp") or 1
    try:
        if tp is not None and pp is not None:
            result: Estimate | None = estimate(work, Split(tp, pp, dp))
        else:
            estimate(work, Split(tp or 1, pp or 1, dp))  # the given half of the split, checked alone
            result = smallest_fit(work, gpu_memory, tp, pp, dp, max_tp=max(8, tp or 0))
    except InvalidSplit as exc:
        raise UsageError(str(exc)) from None
    if result is None:
        fixed = ", ".join(f"{k} {v}" for k, v in (("--tp", tp), ("--pp", pp)) if v is not None)
        print(f"no split{' with ' + fixed if fixed else ''} (tp up to 8) fits in {format_bytes(gpu_memory)} "
              "per GPU", flush=True)
        return EXIT_NOT_FOUND
    print(as_json(work, result, gpu_memory) if args.json else describe(work, result, gpu_memory))
    return EXIT_OK if result.per_gpu <= gpu_memory else EXIT_NOT_FOUND

