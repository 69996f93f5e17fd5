"""Every code block of the docs says what it is, and every shell block is run by the suite or says why not
(tests/integration/shipping/test_docs_blocks.py runs them)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.unit.shipping.doc_blocks import SHELL, blocks, every_block, runnable_pages
from tests.unit.shipping.markdown import ROOT


def test_every_fence_names_its_language() -> None:
    """A bare ``` could hide a command from the runner: output and diagrams are `text`."""
    bare = [block.place for block in every_block() if not block.language]
    assert not bare, f"fences without a language (use text for output): {bare}"


def test_a_not_run_marker_stands_only_before_a_shell_block() -> None:
    misplaced = [block.place for block in every_block() if block.not_run and block.language not in SHELL]
    assert not misplaced, misplaced


def test_the_runner_has_pages_to_run() -> None:
    """The walkthroughs a new user follows are run, not only parsed."""
    names = {page.relative_to(ROOT).as_posix() for page in runnable_pages()}
    assert {"docs/try-without-a-cluster.md", "docs/exporter.md", "docs/fleet.md"} <= names


def test_the_reader_finds_fences_and_markers(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text("x\n\n```sh\necho a\n```\n<!-- not run: needs a cluster -->\n```bash\nkubectl x\n```\n"
                    "```text\nout\n```\n")
    found = blocks(page)
    assert [(b.line, b.language, b.text, b.not_run) for b in found] == [
        (3, "sh", "echo a", None), (7, "bash", "kubectl x", "needs a cluster"), (10, "text", "out", None)]
    assert [b.runs for b in found] == [True, False, False]


@pytest.mark.parametrize("block", [b for b in every_block() if b.not_run], ids=lambda b: b.place)
def test_a_block_not_run_says_why(block: object) -> None:
    assert len(getattr(block, "not_run", "")) >= 10


def test_no_block_writes_into_tmp_by_name() -> None:
    """Scratch files go under `mktemp -d`, which honours TMPDIR (the runner's own directory, checked empty
    after the page); a block naming /tmp would leave them where the runner cannot see them."""
    named = [block.place for block in every_block() if block.runs and "/tmp" in block.text]
    assert not named, named
