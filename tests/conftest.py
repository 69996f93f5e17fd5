"""What every test shares: the order the suite runs in.

scripts/test.sh runs the suite on pytest-xdist workers with work stealing: each worker is handed a
contiguous share of the collected list, in order, and an idle worker takes half of the rest of the busiest
one's queue, from its end. Tests that take tens of seconds of wall time mostly wait (the image build, the
demo's runs against real Prometheus): each goes to the head of a share, so they all start at once, the
image build alone on the first worker, and the thousands of short tests fill the wait around them. Without
workers (`-n 0`) they simply run first. Every other test keeps its collection order, so the tests of one
module stay together and share their module and package fixtures.

The shared helpers live beside this file, one module per concern (docs/development.md lists them).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from functools import cache

import pytest

FIRST_MARKS = ("image", "slow")
"""Marks of the tests placed at the heads of the workers' shares, in this order."""


def _rank(item: pytest.Item) -> int:
    for rank, mark in enumerate(FIRST_MARKS):
        if item.get_closest_marker(mark) is not None:
            return rank
    return len(FIRST_MARKS)


def _heads(count: int, workers: int, total: int) -> list[int]:
    """Positions for `count` long tests in a list of `total` split into `workers` contiguous shares: the
    first at the head of share 0, the others round the other shares' heads, then one deeper each time."""
    share = max(1, total // workers)
    others = max(1, workers - 1)
    positions = [0]
    for k in range(count - 1):
        worker = 1 + k % others if workers > 1 else 0
        depth = k // others + (1 if workers == 1 else 0)
        positions.append(min(worker * share + depth, total - 1))
    return positions[:count]


@cache
def no_gpu_reason() -> str | None:
    """Why the real NVML cannot run the `gpu` tier here (no driver, no GPU), or None where it can. Asked once,
    and only when a `gpu` test was collected."""
    from exporter.nvml.adapter import real_nvml

    nvml = real_nvml()
    try:
        nvml.nvmlInit()
    except nvml.NVMLError as exc:
        return (f"no NVIDIA GPU here: nvmlInit failed: {type(exc).__name__} "
                "(scripts/gpu-check.sh runs this tier)")
    try:
        count = int(nvml.nvmlDeviceGetCount())
    finally:
        nvml.nvmlShutdown()
    return None if count else "no NVIDIA GPU here: NVML lists none (scripts/gpu-check.sh runs this tier)"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    gpu_tests = [item for item in items if item.get_closest_marker("gpu") is not None]
    if gpu_tests and (reason := no_gpu_reason()) is not None:
        for item in gpu_tests:
            item.add_marker(pytest.mark.skip(reason=reason))
    long = sorted((item for item in items if _rank(item) < len(FIRST_MARKS)), key=_rank)
    if not long:
        return
    rest = iter([item for item in items if _rank(item) == len(FIRST_MARKS)])
    workers = int(getattr(config, "workerinput", {}).get("workercount", 1))
    positions = _heads(len(long), workers, len(items))
    if len(set(positions)) < len(long):  # more long tests than the shares hold: first, in order
        items.sort(key=_rank)
        return
    placed = dict(zip(positions, long, strict=True))
    items[:] = [placed[i] if i in placed else next(rest) for i in range(len(items))]


@pytest.fixture(autouse=True)
def _root_log_handlers_restored() -> Iterator[None]:
    """A CLI's main run in-process configures logging (basicConfig) with the stream pytest captured for that
    test; a thread logging after the test (a watchdog, a server's last request) would then write to a closed
    file. The stream handlers a test added to the root logger are removed (pytest's own capture handlers are
    not stream handlers of that class), and the root level is put back."""
    handlers, level = list(logging.root.handlers), logging.root.level
    yield
    for handler in list(logging.root.handlers):
        if type(handler) is logging.StreamHandler and handler not in handlers:
            logging.root.removeHandler(handler)
    logging.root.setLevel(level)
