"""plumbing.display: whatever a label holds, a table line holds no control character, a CSV cell is never
read as a formula, and numbers stay numbers."""

from __future__ import annotations

import csv
import io
import shlex
import unicodedata

import pytest
from hypothesis import given
from hypothesis import strategies as st

from plumbing.display import aligned, as_csv, csv_cell, formula_like, shell_word, visible

HOSTILE = [
    "=HYPERLINK(\"http://evil\",\"click\")", "+cmd|' /C calc'!A0", "@SUM(1+1)*cmd|' /C calc'!A0", "-2+3",
    "\t=1+1", "\r=1+1", " =1+1", "\uff1d1+1", "\x1b]0;owned\x07", "\x1b[2J\x1b[31mred", "\u009b2J", "a\bb",
    "line\nbreak", "\u202eevil", "\x00\x7f\x85",
]
"""Labels seen in the wild or made for the purpose: formulas, OSC and CSI sequences, the 8-bit CSI, a
backspace, a line break, a right-to-left override."""
TEXT = st.text(st.characters(codec="utf-8"), max_size=40) | st.sampled_from(HOSTILE)


def shown_controls(text: str) -> list[str]:
    """The characters a terminal acts on rather than shows: C0, DEL, C1, line and paragraph separators, and
    format characters (bidirectional overrides, marks)."""
    return [c for c in text if unicodedata.category(c) in ("Cc", "Zl", "Zp") or c in "\u202a\u202b\u202c"
            "\u202d\u202e\u2066\u2067\u2068\u2069\u200e\u200f\u061c\ufeff"]


@given(TEXT)
def test_visible_leaves_no_control_character_and_is_idempotent(label: str) -> None:
    shown = visible(label)
    assert shown_controls(shown) == []
    assert visible(shown) == shown


@given(st.text(st.characters(codec="utf-8", exclude_categories=["Cc", "Cf", "Zl", "Zp"]), max_size=40))
def test_text_without_controls_is_shown_as_it_is(label: str) -> None:
    assert visible(label) == label


@pytest.mark.parametrize(("label", "shown"), [
    ("\x1b[31mred", "\\x1b[31mred"), ("\u009b2J", "\\u009b2J"), ("a\bb", "a\\x08b"), ("a\nb", "a\\x0ab"),
    ("\u202eevil", "\\u202eevil"), ("plain \\x1b", "plain \\x1b"),
], ids=["csi", "8-bit-csi", "backspace", "newline", "rtl-override", "backslash-kept"])
def test_each_control_is_its_escape(label: str, shown: str) -> None:
    assert visible(label) == shown


@given(st.lists(st.tuples(TEXT, TEXT, TEXT), max_size=5))
def test_a_table_of_any_labels_is_one_line_per_row_without_controls(rows: list[tuple[str, str, str]]) -> None:
    lines = aligned(("NODE", "MODEL", "UUID"), rows).split("\n")
    assert len(lines) == len(rows) + 1
    assert all(shown_controls(line) == [] for line in lines)


def spreadsheet_formula(cell: str) -> bool:
    """How a spreadsheet judges a cell it reads: a formula when its first character, or its first after
    blanks, starts one (OWASP's list and the fullwidth forms); a leading single quote makes it text."""
    return not cell.startswith("'") and formula_like(cell)


@given(st.lists(TEXT, min_size=1, max_size=4))
def test_no_text_cell_is_read_as_a_formula(labels: list[str]) -> None:
    fields = [f"f{i}" for i in range(len(labels))]
    text = as_csv([dict(zip(fields, labels, strict=True))], fields)
    rows = list(csv.reader(io.StringIO(text)))
    assert len(rows) == 2 and len(rows[1]) == len(labels)
    for label, cell in zip(labels, rows[1], strict=True):
        assert not spreadsheet_formula(cell)
        assert shown_controls(cell) == []
        # the label, still readable: as it is, or after the quote that makes a formula-like cell text
        assert cell in (visible(label), "'" + visible(label))


@given(st.integers() | st.floats(allow_nan=False))
def test_numbers_stay_numbers(number: float) -> None:
    assert csv_cell(number) == number
    assert csv_cell(-3) == -3 and csv_cell(None) == ""


@pytest.mark.parametrize("label", HOSTILE)
def test_no_known_formula_is_one(label: str) -> None:
    """A formula start is quoted; a leading tab or CR is shown as its escape, which starts nothing."""
    cell = csv_cell(label)
    assert isinstance(cell, str) and not spreadsheet_formula(cell)
    assert cell.startswith("'") == (label[0] in "=+-@ \uff1d")


@given(TEXT)
def test_a_shell_word_is_one_word(text: str) -> None:
    assert shlex.split(shell_word(text)) == [text]
