"""One glibc malloc arena for the exporter process.

glibc gives each thread that allocates under contention its own malloc arena, up to 8 per core, and each
keeps its freed memory: measured on the 8-GPU scrape benchmark, the extra arenas of the exporter's threads
(HTTP server, kubelet gRPC, samplers) cost about 1.5 MiB of resident memory on every GPU node. The threads are
idle nearly all the time, so sharing one arena costs nothing measurable (docs/benchmarks.md). Python's own
small-object allocator is not affected. An operator's MALLOC_ARENA_MAX wins; other C libraries (musl) have no
arenas and are left alone.
"""

from __future__ import annotations

import ctypes
import os

M_ARENA_MAX = -8
"""glibc's mallopt parameter number for the arena limit (malloc.h)."""


def limit_malloc_arenas(arenas: int = 1) -> bool:
    """Cap glibc's malloc arenas before the process starts its threads; True when glibc accepted it."""
    if "MALLOC_ARENA_MAX" in os.environ:
        return False
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):  # no C library to load, or one without mallopt
        return False
    mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    mallopt.restype = ctypes.c_int
    return bool(mallopt(M_ARENA_MAX, arenas))
