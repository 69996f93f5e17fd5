"""Whole numbers from text: ASCII digits alone, whatever other scripts call a digit; and no production code
checks digits another way (a `str.isdigit()` before `int()` raises on '²')."""

from __future__ import annotations

import ast

import pytest
from hypothesis import given
from hypothesis import strategies as st

from fleet import cli as fleet_cli
from plumbing.numbers import ascii_int
from tests import REPO_ROOT

ROOT = REPO_ROOT
UNICODE_DIGITS = st.text(st.characters(categories=["Nd", "No"]), min_size=1, max_size=8)


@given(st.integers(min_value=0, max_value=10**18 - 1))
def test_every_ascii_number_reads_as_itself(value: int) -> None:
    assert ascii_int(str(value)) == value


@given(UNICODE_DIGITS)
def test_digits_of_other_scripts_are_no_number(text: str) -> None:
    expected = int(text) if text.isascii() else None
    assert ascii_int(text) == expected


@pytest.mark.parametrize("text", ["", " 1", "1 ", "+1", "-1", "1_000", "1e3", "0x10", "9" * 19, "²", "٣"])
def test_anything_else_is_none(text: str) -> None:
    assert ascii_int(text) is None


def test_no_production_module_checks_digits_with_str_methods() -> None:
    found = []
    for package in ("autoscaler", "exporter", "plumbing", "fleet", "demo"):
        for path in sorted((ROOT / package).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.Attribute) and node.attr in ("isdigit", "isnumeric", "isdecimal"):
                    found.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert found == [], "use plumbing.numbers.ascii_int: " + ", ".join(found)


@pytest.mark.parametrize("flags", [
    ["select", "--gpus", "²", "--prometheus", "http://127.0.0.1:1"],
    ["select", "--gpus", "٣", "--prometheus", "http://127.0.0.1:1"],
    ["estimate", "--params", "7B", "--dtype", "bf16", "--tp", "²"],
])
def test_a_unicode_digit_in_a_flag_is_one_message(flags: list[str],
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    assert fleet_cli.main(flags) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "expected a whole number" in err and "Traceback" not in err
