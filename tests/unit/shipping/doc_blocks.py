"""The fenced code blocks of README.md and docs/*.md, and which of them are shell commands a reader runs.

A block's language is its fence's info string (```sh). A shell block (`sh` or `bash`) is run by the suite as
written, unless the line before its fence says why not: `<!-- not run: needs a cluster -->`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from tests.unit.shipping.markdown import ROOT

SHELL = frozenset({"sh", "bash"})
NOT_RUN = re.compile(r"<!-- not run: (\S.*?) -->")
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


@dataclass(frozen=True)
class Block:
    path: Path
    line: int
    """1-based line of the opening fence."""
    language: str
    text: str
    not_run: str | None
    """Why the suite does not run it (the marker's reason), None for a block it runs."""

    @property
    def place(self) -> str:
        return f"{self.path.relative_to(ROOT)}:{self.line}"

    @property
    def runs(self) -> bool:
        return self.language in SHELL and self.not_run is None


def blocks(path: Path) -> list[Block]:
    """Every fenced block of a markdown file, in order."""
    lines = path.read_text().splitlines()
    found = []
    index = 0
    while index < len(lines):
        opening = re.match(r"```(.*)$", lines[index])
        if opening is None:
            index += 1
            continue
        end = next((i for i in range(index + 1, len(lines)) if lines[i].startswith("```")), len(lines))
        before = next((lines[i] for i in range(index - 1, -1, -1) if lines[i].strip()), "")
        marker = NOT_RUN.fullmatch(before.strip())
        found.append(Block(path, index + 1, opening.group(1).strip(), "\n".join(lines[index + 1:end]),
                           marker.group(1) if marker else None))
        index = end + 1
    return found


def every_block() -> list[Block]:
    return [block for page in PAGES for block in blocks(page)]


def runnable_pages() -> list[Path]:
    """The pages with at least one block the suite runs."""
    return [page for page in PAGES if any(block.runs for block in blocks(page))]


def page_script(path: Path) -> str:
    """A page's runnable blocks as one bash script, in order, each announced on stderr by its place, so a
    failure names the block; a reader runs them in one shell, and so does the suite."""
    parts = ["set -euo pipefail"]
    for block in blocks(path):
        if block.runs:
            parts.append(f"echo '::block {block.place}::' >&2")
            parts.append(block.text)
    return "\n".join(parts) + "\n"
