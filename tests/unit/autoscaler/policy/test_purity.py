"""The engine stays pure: no module of autoscaler/policy imports I/O, clocks, logging or cluster clients."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import autoscaler.policy

FORBIDDEN = {
    "time",
    "datetime",
    "os",
    "io",
    "logging",
    "pathlib",
    "socket",
    "subprocess",
    "threading",
    "random",
    "requests",
    "urllib",
    "yaml",
    "kubernetes",
    "prometheus_api_client",
    "prometheus_client",
}
POLICY_DIR = Path(autoscaler.policy.__file__).parent
SOURCES = sorted(POLICY_DIR.glob("*.py"))


def runtime_imports(path: Path) -> set[str]:
    """Top-level module names imported at run time (imports under `if TYPE_CHECKING:` excluded)."""
    tree = ast.parse(path.read_text())
    names: set[str] = set()
    skip: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING":
            skip.update(id(child) for stmt in node.body for child in ast.walk(stmt))
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        if isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module.split(".")[0])
            if node.module.startswith("autoscaler.") and not node.module.startswith("autoscaler.policy"):
                names.add(node.module)  # only the engine's own modules at run time
    return names


def test_sources_found() -> None:
    assert len(SOURCES) >= 6


@pytest.mark.parametrize("path", SOURCES, ids=[p.name for p in SOURCES])
def test_no_io_clock_or_client_imports(path: Path) -> None:
    imported = runtime_imports(path)
    assert not imported & FORBIDDEN, f"{path.name} imports {sorted(imported & FORBIDDEN)}"
    assert not {n for n in imported if n.startswith("autoscaler.")}, f"{path.name} imports outside the engine"


@pytest.mark.parametrize("path", SOURCES, ids=[p.name for p in SOURCES])
def test_no_loader_even_for_type_checking(path: Path) -> None:
    """The engine owns its input types: not even an annotation reaches back into the loader or controller."""
    tree = ast.parse(path.read_text())
    outside = {node.module for node in ast.walk(tree)
               if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("autoscaler")
               and not node.module.startswith("autoscaler.policy")}
    assert not outside, f"{path.name} imports {sorted(outside)}"
