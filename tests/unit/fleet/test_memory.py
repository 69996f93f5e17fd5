"""The memory estimate against published figures; impossible splits refused with the flag named.

Sources of the figures (also in docs/fleet.md):
- Llama-2-70B shape: meta-llama/Llama-2-70b-hf config.json on Hugging Face (num_hidden_layers 80,
  hidden_size 8192, num_attention_heads 64, num_key_value_heads 8), and Touvron et al. 2023, "Llama 2: Open
  Foundation and Fine-Tuned Chat Models", arXiv:2307.09288, section 2.2 (GQA for the 34B and 70B models).
- 70B weights in fp16 ~ 140 GB (70e9 parameters x 2 bytes): e.g. B. Marie, "Run Llama 2 70B on Your GPU with
  ExLlamaV2" (kaitchup.substack.com, 2023): "Loading Llama 2 70B requires 140 GB of memory (70 billion * 2
  bytes)", and 35 GB at 4 bits.
- KV cache per token of Llama-2-70B with 8 KV heads: 2 (K and V) x 80 layers x 8 heads x 128 head dim x 2
  bytes = 327,680 B, the formula of NVIDIA's "Mastering LLM Techniques: Inference Optimization" (NVIDIA
  Technical Blog, 2023: 2 x layers x KV heads x head dim x bytes per token) over the config's numbers.
- The same post's example: Llama-2-7B (32 layers, 32 heads of 128, no GQA) in 16-bit at batch 1 and 4,096
  tokens holds a 2 GB KV cache (0.5 MB per token).
- Llama-3.1-405B shape: meta-llama/Llama-3.1-405B config.json (126 layers, hidden 16384, 128 heads, 8 KV).
"""

from __future__ import annotations

import pytest

from fleet.sizing.memory import (
    PRESETS,
    Architecture,
    InvalidSplit,
    Split,
    Workload,
    estimate,
    kv_bytes_per_token,
    smallest_fit,
)

GB = 10**9
GIB = 1024**3
LLAMA2_70B = PRESETS["70B"][0]


def bare(params: float, dtype: str, arch: Architecture, **kw: float) -> Workload:
    """No context, no overhead: the weights alone."""
    return Workload(params, dtype, arch, context=1, batch=1, cuda_context=0, fragmentation=0.0, **kw)  # type: ignore[arg-type]


def test_llama2_70b_shape_is_the_published_config() -> None:
    assert Architecture(layers=80, hidden=8192, heads=64, kv_heads=8) == LLAMA2_70B
    assert LLAMA2_70B.head_dim == 128


@pytest.mark.parametrize(("dtype", "gb"), [("fp16", 140), ("bf16", 140), ("fp8", 70), ("int8", 70),
                                           ("int4", 35)])
def test_70b_weights_match_the_published_sizes(dtype: str, gb: float) -> None:
    result = estimate(bare(70e9, dtype, LLAMA2_70B), Split())
    assert result.weights == pytest.approx(gb * GB)


def test_kv_cache_per_token_of_llama2_70b_with_gqa() -> None:
    assert kv_bytes_per_token(LLAMA2_70B, "fp16") == 2 * 80 * 8 * 128 * 2 == 327_680


def test_kv_cache_scales_with_context_and_batch_and_splits_over_tp_and_pp() -> None:
    work = Workload(70e9, "fp16", LLAMA2_70B, context=4096, batch=16, cuda_context=0, fragmentation=0.0)
    whole = estimate(work, Split()).kv_cache
    assert whole == 327_680 * 4096 * 16  # 20 GiB: 4096 tokens x 16 sequences
    assert estimate(work, Split(tp=8)).kv_cache == whole / 8
    assert estimate(work, Split(tp=2, pp=4)).kv_cache == whole / 8
    # 16-way tensor parallelism over 8 KV heads: each GPU keeps one head, replicated
    assert estimate(work, Split(tp=16)).kv_cache == whole / 8


def test_weights_split_over_tp_times_pp_not_dp() -> None:
    work = bare(70e9, "fp16", LLAMA2_70B)
    assert estimate(work, Split(tp=2, pp=2, dp=3)).weights == pytest.approx(35 * GB)
    assert Split(2, 2, 3).gpus == 12


def test_overheads_are_added() -> None:
    work = Workload(70e9, "fp16", LLAMA2_70B, context=1, batch=1, cuda_context=GIB, fragmentation=0.1)
    result = estimate(work, Split(tp=2))
    held = result.weights + result.kv_cache + result.activations
    assert result.per_gpu == pytest.approx(held * 1.1 + GIB)


SPLITS = {
    "heads-by-tp": (LLAMA2_70B, Split(tp=3), "--tp 3: the 64 attention heads are not divisible by it"),
    "kv-heads-by-tp": (Architecture(80, 6144, 96, 12), Split(tp=32),
                       "--tp 32: the 12 KV heads can neither be split evenly nor replicated"),
    "layers-by-pp": (LLAMA2_70B, Split(pp=3), "--pp 3: the 80 layers are not divisible by it"),
    "405b-by-pp-4": (PRESETS["405B"][0], Split(tp=8, pp=4), "--pp 4: the 126 layers"),
    "zero": (LLAMA2_70B, Split(tp=0), "at least 1"),
}


@pytest.mark.parametrize(("arch", "split", "message"), SPLITS.values(), ids=SPLITS.keys())
def test_impossible_splits_are_refused_with_the_flag(arch: Architecture, split: Split, message: str) -> None:
    with pytest.raises(InvalidSplit, match=message):
        estimate(bare(70e9, "fp16", arch), split)


def test_the_nvidia_blog_example_llama2_7b() -> None:
    assert kv_bytes_per_token(PRESETS["7B"][0], "fp16") == 2 * 32 * 32 * 128 * 2 == 512 * 1024
    work = Workload(7e9, "fp16", PRESETS["7B"][0], context=4096, batch=1)
    assert estimate(work, Split()).kv_cache == 2 * GIB


def test_the_smallest_split_that_fits() -> None:
    work = Workload(70e9, "fp16", LLAMA2_70B, context=8192, batch=1)
    assert smallest_fit(work, 80 * GIB).split == Split(tp=2)  # type: ignore[union-attr]
    assert smallest_fit(work, 200 * GIB).split == Split(tp=1)  # type: ignore[union-attr]
    assert smallest_fit(Workload(70e9, "int4", LLAMA2_70B), 80 * GIB).split == Split(tp=1)  # type: ignore[union-attr]
    assert smallest_fit(work, 80 * GIB, tp=1).split == Split(tp=1, pp=2)  # type: ignore[union-attr]
    assert smallest_fit(work, 1 * GIB) is None
