"""The `gpu-fleet estimate` examples in docs/fleet.md are what the command prints (estimate needs no
Prometheus, so its documented output can be checked to the character)."""

from __future__ import annotations

import contextlib
import io
import re
import shlex

from fleet.cli import main
from tests import REPO_ROOT

DOC = REPO_ROOT / "docs" / "fleet.md"
EXAMPLE = re.compile(r"```text\n\$ (gpu-fleet estimate [^\n]*)\n(.*?)```", re.S)


def examples() -> list[tuple[str, str]]:
    return [(m.group(1), m.group(2)) for m in EXAMPLE.finditer(DOC.read_text())]


def test_the_docs_show_an_estimate_and_it_is_what_the_command_prints() -> None:
    found = examples()
    assert found, "docs/fleet.md has no `$ gpu-fleet estimate` example block"
    for command, shown in found:
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            code = main(shlex.split(command)[1:])
        assert code == 0, command
        assert out.getvalue() == shown, f"docs/fleet.md: {command}: the shown output is stale"
