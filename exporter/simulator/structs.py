"""Stand-ins for pynvml's ctypes structures where the simulator answers with a plain attribute bag: the same
field names, so the adapter reads them as it reads pynvml's. Shared by the simulated NVML's surfaces.
"""

from __future__ import annotations

from typing import Any


class SimStruct:
    """Attribute bag standing in for pynvml's ctypes structures (same field names)."""

    def __init__(self, **fields: Any) -> None:
        self.__dict__.update(fields)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.__dict__})"
