"""Byte sizes (`40GiB`, `80G`, `512MiB`) and parameter counts (`70B`, `6.7B`, `350M`) as users write them.

Binary units (KiB, MiB, GiB, TiB) are powers of 1024, decimal ones (K/KB, M/MB, G/GB, T/TB) powers of 1000,
as Kubernetes quantities and `nvidia-smi` mean them; a bare number is bytes. Anything else is one ValueError
saying what was expected and what came, which the commands turn into an error naming their flag.
"""

from __future__ import annotations

import math
import re

_SIZE = re.compile(r"\s*([0-9]+(?:\.[0-9]+)?)\s*([KMGTP]i?B?|[kmgtp]i?b?|B|b)?\s*")
_BINARY = {"K": 1024, "M": 1024**2, "G": 1024**3, "T": 1024**4, "P": 1024**5}
_DECIMAL = {"K": 10**3, "M": 10**6, "G": 10**9, "T": 10**12, "P": 10**15}
MAX_BYTES = 1024**5  # a PiB: no GPU has more
_COUNT = re.compile(r"\s*([0-9]+(?:\.[0-9]+)?)\s*([KMBT])?\s*", re.IGNORECASE)
_COUNT_UNIT = {None: 1, "K": 10**3, "M": 10**6, "B": 10**9, "T": 10**12}
GIB = 1024**3


def parse_bytes(text: str) -> int:
    """'40GiB' -> 42949672960, '80G' -> 80000000000, '512MiB', '1.5TiB', '1024' (bytes)."""
    match = _SIZE.fullmatch(text)
    if match is None:
        raise ValueError(f"expected a size like 40GiB, 80G or 512MiB (got {text[:40]!r})")
    number, unit = float(match.group(1)), (match.group(2) or "B")
    prefix = unit[0].upper()
    factor = 1 if prefix == "B" else (_BINARY if "i" in unit.lower() else _DECIMAL)[prefix]
    value = number * factor
    if not math.isfinite(value) or value > MAX_BYTES:
        raise ValueError(f"expected a size of at most 1PiB (got {text[:40]!r})")
    return round(value)


def parse_count(text: str) -> float:
    """A parameter count: '70B' -> 7e10, '6.7B', '350M', '1.5T', or a plain number; must be positive."""
    match = _COUNT.fullmatch(text)
    value = float(match.group(1)) * _COUNT_UNIT[match.group(2) and match.group(2).upper()] if match else 0.0
    if not 0 < value < 1e15 or not math.isfinite(value):
        raise ValueError(f"expected a parameter count like 70B, 6.7B or 350M (got {text[:40]!r})")
    return value


def format_bytes(value: float) -> str:
    """Binary units, three significant digits: 42949672960 -> '40.0GiB'."""
    for unit, factor in (("TiB", 1024**4), ("GiB", GIB), ("MiB", 1024**2), ("KiB", 1024)):
        if abs(value) >= factor:
            return f"{value / factor:.1f}{unit}"
    return f"{value:.0f}B"
