"""Hostile files, generated: YAML bombs, deep nesting, huge numbers, huge files, bad encodings.

Each is (id, content, fragment of the expected message, line the message names or None). The same table is
fed to every CLI that reads a YAML file, so one reader missing a guard shows up as one failing row.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from pathlib import Path

_BIN = Path(sys.executable).parent
AUTOSCALER = str(_BIN / "gpu-autoscaler")
EXPORTER = str(_BIN / "gpu-exporter")
HANG_SECONDS = 20.0
"""A hang guard, not a speed target (speed is measured in benchmarks): a reader that stalls or goes
quadratic on these inputs runs for minutes; a guarded one is refused in about a second."""
MAX_RSS_MIB = 200.0

RULES = """\
rules:
  - name: web
    target: {kind: Deployment, namespace: ml, name: web}
    maxReplicas: 10
    metrics:
      - {name: util, query: 'avg(gpu_utilization_ratio)', type: Average, target: 0.8}
"""
"""A valid rules file of one rule (maxReplicas 10, metric `util`), the base of the field cases."""


@dataclass(frozen=True)
class Hostile:
    id: str
    content: bytes
    expected: str
    line: int | None = None


def billion_laughs(levels: int = 9, width: int = 10) -> bytes:
    lines = ["a0: &a0 [" + ", ".join(["lol"] * width) + "]"]
    for level in range(1, levels):
        lines.append(f"a{level}: &a{level} [" + ", ".join([f"*a{level - 1}"] * width) + "]")
    return ("\n".join(lines) + "\n").encode()


def merge_bomb(levels: int = 9, width: int = 10) -> bytes:
    """The same bomb built from merge keys: each mapping merges the previous one `width` times over."""
    lines = ["m0: &m0 {k: v}"]
    for level in range(1, levels):
        merged = ", ".join(f"k{i}: *m{level - 1}" for i in range(width))
        lines.append(f"m{level}: &m{level} {{<<: *m{level - 1}, {merged}}}")
    return ("\n".join(lines) + "\n").encode()


FIFTY_MB = 50 * 1024 * 1024

YAML_HOSTILE: tuple[Hostile, ...] = (
    Hostile("billion-laughs", billion_laughs(), "alias bomb"),
    Hostile("merge-key-bomb", merge_bomb(), "alias bomb"),
    Hostile("recursive-alias", b"a: &a [*a]\n", "recursive alias", 1),
    Hostile("recursive-merge", b"a: &a {<<: *a}\n", "recursive alias", 1),
    Hostile("100000-brackets", b"[" * 100_000 + b"]" * 100_000 + b"\n", "nested more than 64 levels", 1),
    Hostile("5000-digit-integer", b"x: " + b"9" * 5000 + b"\n", "a number 5,000 characters long", 1),
    Hostile("5000-digit-float", b"x: 1." + b"5" * 5000 + b"\n", "a number 5,002 characters long", 1),
    Hostile("300000-nodes", b"[" + b"0," * 300_000 + b"]\n", "more than 250,000 YAML nodes", 1),
    Hostile("50-MB", b"#" * FIFTY_MB, "larger than"),
    Hostile("not-utf8", b"a: 1\nb: caf\xe9\n", "not UTF-8 text (byte 0xe9", 2),
    Hostile("second-document", b"a: 1\n---\nb: 2\n", "found a second '---' document", 2),
    Hostile("tab-indent", b"a:\n\t- 1\n", "not valid YAML", 2),
)


SPARSE_BYTES = 4 * 1024**3


def endless_files(directory: Path) -> list[tuple[str, Path, str]]:
    """Files a reader must refuse before reading them whole, as (id, path, fragment of the message): a FIFO
    with no writer (hangs), /dev/zero and /dev/urandom (never end), a sparse 4 GiB file (costs nothing on
    disk, 4 GiB in memory). Made in `directory`."""
    fifo = directory / "fifo"
    os.mkfifo(fifo)
    sparse = directory / "sparse"
    with sparse.open("wb") as handle:
        handle.truncate(SPARSE_BYTES)
    return [("fifo", fifo, "a FIFO (named pipe), not a regular file"),
            ("dev-zero", Path("/dev/zero"), "a character device, not a regular file"),
            ("dev-urandom", Path("/dev/urandom"), "a character device, not a regular file"),
            ("sparse-4-GiB", sparse, "larger than")]
