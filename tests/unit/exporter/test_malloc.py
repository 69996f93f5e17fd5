"""The exporter caps glibc's malloc arenas (about 1.5 MiB of RSS per node), unless the operator set one."""

from __future__ import annotations

import platform

import pytest

from exporter.malloc import limit_malloc_arenas


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="only glibc has malloc arenas")
def test_glibc_accepts_the_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MALLOC_ARENA_MAX", raising=False)
    assert limit_malloc_arenas(1) is True


def test_the_operators_setting_wins(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MALLOC_ARENA_MAX", "4")
    assert limit_malloc_arenas(1) is False
