"""Whole numbers read from text a peer or a user wrote (a header, a label, a flag, a file of /proc).

`str.isdigit()` is true for '²', '٣' and a fullwidth five, and `int()` then raises on the first and
reads the others: a check that lets through what the conversion refuses is a traceback waiting for a hostile
input. Every such reading in the project goes through `ascii_int`: ASCII digits alone, a bounded count.
"""

from __future__ import annotations

import re

__all__ = ["ascii_int"]

_DIGITS = re.compile(r"[0-9]+")


def ascii_int(text: str, max_digits: int = 18) -> int | None:
    """`text` as a non-negative integer when it is ASCII digits alone (1 to `max_digits` of them), else None:
    signs, spaces, other scripts' digits and a 5,000-digit number are all None."""
    if not 0 < len(text) <= max_digits or not _DIGITS.fullmatch(text):
        return None
    return int(text)
