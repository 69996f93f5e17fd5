"""Files the processes read are opened only when they are regular files.

A FIFO blocks `open()` until a writer comes (a process stalled at start-up or mid-sync), `/dev/zero` never
ends, a directory or a socket fails with an errno a user has to decode. Each is refused at once, with one
message naming the file and what it is. The open itself never blocks (O_NONBLOCK), so a FIFO is found by
looking at it, not by waiting on it.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import BinaryIO

__all__ = ["NOT_FOUND", "NotRegularFileError", "open_regular", "read_regular", "unreadable"]

NOT_FOUND = "not found"
"""What every tool says of a file that does not exist, after its name: `rules.yaml: not found`."""

_KINDS = ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO (named pipe)"), (stat.S_ISSOCK, "a socket"),
          (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"))


class NotRegularFileError(OSError):
    """The path names something other than a regular file; `strerror` says what."""


def _check(mode: int, path: str | Path) -> None:
    if not stat.S_ISREG(mode):
        kind = next((name for test, name in _KINDS if test(mode)), "something")
        raise NotRegularFileError(0, f"{kind}, not a regular file", str(path))


def open_regular(path: str | Path) -> BinaryIO:
    """`path` opened for binary reading, or NotRegularFileError (an OSError) at once for anything else.

    Looked at before it is opened (a socket cannot be opened at all), and again once open (the path may
    have been swapped in between)."""
    _check(os.stat(path).st_mode, path)
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    try:
        _check(os.fstat(fd).st_mode, path)
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def read_regular(path: str | Path, max_bytes: int) -> bytes:
    """At most `max_bytes + 1` bytes of a regular file (the caller refuses a file longer than `max_bytes`)."""
    with open_regular(path) as stream:
        return stream.read(max_bytes + 1)


def unreadable(exc: OSError, what: str = "file") -> str:
    """Why a file could not be read, in the words every tool uses: `not found` for a missing one (the
    errno's words, `No such file or directory`, say the same at twice the length), else `cannot read the
    <what>: <reason>`."""
    if isinstance(exc, FileNotFoundError):
        return NOT_FOUND
    return f"cannot read the {what}: {exc.strerror or exc}"
