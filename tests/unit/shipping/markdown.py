"""Reading the repository's markdown as GitHub renders it: heading anchors and relative links."""

from __future__ import annotations

import re
from pathlib import Path

from tests import REPO_ROOT

ROOT = REPO_ROOT
FENCE = re.compile(r"^```.*?^```", re.MULTILINE | re.DOTALL)
CODE_SPAN = re.compile(r"`[^`\n]*`")
LINK = re.compile(r"!?\[[^\]\n]*\]\(([^)\s]+)\)")


def github_anchor(heading: str) -> str:
    """The anchor GitHub gives a markdown heading."""
    slug = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return slug.replace(" ", "-")


def prose(text: str) -> str:
    """The text outside code fences (where a `# ...` line is not a heading nor a `](...)` a link)."""
    return FENCE.sub("", text)


def anchors(path: Path) -> set[str]:
    """The anchors of every heading of a markdown file."""
    return {github_anchor(line.lstrip("#")) for line in prose(path.read_text()).splitlines()
            if re.match(r"#{1,6} ", line)}


def relative_links(path: Path) -> list[str]:
    """Every link and image target of a markdown file that is not a URL (`file`, `file#anchor`, `#anchor`)."""
    return [target for target in LINK.findall(CODE_SPAN.sub("", prose(path.read_text())))
            if not re.match(r"[a-z][a-z0-9+.-]*:", target)]
