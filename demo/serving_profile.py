"""A serving profile: what one replica of an LLM server costs per decode step and per prefill, as measured.

Why a profile: a continuous-batching server's capacity is a property of its batch, context and KV cache, not
of GPU utilization (which reads ~100 % from one sequence on). The emulated server (demo.batching) takes its
times from a profile measured on a real GPU, so its throughput, latency and saturation are the hardware's.
The file format is documented in docs/demo.md ("Serving profiles"); the default is
demo/profiles/h100-llama1b-cudagraph.json (an H100 80GB HBM3, a 1.1B Llama-shaped model, random weights,
bf16).
"""

from __future__ import annotations

import bisect
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

DEFAULT_PROFILE = Path(__file__).resolve().parent / "profiles" / "h100-llama1b-cudagraph.json"


class ProfileError(ValueError):
    """A profile file that cannot be used, with the file and field named."""


@dataclass(frozen=True)
class DecodeRow:
    context_tokens: int
    batch: int
    step_seconds: float


@dataclass(frozen=True)
class PrefillRow:
    prompt_tokens: int
    seconds: float


@dataclass(frozen=True)
class ServingProfile:
    """Measured step and prefill times; between measured points linearly interpolated (see each method)."""

    name: str
    decode: tuple[DecodeRow, ...]
    prefill: tuple[PrefillRow, ...]
    kv_cache_tokens: int
    """Tokens of KV cache one replica holds (prompts and generated tokens of its running requests)."""
    max_num_seqs: int
    """The most requests one replica's batch runs (vLLM's --max-num-seqs)."""
    _grid: dict[int, tuple[list[int], list[float]]] = field(init=False, repr=False, compare=False)
    _contexts: list[int] = field(init=False, repr=False, compare=False)
    _prefill: tuple[list[int], list[float]] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:  # sorted lookup tables, built once: the server asks at every step
        contexts = sorted({row.context_tokens for row in self.decode})
        grid = {}
        for context in contexts:
            rows = sorted((r for r in self.decode if r.context_tokens == context), key=lambda r: r.batch)
            grid[context] = ([r.batch for r in rows], [r.step_seconds for r in rows])
        prefill = sorted(self.prefill, key=lambda r: r.prompt_tokens)
        object.__setattr__(self, "_grid", grid)
        object.__setattr__(self, "_contexts", contexts)
        tables = ([r.prompt_tokens for r in prefill], [r.seconds for r in prefill])
        object.__setattr__(self, "_prefill", tables)

    def step_seconds(self, batch: int, context_tokens: float) -> float:
        """One decode step of `batch` sequences holding `context_tokens` each on average: linear in the batch
        between measured batches (the first's time below it, proportional above the last) and linear in the
        context between measured contexts (extrapolated past the largest, flat below the smallest)."""
        contexts = self._contexts
        if len(contexts) == 1 or context_tokens <= contexts[0]:
            return self._at_context(contexts[0], batch)
        index = min(bisect.bisect_left(contexts, context_tokens), len(contexts) - 1)
        low, high = contexts[index - 1], contexts[index]
        fraction = (context_tokens - low) / (high - low)
        at_low, at_high = self._at_context(low, batch), self._at_context(high, batch)
        return max(at_low, at_low + (at_high - at_low) * fraction)

    def _at_context(self, context: int, batch: int) -> float:
        batches, seconds = self._grid[context]
        return _interpolate(batches, seconds, batch)

    def prefill_seconds(self, prompt_tokens: int) -> float:
        """One prefill pass over `prompt_tokens` (all the prompts admitted together): linear between measured
        points, the smallest measurement's time below it (a pass costs at least that), proportional above."""
        tokens, seconds = self._prefill
        return _interpolate(tokens, seconds, prompt_tokens)

    def tokens_per_second(self, batch: int, context_tokens: float) -> float:
        """Decode throughput of one replica at `batch`: batch / step time."""
        return batch / self.step_seconds(batch, context_tokens)


def _interpolate(xs: list[int], ys: list[float], x: float) -> float:
    """Piecewise linear through the points; the first y below the first x, proportional past the last."""
    if x <= xs[0]:
        return ys[0]
    if x >= xs[-1]:
        return ys[-1] * x / xs[-1]
    index = bisect.bisect_left(xs, x)
    x0, x1, y0, y1 = xs[index - 1], xs[index], ys[index - 1], ys[index]
    return y0 + (y1 - y0) * (x - x0) / (x1 - x0)


def load_profile(path: Path = DEFAULT_PROFILE) -> ServingProfile:
    """Read and check a profile file; a bad one raises ProfileError naming the file and the field."""
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as error:
        raise ProfileError(f"{path}: not a readable JSON profile ({error})") from error
    if not isinstance(document, dict):
        raise ProfileError(f"{path}: a profile is a JSON object")
    decode = tuple(DecodeRow(_int(path, row, "decode", "context_tokens"), _int(path, row, "decode", "batch"),
                             _positive(path, row, "decode", "step_seconds"))
                   for row in _rows(path, document, "decode"))
    prefill = tuple(PrefillRow(_int(path, row, "prefill", "prompt_tokens"),
                               _positive(path, row, "prefill", "seconds"))
                    for row in _rows(path, document, "prefill"))
    seen = [(row.context_tokens, row.batch) for row in decode]
    if len(set(seen)) != len(seen):
        raise ProfileError(f"{path}: decode: two rows for the same context_tokens and batch")
    return ServingProfile(path.stem, decode, prefill, _int(path, document, "", "kv_cache_tokens"),
                          _int(path, document, "", "max_num_seqs"))


def _rows(path: Path, document: dict[str, Any], key: str) -> list[dict[str, Any]]:
    rows = document.get(key)
    if not isinstance(rows, list) or not rows or not all(isinstance(row, dict) for row in rows):
        raise ProfileError(f"{path}: {key}: a non-empty list of objects is required")
    return rows


def _int(path: Path, row: dict[str, Any], where: str, key: str) -> int:
    value = row.get(key)
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        place = f"{where}: " if where else ""
        raise ProfileError(f"{path}: {place}{key} must be an integer >= 1 (got {value!r})")
    return value


def _positive(path: Path, row: dict[str, Any], where: str, key: str) -> float:
    value = row.get(key)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
        raise ProfileError(f"{path}: {where}: {key} must be a number > 0 (got {value!r})")
    return float(value)
