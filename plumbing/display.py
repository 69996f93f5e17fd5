"""Text from outside (Prometheus labels, NVML strings, kubelet pod names) made safe where it is shown: on a
terminal, in a spreadsheet, on a shell's command line. Every table, CSV and shell argument the three CLIs
print goes through here, so one rule holds everywhere.

- Terminal: a label holding ESC (CSI and OSC sequences), U+009B (the 8-bit CSI), a backspace or any other
  C0/C1 control, DEL, a line or paragraph separator or a bidirectional override could recolour the screen,
  retitle the window, hide a row or reorder what is read. `visible` writes each such character as its escape
  (`\\x1b`, `\\u009b`, `\\u202e`), so what is shown is what the label holds, one line per row. A backslash
  is left as it is: a label spelling `\\x1b` reads the same as one holding ESC, and neither moves the cursor.
- Spreadsheet: a text cell starting with `=`, `+`, `-`, `@`, a tab or a CR (or their fullwidth forms, which
  some spreadsheets also take, or any of them after leading blanks) is read as a formula by Excel, LibreOffice
  and Google Sheets (OWASP "CSV Injection"). `csv_cell` prefixes such text with a single quote; numbers stay
  numbers (a negative count is `-3`, not text), so only text cells are ever changed. Control characters in
  text cells are made visible as on a terminal: a CSV is often read with `cat`.
- Shell: `shell_word` quotes a word for a POSIX shell (`shlex.quote`).
"""

from __future__ import annotations

import csv
import io
import re
import shlex
from collections.abc import Iterable, Mapping, Sequence

__all__ = ["aligned", "as_csv", "csv_cell", "formula_like", "padded", "shell_word", "visible", "widths"]

_FORMULA_STARTS = frozenset("=+-@\t\r\uff1d\uff0b\uff0d\uff20")
"""What a spreadsheet may read as the start of a formula: OWASP's six and the fullwidth = + - @."""
_BLANKS = " \u00a0\u3000"
_MAYBE_FORMULA = _FORMULA_STARTS | frozenset(_BLANKS)
_NUMBERS = (bool, int, float)
_HIDDEN = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\u200e\u200f\u061c\u202a-\u202e\u2066-\u2069\ufeff]")
"""C0, DEL and C1 controls; and line and paragraph separators, bidirectional marks, embeddings, overrides and
isolates, the BOM: not controls, but they break a line or reorder what a reader sees (Trojan Source)."""


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x80 else f"\\u{code:04x}"


def visible(text: str) -> str:
    """`text` with every control character written as its escape: ESC as `\\x1b`, U+009B as `\\u009b`, a tab
    as `\\x09`, a newline as `\\x0a`; other text (and backslashes) as they are. Idempotent."""
    return _HIDDEN.sub(_escape, text)


def formula_like(text: str) -> bool:
    """Whether a spreadsheet could read the text cell `text` as a formula."""
    return bool(text) and (text[0] in _FORMULA_STARTS
                           or (text[0] in _BLANKS and text.lstrip(_BLANKS)[:1] in _FORMULA_STARTS))


def csv_cell(value: object) -> object:
    """A value as one CSV cell: numbers (and booleans) as they are; None empty; text with its control
    characters visible and, when a spreadsheet could read it as a formula, a single quote in front."""
    if isinstance(value, str):
        text = value
    elif value is None:
        return ""
    elif isinstance(value, _NUMBERS):
        return value
    else:
        text = str(value)
    if _HIDDEN.search(text):
        text = visible(text)
    return "'" + text if text[:1] in _MAYBE_FORMULA and formula_like(text) else text  # one test for most


def as_csv(records: Iterable[Mapping[str, object]], fields: Sequence[str], headers: bool = True) -> str:
    """RFC 4180 lines of `records` (each cell through `csv_cell`; lists joined with spaces)."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    if headers:
        writer.writerow([csv_cell(f) for f in fields])
    for record in records:
        writer.writerow([csv_cell(_joined(record.get(f))) for f in fields])
    return out.getvalue().rstrip("\n")


def _joined(value: object) -> object:
    if isinstance(value, list | tuple):
        return " ".join(str(v) for v in value)
    return value


def aligned(header: Sequence[str], rows: Iterable[Sequence[object]], headers: bool = True) -> str:
    """Columns padded to their widest cell, two spaces apart, the last unpadded; every cell `visible`."""
    shown = _shown([header, *rows] if headers else rows)
    return "\n".join(_padded(shown, _widths(shown, len(header))))


def widths(rows: Sequence[Sequence[str]], columns: int, at_least: Sequence[int] = ()) -> list[int]:
    """The width of each column but the last: its widest cell as shown (`visible`), and at least
    `at_least`'s."""
    return _widths(_shown(rows), columns, at_least)


def padded(rows: Sequence[Sequence[str]], sizes: Sequence[int]) -> list[str]:
    """Each row's cells made `visible`, padded to `sizes`, two spaces apart, the last cell unpadded; no
    trailing blanks."""
    return _padded(_shown(rows), sizes)


def _shown(rows: Iterable[Sequence[object]]) -> list[list[str]]:
    """Every cell as text, `visible`; a row is looked at whole first (one search, not one per cell), since
    almost none holds a control character."""
    out = []
    for row in rows:
        cells = [str(c) for c in row]
        out.append([visible(c) for c in cells] if _HIDDEN.search("".join(cells)) else cells)
    return out


def _widths(rows: Sequence[Sequence[str]], columns: int, at_least: Sequence[int] = ()) -> list[int]:
    return [max([len(r[i]) for r in rows] + list(at_least[i:i + 1]), default=0) for i in range(columns - 1)]


def _padded(rows: Sequence[Sequence[str]], sizes: Sequence[int]) -> list[str]:
    return [("  ".join(c.ljust(w) for c, w in zip(r[:-1], sizes, strict=True)) + "  " + r[-1]).rstrip()
            for r in rows]


def shell_word(text: str) -> str:
    """`text` as one word of a POSIX shell command line, quoted where it needs to be."""
    return shlex.quote(text)
