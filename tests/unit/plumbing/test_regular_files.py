"""plumbing.files: only regular files are opened, and a FIFO is found by looking, never by waiting; the
credential files of a Prometheus connection go through it."""

from __future__ import annotations

import os
import socket
from pathlib import Path

import pytest

from plumbing.files import NotRegularFileError, read_regular
from plumbing.prometheus.session import CredentialError, WatchedFile


def special(kind: str, tmp_path: Path) -> Path:
    path = tmp_path / kind
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "directory":
        path.mkdir()
    elif kind == "socket":
        server = socket.socket(socket.AF_UNIX)
        server.bind(str(path))
        server.close()
    else:
        return Path("/dev/null")
    return path


@pytest.mark.timeout(10)  # a FIFO opened for reading without O_NONBLOCK would block here for ever
@pytest.mark.parametrize(("kind", "said"), [("fifo", "a FIFO (named pipe)"), ("directory", "a directory"),
                                            ("socket", "a socket"), ("device", "a character device")])
def test_anything_but_a_regular_file_is_refused_at_once(kind: str, said: str, tmp_path: Path) -> None:
    path = special(kind, tmp_path)
    with pytest.raises(NotRegularFileError) as info:
        read_regular(path, 100)
    assert info.value.strerror == f"{said}, not a regular file" and info.value.filename == str(path)


def test_a_regular_file_reads_at_most_one_byte_past_the_bound(tmp_path: Path) -> None:
    path = tmp_path / "f"
    path.write_bytes(b"x" * 1000)
    assert read_regular(path, 10) == b"x" * 11
    assert read_regular(path, 5000) == b"x" * 1000


@pytest.mark.timeout(10)
def test_a_credentials_file_that_is_a_fifo_is_a_credential_error(tmp_path: Path) -> None:
    watched = WatchedFile(str(special("fifo", tmp_path)), "password_file")
    with pytest.raises(CredentialError, match=r"password_file .*fifo: a FIFO \(named pipe\), not a regular"):
        watched.read()
