"""plumbing.yamlsafe: each limit refuses past its bound and accepts at it; messages name file and line."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from yaml.nodes import MappingNode

from plumbing.yamlsafe import (
    YamlFileError,
    YamlLimits,
    compose,
    line_of,
    load,
    load_file,
    read_bytes,
    read_text,
)
from tests.hostile import YAML_HOSTILE, Hostile

SMALL = YamlLimits(max_bytes=1000, max_depth=4, max_nodes=50, max_expanded_nodes=100, max_number_length=8)


@pytest.mark.parametrize("hostile", YAML_HOSTILE, ids=[h.id for h in YAML_HOSTILE])
def test_every_hostile_file_is_one_error_naming_file_and_line(hostile: Hostile, tmp_path: Path) -> None:
    path = tmp_path / "hostile.yaml"
    path.write_bytes(hostile.content)
    with pytest.raises(YamlFileError) as info:
        load_file(path)
    assert hostile.expected in str(info.value)
    assert info.value.path == str(path)
    if hostile.line is not None:
        assert info.value.line == hostile.line and str(info.value).startswith(f"{path}:{hostile.line}: ")


@pytest.mark.parametrize(("text", "ok"), [
    ("[[[1]]]", True), ("[[[[1]]]]", True), ("[[[[[1]]]]]", False),  # depth 4 is the limit
    ("{a: {b: {c: {d: 1}}}}", True), ("{a: {b: {c: {d: {e: 1}}}}}", False),
])
def test_depth_limit(text: str, ok: bool) -> None:
    if ok:
        assert load(text, "f", SMALL) is not None
    else:
        with pytest.raises(YamlFileError, match="nested more than 4 levels deep"):
            load(text, "f", SMALL)


@pytest.mark.parametrize("depth", [65, 999, 1_001, 5_000])
def test_depth_past_libyamls_own_limit_gets_our_message(depth: int) -> None:
    """libyaml (PyYAML >= 6.0.4) refuses 1,000 nested brackets in its scanner with its own words; the
    message must be ours on either side of that, whichever PyYAML is installed."""
    with pytest.raises(YamlFileError) as info:
        load("x: " + "[" * depth + "]" * depth + "\n", "f")
    assert str(info.value) == "f:1: nested more than 64 levels deep; refusing to read it"


@pytest.mark.parametrize("text", ["a: [b, c\nd: 1\n", "a:\n\t- 1\n", "a: 'x\n", "{a: 1\n"])
def test_a_syntax_error_is_described_by_the_pure_python_parser(text: str) -> None:
    """Whatever libyaml says of a broken file, the user reads the pure-Python parser's message, so one file
    gives one message whether or not PyYAML was built with libyaml."""
    with pytest.raises(YamlFileError) as info:
        load(text, "f")
    try:
        for _ in yaml.parse(text, Loader=yaml.SafeLoader):
            pass
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        assert mark is not None
        assert str(info.value) == f"f:{mark.line + 1}: not valid YAML: {exc.problem}"
    else:
        pytest.fail("the pure-Python parser accepted a broken file")


def test_node_limit_counts_nodes_as_written() -> None:
    assert len(load("[" + "1," * 48 + "]", "f", SMALL)) == 48  # 48 scalars + the list: 49 nodes
    with pytest.raises(YamlFileError, match="more than 50 YAML nodes"):
        load("[" + "1," * 50 + "]", "f", SMALL)


def test_expansion_limit_counts_every_alias_as_the_reader_sees_it() -> None:
    base = "a: &a [1, 2, 3, 4, 5, 6, 7, 8, 9]\n"  # the list and 9 scalars: 10 nodes
    assert load(base + "b: [" + ", ".join(["*a"] * 8) + "]\n", "f", SMALL)["b"][7] == list(range(1, 10))
    with pytest.raises(YamlFileError, match=r"aliases expand to more than 100 nodes \(an alias bomb\?\)"):
        load(base + "b: [" + ", ".join(["*a"] * 10) + "]\n", "f", SMALL)


def test_number_length_limit_applies_to_ints_and_floats_not_strings() -> None:
    assert load("a: 12345678\nb: '123456789'\nc: 1.5e+300\n", "f", SMALL) == {
        "a": 12345678, "b": "123456789", "c": 1.5e300}
    with pytest.raises(YamlFileError, match=r"^f:2: a number 9 characters long \(at most 8\)"):
        load("a: 1\nb: 123456789\n", "f", SMALL)
    with pytest.raises(YamlFileError, match="a number 10 characters long"):
        load("a: -1.2345678\n", "f", SMALL)


def test_an_alias_used_twice_is_not_recursion() -> None:
    assert load("a: &x {k: 1}\nb: *x\nc: {<<: *x, j: 2}\n", "f") == {
        "a": {"k": 1}, "b": {"k": 1}, "c": {"k": 1, "j": 2}}


def test_byte_limit_reads_no_further(tmp_path: Path) -> None:
    path = tmp_path / "big.yaml"
    path.write_bytes(b"#" * 1001)
    with pytest.raises(YamlFileError, match=r"the rules file is larger than 1,000 bytes"):
        read_bytes(path, SMALL, "rules file")
    path.write_bytes(b"#" * 1000)
    assert len(read_bytes(path, SMALL)) == 1000
    with pytest.raises(YamlFileError, match="larger than 1,000 bytes"):
        compose("#" * 1001, "f", SMALL)


def test_unreadable_and_non_utf8_files(tmp_path: Path) -> None:
    with pytest.raises(YamlFileError, match=r"/absent\.yaml: not found$"):
        read_text(tmp_path / "absent.yaml")
    with pytest.raises(YamlFileError, match="cannot read the file: a directory, not a regular file"):
        read_text(tmp_path)
    (tmp_path / "latin1.yaml").write_bytes(b"a: 1\n\nb: \xff\n")
    with pytest.raises(YamlFileError, match=r"latin1\.yaml:3: not UTF-8 text \(byte 0xff at offset 9\)"):
        read_text(tmp_path / "latin1.yaml")


def test_empty_document_is_none_and_lines_are_one_based() -> None:
    assert compose("", "f") is None
    assert load("# only a comment\n", "f") is None
    root = compose("\n\na: 1\n", "f")
    assert isinstance(root, MappingNode) and line_of(root.value[0][0]) == 3


def test_values_that_cannot_be_constructed_are_errors_not_exceptions() -> None:
    with pytest.raises(YamlFileError, match="a value cannot be read"):
        load("a: 2024-13-45\n", "f")  # a timestamp by YAML's regex, no such date
    with pytest.raises(YamlFileError, match=r"^f:1: not valid YAML"):
        load("a: !!python/object:os.system x\n", "f")  # safe loading: no arbitrary tags


def test_line_at_finds_the_node_a_field_path_names() -> None:
    from plumbing.yamlnodes import line_at

    root = compose("a: 1\ngpus:\n  - model: H100\n    processes:\n      - {pid: 7}\n      - {pid: 8}\n", "f")
    assert line_at(root, "gpus[0].processes[1].pid") == 6
    assert line_at(root, "gpus[0].model") == 3
    assert line_at(root, "gpus[0].colour") == 3  # a missing key: its mapping, where it would be written
    assert line_at(root, "gpus[5]") == 3  # a missing item: the list
    assert line_at(root, "") == 1 and line_at(None, "gpus") == 1
