"""GPU memory of serving a transformer, per GPU, for a tensor (tp), pipeline (pp), data (dp), context (cp)
and decode-context (dcp) split; pure.

    weights     = params * bytes(dtype) / (tp * pp)
    kv cache    = 2 * (layers / pp) * ceil(kv_heads / tp) * head_dim * context * batch * bytes(kv dtype)
                  / max(cp, dcp)
    activations = 4 * batch * context * hidden * bytes(activation dtype) / (tp * cp)
    per GPU     = (weights + kv cache + activations) * (1 + fragmentation) + CUDA context
    GPUs        = tp * pp * max(dp, cp, dcp)

The GPU count is our users' task scheduler's world size. Context parallelism shards the sequence (its KV
cache and activations) over cp ranks; decode-context parallelism shards the KV cache over dcp ranks.

head_dim = hidden / heads. K and V (the 2) are cached for every layer the GPU holds and every KV head it
holds; with fewer KV heads than tp each GPU keeps a copy of one (as vLLM and TensorRT-LLM do). Activations are
the live tensors of one layer at the peak of a prefill of the whole batch (inference frees them layer by
layer): about four hidden-sized tensors (residual, attention output, the MLP's gate and up projections),
split by tp. docs/fleet.md gives the sources of each term and of the presets.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

BYTES_PER_PARAM = {"fp32": 4.0, "bf16": 2.0, "fp16": 2.0, "fp8": 1.0, "int8": 1.0, "int4": 0.5}
ACTIVATION_TENSORS = 4
DEFAULT_CUDA_CONTEXT = 1024**3
"""CUDA context, cuBLAS/cuDNN workspaces and the framework's own buffers: about 1 GiB per GPU."""
DEFAULT_FRAGMENTATION = 0.10
"""Allocator fragmentation and padding, as a fraction of what the model holds."""


@dataclass(frozen=True)
class Architecture:
    """The shape of a decoder-only transformer (Llama-style: GQA, RMSNorm, SwiGLU)."""

    layers: int
    hidden: int
    heads: int
    kv_heads: int

    @property
    def head_dim(self) -> int:
        return self.hidden // self.heads


PRESETS: dict[str, tuple[Architecture, str]] = {
    "7B": (Architecture(32, 4096, 32, 32), "Llama-2-7B"),
    "8B": (Architecture(32, 4096, 32, 8), "Llama-3.1-8B"),
    "13B": (Architecture(40, 5120, 40, 40), "Llama-2-13B"),
    "70B": (Architecture(80, 8192, 64, 8), "Llama-2-70B and Llama-3.1-70B"),
    "405B": (Architecture(126, 16384, 128, 8), "Llama-3.1-405B"),
}
"""`--params` presets: the shape (layers, hidden, heads, KV heads) and the model it is taken from, as each
model's config.json on Hugging Face gives it (num_hidden_layers, hidden_size, num_attention_heads,
num_key_value_heads)."""


class InvalidSplit(ValueError):
    """A split the model cannot take (heads not divisible by tp, layers by pp, ...); the message says why."""


@dataclass(frozen=True)
class Workload:
    params: float
    dtype: str
    arch: Architecture
    context: int = 8192
    batch: int = 1
    kv_dtype: str = "bf16"
    activation_dtype: str = "bf16"
    cuda_context: int = DEFAULT_CUDA_CONTEXT
    fragmentation: float = DEFAULT_FRAGMENTATION


@dataclass(frozen=True)
class Split:
    tp: int = 1
    pp: int = 1
    dp: int = 1
    cp: int = 1
    dcp: int = 1

    @property
    def gpus(self) -> int:
        """The world size: tp * pp * max(dp, cp, dcp)."""
        return self.tp * self.pp * max(self.dp, self.cp, self.dcp)


@dataclass(frozen=True)
class Estimate:
    """Bytes per GPU, by term, for one split."""

    split: Split
    weights: float
    kv_cache: float
    activations: float
    fragmentation: float
    cuda_context: float

    @property
    def per_gpu(self) -> float:
        return self.weights + self.kv_cache + self.activations + self.fragmentation + self.cuda_context


def check_architecture(arch: Architecture) -> None:
    if min(arch.layers, arch.hidden, arch.heads, arch.kv_heads) < 1:
        raise InvalidSplit("layers, hidden, heads and kv-heads must be positive")
    if arch.hidden % arch.heads:
        raise InvalidSplit(f"--hidden {arch.hidden} is not divisible by --heads {arch.heads}")
    if arch.heads % arch.kv_heads:
        raise InvalidSplit(f"--heads {arch.heads} is not divisible by --kv-heads {arch.kv_heads}")


def check_split(arch: Architecture, split: Split) -> None:
    """InvalidSplit naming the flag when the model cannot be cut this way."""
    if min(split.tp, split.pp, split.dp, split.cp, split.dcp) < 1:
        raise InvalidSplit("--tp, --pp, --dp, --cp and --dcp must be at least 1")
    if arch.heads % split.tp:
        raise InvalidSplit(f"--tp {split.tp}: the {arch.heads} attention heads are not divisible by it")
    if arch.kv_heads % split.tp and split.tp % arch.kv_heads:
        raise InvalidSplit(f"--tp {split.tp}: the {arch.kv_heads} KV heads can neither be split evenly nor "
                           "replicated evenly over it")
    if arch.layers % split.pp:
        raise InvalidSplit(f"--pp {split.pp}: the {arch.layers} layers are not divisible by it")


def kv_bytes_per_token(arch: Architecture, kv_dtype: str = "bf16", split: Split = Split()) -> float:
    """K and V of one token, every layer and KV head one GPU holds."""
    kv_heads = math.ceil(arch.kv_heads / split.tp)
    return 2 * (arch.layers / split.pp) * kv_heads * arch.head_dim * BYTES_PER_PARAM[kv_dtype]


def estimate(work: Workload, split: Split) -> Estimate:
    check_architecture(work.arch)
    check_split(work.arch, split)
    weights = work.params * BYTES_PER_PARAM[work.dtype] / (split.tp * split.pp)
    kv = (kv_bytes_per_token(work.arch, work.kv_dtype, split) * work.context * work.batch
          / max(split.cp, split.dcp))
    activations = (ACTIVATION_TENSORS * work.batch * work.context * work.arch.hidden
                   * BYTES_PER_PARAM[work.activation_dtype] / (split.tp * split.cp))
    held = weights + kv + activations
    return Estimate(split, weights, kv, activations, held * work.fragmentation, work.cuda_context)


def smallest_fit(work: Workload, gpu_memory: float, tp: int | None = None, pp: int | None = None,
                 dp: int = 1, max_tp: int = 8, max_gpus: int = 1024, cp: int = 1,
                 dcp: int = 1) -> Estimate | None:
    """The split with the fewest GPUs per replica (tp * pp) that fits in `gpu_memory`, tensor parallelism
    first (it stays within a node), `tp`/`pp` fixed when given; None when none fits."""
    tps = [tp] if tp is not None else [t for t in (1, 2, 4, 8, 16, 32, 64) if t <= max_tp]
    pps = [pp] if pp is not None else [p for p in range(1, work.arch.layers + 1) if work.arch.layers % p == 0]
    candidates: list[Split] = []
    for t in tps:
        for p in pps:
            split = Split(t, p, dp, cp, dcp)
            try:
                check_split(work.arch, split)
            except InvalidSplit:
                continue
            if split.gpus <= max_gpus:
                candidates.append(split)
    for split in sorted(candidates, key=lambda s: (s.tp * s.pp, s.pp)):
        result = estimate(work, split)
        if result.per_gpu <= gpu_memory:
            return result
    return None
