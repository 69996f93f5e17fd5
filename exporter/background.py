"""The lifecycle of the exporter's background loops (kubelet refresh, XID watcher, history sampler), once.

Each loop runs on its own daemon thread and ends when `stopping` is set; `stop()` sets it and waits a bounded
time, so a stuck call can delay shutdown but never hang it.
"""

from __future__ import annotations

import threading
from collections.abc import Callable


class BackgroundLoop:
    """`start()` runs `target` on a named daemon thread (idempotent while it runs); `target` must return soon
    after `stopping` is set, which is what `stop()` does before waiting for it."""

    def __init__(self, target: Callable[[], None], name: str) -> None:
        self._target = target
        self._name = name
        self.stopping = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def start(self) -> None:
        if self.running:
            return
        self.stopping.clear()
        self._thread = threading.Thread(target=self._target, name=self._name, daemon=True)
        self._thread.start()

    def stop(self, timeout: float) -> bool:
        """Set `stopping` and wait up to `timeout` s; True when the thread ended (or never started)."""
        self.stopping.set()
        thread = self._thread
        if thread is None:
            return True
        thread.join(timeout)
        return not thread.is_alive()
