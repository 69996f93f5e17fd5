"""One convention for every subcommand: -o json (JSON on failure too), --version, exit codes and eligibility
in --help; `estimate`'s sizes, task config and world size; `status --watch`. In-process, no Prometheus
(estimate with --gpu-memory needs none)."""

from __future__ import annotations

import contextlib
import io
import json
import threading
from pathlib import Path

import pytest

from fleet import cli
from fleet.commands.status import CLEAR, watch
from fleet.errors import Unreachable

FLAT = ["--gpu-memory", "80GiB"]


def run(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = cli.main(list(argv))
        except SystemExit as exc:  # --help and --version
            code = int(exc.code or 0)
    return code, out.getvalue(), err.getvalue()


def test_70b_bf16_at_tp_2_with_35000_tokens_does_not_fit_an_h100s_real_memory() -> None:
    args = ["estimate", "--params", "70B", "--tp", "2", "--pp", "1", "--context", "35000"]
    assert run(*args, "--gpu-memory", "80GiB")[0] == 0
    code, out, _ = run(*args, "--gpu-memory", "79.6GiB", "-o", "json")
    assert code == 1 and json.loads(out)["fits"] is False
    assert isinstance(json.loads(out)["bytes_per_gpu"]["total"], int)
    assert json.loads(out)["params"] == 70_000_000_000
    assert isinstance(json.loads(out)["gpu_memory_bytes"], int)


def test_world_size_is_tp_pp_max_of_dp_cp_dcp() -> None:
    code, out, _ = run("estimate", "--params", "8B", "--tp_size", "2", "--pipeline-parallel-size", "1",
                       "--dp", "2", "--cp", "4", "--dcp", "1", "-o", "json", *FLAT)
    document = json.loads(out)
    assert code == 0 and (document["gpus"], document["cp"]) == (2 * 1 * 4, 4)
    assert "split: tp 2 x pp 1 x max(dp 2, cp 4, dcp 1) = 8 GPU(s)" in run(
        "estimate", "--params", "8B", "--tp", "2", "--pp", "1", "--dp", "2", "--cp", "4", *FLAT)[1]


def test_a_task_config_is_one_row_per_combination(tmp_path: Path) -> None:
    task = tmp_path / "task.json"
    task.write_text('{"model": {"id_or_path": "llama-3-70b"}, "parameters": {"tp-size": [1, 2, 4], '
                    '"pp-size": [1]}}')
    code, out, _ = run("estimate", "--task-config", str(task), *FLAT)
    lines = out.splitlines()
    assert code == 1  # tp 1 does not fit: not every row fits
    assert lines[0].split() == ["TP", "PP", "DP", "CP", "DCP", "GPUS", "PER", "GPU", "FITS"]
    assert [line.split()[0] + ":" + line.split()[-1] for line in lines[1:4]] == ["1:NO", "2:yes", "4:yes"]
    code, out, _ = run("estimate", "--task-config", str(task), "--tp", "2,4", "-o", "csv", "--no-headers",
                       *FLAT)
    assert code == 0 and [line.split(",")[0] for line in out.splitlines()] == ["2", "4"]


def test_json_on_failure_too() -> None:
    code, out, err = run("estimate", "--params", "70B", "--tp", "3", "-o", "json", *FLAT)
    message = "--tp 3: the 64 attention heads are not divisible by it"
    assert code == 2 and json.loads(out) == {"schemaVersion": 1, "error": message, "exit_code": 2}
    assert err == f"gpu-fleet estimate: {message}\n"
    code, out, err = run("status", "-o", "json", "--sort", "x")  # refused by argparse
    assert code == 2 and "--sort" in json.loads(out)["error"] and json.loads(out)["exit_code"] == 2
    assert err.startswith("usage: gpu-fleet status")
    assert run("status", "--sort", "x")[1] == ""  # no JSON unless asked
    code, out, _ = run("export", "--format", "json", "--step", "soon")  # --format: -o's old name
    assert code == 2 and "--step" in json.loads(out)["error"]


def test_docker_output_needs_a_selection() -> None:
    code, _, err = run("estimate", "--params", "8B", "-o", "docker", *FLAT)
    assert code == 2 and "-o docker: only with --then-select or --then-wait" in err


@pytest.mark.parametrize("command", ["status", "select", "wait", "estimate", "report", "export"])
def test_every_command_has_version_output_and_exit_codes_in_help(command: str) -> None:
    code, out, _ = run(command, "--version")
    assert code == 0 and out.startswith("gpu-fleet ")
    code, out, _ = run(command, "--help")
    assert code == 0 and "-o FORMAT, --output FORMAT" in out and "exit status:" in out
    if command in ("select", "wait", "estimate"):
        assert "a gpu is eligible when all of these hold:" in out.lower() and "--allow-throttled" in out


def test_watch_redraws_on_a_terminal_and_appends_in_a_pipe() -> None:
    for tty, lines in ((True, False), (False, False), (False, True)):
        stop, looks, out = threading.Event(), [], io.StringIO()

        def look(looks: list[int] = looks, stop: threading.Event = stop) -> str:
            looks.append(1)
            if len(looks) == 2:
                stop.set()
            return f"look {len(looks)}"

        assert watch(look, interval=0.01, stop=stop, out=out, tty=tty, title="gpu-fleet status",
                     lines=lines, clock=lambda: 0.0) == 2
        text = out.getvalue()
        if lines:
            assert text == "look 1\nlook 2\n"
        else:
            assert text.count(CLEAR) == (2 if tty else 0) and text.count("Every 0.01s: gpu-fleet status") == 2
            assert "look 1" in text and "look 2" in text


def test_watch_shows_an_unreachable_prometheus_and_goes_on() -> None:
    stop, looks, out = threading.Event(), [], io.StringIO()

    def look() -> str:
        looks.append(1)
        if len(looks) == 1:
            raise Unreachable("cannot reach Prometheus at http://127.0.0.1:9")
        stop.set()
        return "back"

    assert watch(look, interval=0.01, stop=stop, out=out, tty=False, title="t", lines=True) == 2
    assert out.getvalue() == "error: cannot reach Prometheus at http://127.0.0.1:9\nback\n"
