"""The task configuration file and the parallel sizes: every spelling of a name, one row per combination,
each bad field named."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from fleet.errors import UsageError
from fleet.sizing.taskconfig import canonical, combinations, flag_names, params_from_name, read_task_config
from tests.hostile import endless_files


@pytest.mark.parametrize("name", ["tensor-parallel-size", "tp-size", "tp_size", "tp", "TP_SIZE",
                                  "tensor_parallel_size"])
def test_every_spelling_of_tensor_parallel(name: str) -> None:
    assert canonical(name) == "tp"


def test_flags_and_other_names() -> None:
    assert flag_names("dcp") == ["--dcp", "--dcp-size", "--dcp_size", "--decode-context-parallel-size",
                                 "--decode_context_parallel_size"]
    assert canonical("mem-fraction-static") is None
    assert params_from_name("meta-llama/Llama-3.1-70B-Instruct") == "70B"
    assert params_from_name("llama-3-8b") == "8B" and params_from_name("gpt2") is None


def test_the_seeds_task_config(tmp_path: Path) -> None:
    path = tmp_path / "task.json"
    path.write_text('{"model": {"id_or_path": "llama-3-70b"}, "parameters": {"tp-size": [1, 2, 4], '
                    '"pp_size": [1], "dp-size": 2, "cp-size": [1], "dcp-size": [1], "max-num-seqs": [64]}}')
    config = read_task_config(str(path))
    assert config.model == "llama-3-70b"
    assert config.sizes == {"tp": [1, 2, 4], "pp": [1], "dp": [2], "cp": [1], "dcp": [1]}
    rows = combinations(config.sizes)
    assert [(r["tp"], r["dp"]) for r in rows] == [(1, 2), (2, 2), (4, 2)]


@pytest.mark.parametrize(("text", "message"), [
    ("{", "line 1: not JSON"),
    ("[]", 'expected a JSON object with "parameters"'),
    ('{"parameters": []}', "parameters: expected an object"),
    ('{"parameters": {"tp-size": [0]}}', "parameters.tp-size: expected a whole number from 1"),
    ('{"parameters": {"tp-size": ["two"]}}', "parameters.tp-size: expected a whole number"),
    ('{"parameters": {"tp-size": true}}', "parameters.tp-size: expected a whole number"),
    ('{"parameters": {"tp-size": []}}', "parameters.tp-size: expected at least one size"),
    ('{"parameters": {"tp": [1], "tp_size": [2]}}', "tp is given twice"),
    ('{"model": {"id_or_path": 7}}', "model: expected"),
], ids=["truncated", "list", "parameters-list", "zero", "string", "bool", "empty", "twice", "model"])
def test_a_bad_file_is_one_message_naming_the_file_and_field(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "task.json"
    path.write_text(text)
    with pytest.raises(UsageError, match=message) as caught:
        read_task_config(str(path))
    assert str(caught.value).startswith(f"--task-config {path}:")


def test_too_many_combinations_are_refused_before_they_are_made() -> None:
    with pytest.raises(UsageError, match="more than 1,024"):
        combinations({dim: list(range(1, 11)) for dim in ("tp", "pp", "dp", "cp")})


@pytest.mark.timeout(20)  # a FIFO read whole would block for ever, /dev/zero fill the memory
def test_a_file_that_never_ends_is_refused_unread(tmp_path: Path) -> None:
    for name, path, message in endless_files(tmp_path):
        with pytest.raises(UsageError, match=re.escape(message)) as caught:
            read_task_config(str(path))
        assert str(caught.value).startswith(f"--task-config {path}:"), name


def test_a_4300_digit_integer_is_one_message(tmp_path: Path) -> None:
    path = tmp_path / "task.json"
    path.write_text('{"parameters": {"tp-size": ' + "9" * 4301 + "}}")
    with pytest.raises(UsageError, match="a number too long to read"):
        read_task_config(str(path))
