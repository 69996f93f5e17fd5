"""An overall deadline on HTTP exchanges made through urllib3 (requests, the Kubernetes client).

urllib3's read timeout bounds each read, not the exchange: a server that sends one byte a second, in its
headers or its body, never trips it and holds the caller for as long as it likes. `Deadline` bounds the whole
exchange: while one is armed in a thread, every connection that thread takes from a pool installed here is
registered with it, and when it expires a watchdog shuts those sockets down, so the blocked read returns at
once with an error the caller reports as no answer in time (`Deadline.expired` says which). Shutting a
socket down, rather than closing it, is safe from another thread: the file descriptor stays the reader's.

A `Cancel` ends the deadlines armed under it before their time: a stop signal cuts the queries in flight.

`install(pool_manager)` makes a PoolManager's pools register their connections; a connection taken while no
deadline is armed is not watched. One watchdog thread serves every deadline of the process (a heap of their
ends: a sync of a thousand Kubernetes calls starts no thread per call); it is a daemon, so it never keeps a
finished process alive.
"""

from __future__ import annotations

import contextlib
import heapq
import itertools
import logging
import math
import socket
import threading
import time
from collections.abc import Iterator
from types import TracebackType
from typing import Any

from urllib3 import PoolManager
from urllib3.connectionpool import HTTPConnectionPool, HTTPSConnectionPool

_armed = threading.local()
logging.getLogger("urllib3.connection").setLevel(logging.ERROR)
"""urllib3 logs a header it cannot parse (a cut or hostile answer) as a WARNING with a traceback; the caller
reports the exchange's failure in one line instead."""
MIN_EXCHANGE_SECONDS = 1.0
"""The least a whole exchange is given where a client's per-read timeout is shorter (the controller's
Kubernetes calls at intervals under 4 s): connecting, sending and reading on a loaded machine, not a read."""
_RECHECK_SECONDS = 0.2
"""After expiry, connections taken later (a retry, a redirect) are cut as soon as they are registered; the
watchdog also looks again this often, for one that was still connecting when the deadline passed."""


class Deadline:
    """`with Deadline(seconds):` around a request and the reading of its answer."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self._end = math.inf
        self._fired = False
        self._left = False
        self._connections: list[Any] = []
        self._lock = threading.Lock()
        self._previous: Deadline | None = None

    @property
    def expired(self) -> bool:
        """Whether the deadline has passed, by the clock: true as soon as any watchdog could have cut the
        exchange, even before the watchdog has come to this one (an inner deadline may cut first)."""
        return self._fired or time.monotonic() >= self._end

    def __enter__(self) -> Deadline:
        self._end = time.monotonic() + self.seconds
        self._previous = getattr(_armed, "deadline", None)
        _armed.deadline = self
        _WATCHDOG.watch(self, self._end)
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        _armed.deadline = self._previous
        with self._lock:
            self._left = True
            self._connections.clear()

    def adopt(self, connection: Any) -> None:
        with self._lock:
            if self._left:
                return
            self._connections.append(connection)
            if self._fired:
                _cut(connection)

    def end_now(self) -> None:
        """Bring the end forward to now: the watchdog cuts the exchange at once (and again every
        _RECHECK_SECONDS, for a connection still being made), as if the time had run out."""
        self._end = min(self._end, time.monotonic())
        _WATCHDOG.watch(self, self._end)

    def fire(self) -> bool:
        """Cut every connection of the exchange; False once it has been left (nothing more to watch)."""
        with self._lock:
            if self._left:
                return False
            self._fired = True
            for connection in self._connections:
                _cut(connection)
            return True


class Cancel:
    """Exchanges a stop signal ends at once: `cancel()` ends every deadline armed `under` it now, and one
    armed after it ends as soon as it starts. A SIGTERM during a query to a server that hangs or drips is
    then seconds, not the query's whole timeout. Thread-safe: the deadlines may be armed in many threads."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._armed: set[Deadline] = set()
        self._cancelled = False

    @property
    def cancelled(self) -> bool:
        return self._cancelled

    def cancel(self) -> None:
        with self._lock:
            self._cancelled = True
            armed = list(self._armed)
        for deadline in armed:
            deadline.end_now()

    @contextlib.contextmanager
    def under(self, deadline: Deadline) -> Iterator[None]:
        """While inside, `cancel()` ends `deadline` (at once if it has been called already)."""
        with self._lock:
            self._armed.add(deadline)
            cancelled = self._cancelled
        if cancelled:
            deadline.end_now()
        try:
            yield
        finally:
            with self._lock:
                self._armed.discard(deadline)


class _Watchdog:
    """One daemon thread firing deadlines at their ends, then again every _RECHECK_SECONDS until they are
    left (for a connection that was still connecting at the end)."""

    def __init__(self) -> None:
        self._heap: list[tuple[float, int, Deadline]] = []
        self._order = itertools.count()
        self._wake = threading.Condition()
        self._thread: threading.Thread | None = None

    def watch(self, deadline: Deadline, at: float) -> None:
        with self._wake:
            heapq.heappush(self._heap, (at, next(self._order), deadline))
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="http-deadlines", daemon=True)
                self._thread.start()
            self._wake.notify()

    def _run(self) -> None:
        while True:
            due: list[Deadline] = []
            with self._wake:
                while self._heap and (self._heap[0][2]._left or self._heap[0][0] <= time.monotonic()):
                    _, _, deadline = heapq.heappop(self._heap)
                    if not deadline._left:
                        due.append(deadline)
                wait = self._heap[0][0] - time.monotonic() if self._heap else None
                if not due:
                    self._wake.wait(wait)
                    continue
            for deadline in due:
                if deadline.fire():
                    self.watch(deadline, time.monotonic() + _RECHECK_SECONDS)


_WATCHDOG = _Watchdog()


def expired() -> bool:
    """Whether a deadline armed in this thread (the innermost or one around it) has passed."""
    deadline: Deadline | None = getattr(_armed, "deadline", None)
    while deadline is not None:
        if deadline.expired:
            return True
        deadline = deadline._previous
    return False


def _cut(connection: Any) -> None:
    sock = getattr(connection, "sock", None)
    if sock is None:
        return
    with contextlib.suppress(OSError):  # already closed, or never connected
        sock.shutdown(socket.SHUT_RDWR)


def _register(connection: Any) -> Any:
    """Every deadline armed in this thread watches the connection: an outer one (a call and the reading
    of its body) outlives an inner one (the call alone)."""
    deadline: Deadline | None = getattr(_armed, "deadline", None)
    while deadline is not None:
        deadline.adopt(connection)
        deadline = deadline._previous
    return connection


class _WatchedPool(HTTPConnectionPool):
    def _get_conn(self, timeout: float | None = None) -> Any:
        return _register(super()._get_conn(timeout))


class _WatchedHTTPSPool(HTTPSConnectionPool):
    def _get_conn(self, timeout: float | None = None) -> Any:
        return _register(super()._get_conn(timeout))


def install(pool_manager: PoolManager) -> PoolManager:
    """Make `pool_manager`'s pools (those it creates from now on) register connections with deadlines."""
    pool_manager.pool_classes_by_scheme = {"http": _WatchedPool, "https": _WatchedHTTPSPool}
    return pool_manager
