"""Labels come from whoever can write to Prometheus: `select -o docker` puts only GPU and MIG UUIDs on a
command line, and every other output (tables, Markdown, CSV) shows a hostile label without obeying it."""

from __future__ import annotations

import csv
import io
import shlex
from collections import Counter

import pytest
from hypothesis import given
from hypothesis import strategies as st

from fleet.commands.export import write
from fleet.placing.choosing import docker_argument, refused_ids
from fleet.placing.inventory import Gpu
from fleet.placing.selection import DEVICE_ID, Exclusion, Request, Selection, select
from fleet.placing.table import formatted
from fleet.reporting.render_md import md_cell

GPU_UUID = "GPU-12345678-1234-1234-1234-123456789abc"
MIG_UUID = "MIG-abcdef01-2345-6789-abcd-ef0123456789"
OLD_MIG = "MIG-GPU-12345678-1234-1234-1234-123456789abc/1/0"
VALID = st.sampled_from([GPU_UUID, MIG_UUID, OLD_MIG, "GPU-" + GPU_UUID[4:].upper()])
HOSTILE_UUIDS = [f"{GPU_UUID} --privileged -v /:/host", f"{GPU_UUID},all", "all", f"{GPU_UUID}\n",
                 f"{GPU_UUID}'\"; rm -rf ~", "GPU-x", f"{OLD_MIG}/9", "", f" {GPU_UUID}"]
UUIDS = VALID | st.sampled_from(HOSTILE_UUIDS) | st.text(max_size=60) | VALID.map(lambda u: u + ",all")


def gpu(uuid: str, index: int = 0, node: str = "node-a", model: str = "H100") -> Gpu:
    return Gpu(node, str(index), uuid, model, up=True, utilization=0.1, memory_used=1.0, memory_total=80.0,
               health="healthy", score=0.9)


def docker_words(argument: str | None) -> list[str]:
    """The words a shell makes of the printed argument, with the device list unwrapped."""
    return [] if argument is None else shlex.split(argument)


@given(st.lists(UUIDS, min_size=1, max_size=6))
def test_any_uuid_labels_make_one_gpus_argument_of_valid_ids_or_nothing(uuids: list[str]) -> None:
    gpus = [gpu(u, i) for i, u in enumerate(uuids)]
    chosen = Selection(tuple(gpus), len(gpus), Counter(), Request(len(gpus)))  # as if chosen regardless
    words = docker_words(docker_argument(chosen))
    valid = [u for u in uuids if DEVICE_ID.fullmatch(u)]
    if not valid:
        assert words == [] and refused_ids(chosen) is not None
        return
    assert len(words) == 2 and words[0] == "--gpus"
    devices = words[1]
    assert devices.startswith('"device=') and devices.endswith('"')
    assert devices[len('"device='):-1].split(",") == valid


@given(st.lists(UUIDS, min_size=1, max_size=6), st.integers(1, 3))
def test_with_docker_a_gpu_of_another_uuid_is_never_chosen(uuids: list[str], wanted: int) -> None:
    gpus = [gpu(u, i) for i, u in enumerate(uuids)]
    selection = select(gpus, Request(wanted, same_node=True, device_ids_only=True))
    assert all(DEVICE_ID.fullmatch(g.uuid) for g in selection.chosen)
    refused = sum(1 for u in uuids if not DEVICE_ID.fullmatch(u))
    assert selection.excluded[Exclusion.NOT_DEVICE_ID] == refused
    if selection.ok:
        assert refused_ids(selection) is None


@pytest.mark.parametrize("uuid", HOSTILE_UUIDS)
def test_no_hostile_uuid_is_a_device_id(uuid: str) -> None:
    assert DEVICE_ID.fullmatch(uuid) is None


@pytest.mark.parametrize("uuid", [GPU_UUID, MIG_UUID, OLD_MIG])
def test_the_three_device_id_forms_are(uuid: str) -> None:
    assert docker_words(docker_argument(Selection((gpu(uuid),), 1, Counter(), Request(1)))) == [
        "--gpus", f'"device={uuid}"']


HOSTILE_LABELS = ['=HYPERLINK("http://evil","x")', "+cmd|' /C calc'!A0", "@SUM(1)", "-1+2",
                  "n\x1b]0;owned\x07\x1b[31m\u009b2J\b", "a|b"]


@pytest.mark.parametrize("output", ["table", "wide", "csv"])
def test_status_formats_show_hostile_labels_inert(output: str) -> None:
    gpus = [gpu(GPU_UUID, i, node=label, model=label) for i, label in enumerate(HOSTILE_LABELS)]
    text = formatted(gpus, output, color=False, now=0.0)
    assert "\x1b" not in text and "\u009b" not in text and "\b" not in text
    if output == "csv":
        rows = list(csv.DictReader(io.StringIO(text)))
        assert [r["node"] for r in rows] == ["'" + HOSTILE_LABELS[0], "'" + HOSTILE_LABELS[1],
                                             "'" + HOSTILE_LABELS[2], "'-1+2",
                                             "n\\x1b]0;owned\\x07\\x1b[31m\\u009b2J\\x08", "a|b"]
        assert [r["index"] for r in rows] == [str(i) for i in range(len(HOSTILE_LABELS))]  # numbers unquoted


def test_a_markdown_cell_cannot_add_a_column_or_a_control() -> None:
    assert md_cell("a|b\x1b[2J") == "a\\|b\\x1b[2J"


@pytest.mark.parametrize("form", ["csv", "table", "wide"])
def test_export_shows_hostile_labels_inert(form: str) -> None:
    rows = [{"time": 60.0, "node": label, "gpu": "0", "uuid": label, "model": label, "namespace": "ns",
             "pod": label, "utilization": -0.5} for label in HOSTILE_LABELS]
    out = io.StringIO()
    write([rows], ["utilization"], form, out)
    text = out.getvalue()
    assert "\x1b" not in text and "\u009b" not in text and "\b" not in text
    if form == "csv":
        parsed = list(csv.DictReader(io.StringIO(text)))
        assert all(not r["node"].startswith(("=", "+", "@", "-")) for r in parsed)
        assert {r["utilization"] for r in parsed} == {"-0.5"}  # a negative number is not quoted
