"""One thing wrong in an input file, as both processes report it: `file:line: field: message`.

The rules file, the Prometheus connections file, a simulate trace, the exporter's config and the simulated-GPU
file all point at the line to fix the same way, so a user reads one format and tests match one shape.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Problem"]


@dataclass(frozen=True)
class Problem:
    """One thing wrong in an input file, located precisely enough to fix without searching."""

    file: str
    line: int
    field: str
    message: str

    def __str__(self) -> str:
        if self.line == 0 and self.field == "file":  # the whole file (missing, unreadable): `FILE: message`
            return f"{self.file}: {self.message}"
        return f"{self.file}:{self.line}: {self.field}: {self.message}"
