"""Every relative link and image in README.md and docs/*.md points at a file of the repository, every
`#anchor` into a markdown file names one of its headings (moving a section cannot leave a dead link), and
every repository path the docs name in code (`exporter/metric_table.py`) exists (moving a module cannot leave
a stale one)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.unit.shipping.markdown import ROOT, anchors, relative_links

DOCUMENTS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
# A path in a code span under one of the repository's own folders; placeholders (`<piece>`) and globs skipped.
NAMED_PATH = re.compile(r"`((?:exporter|autoscaler|plumbing|demo|benchmarks|scripts|tests|rules|manifests|"
                        r"dashboards|examples|docs)/[\w./-]*)`")


def dead_links(document: Path, root: Path = ROOT) -> list[str]:
    dead = []
    for target in relative_links(document):
        file, _, anchor = target.partition("#")
        linked = (document.parent / file).resolve() if file else document
        if not linked.exists() or not linked.is_relative_to(root):
            dead.append(f"{target}: no file {linked}")
        elif anchor and linked.suffix == ".md" and anchor not in anchors(linked):
            dead.append(f"{target}: no heading #{anchor} in {linked.relative_to(root)}")
    return dead


@pytest.mark.parametrize("document", DOCUMENTS, ids=lambda path: str(path.relative_to(ROOT)))
def test_every_relative_link_resolves(document: Path) -> None:
    assert dead_links(document) == []


@pytest.mark.parametrize("document", DOCUMENTS, ids=lambda path: str(path.relative_to(ROOT)))
def test_every_named_repository_path_exists(document: Path) -> None:
    named = set(NAMED_PATH.findall(document.read_text()))
    assert sorted(path for path in named if not (ROOT / path).exists()) == []


def test_the_path_pattern_finds_the_architectures_paths() -> None:
    named = NAMED_PATH.findall((ROOT / "README.md").read_text())
    assert "exporter/metric_table.py" in named and "autoscaler/policy/" in named
    assert NAMED_PATH.findall("`exporter/gone.py` and `tests/unit/<piece>/`") == ["exporter/gone.py"]


def test_the_readme_links_every_page_of_docs() -> None:
    linked = {(ROOT / target.partition("#")[0]).resolve() for target in relative_links(ROOT / "README.md")}
    assert set(DOCUMENTS[1:]) - linked == set()


def test_a_dead_link_and_a_dead_anchor_are_found(tmp_path: Path) -> None:
    (tmp_path / "other.md").write_text("# Other\n\n## A section\n")
    page = tmp_path / "page.md"
    page.write_text("[ok](other.md#a-section) [gone](missing.md) [bad](other.md#no-such) `[code](nope.md)`\n"
                    "```\n[fenced](nope.md)\n```\n[web](https://example.com/x.md)\n")
    assert relative_links(page) == ["other.md#a-section", "missing.md", "other.md#no-such"]
    assert [entry.split(":")[0] for entry in dead_links(page, tmp_path)] == ["missing.md", "other.md#no-such"]
