"""A server on 127.0.0.1 that sends its answer one byte at a time from a chosen point (in the status line,
the headers or the body): the exchange never trips a per-read timeout, only a deadline on the whole of it."""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Callable, Iterator

from hypothesis import strategies as st

BODY = b'{"status":"success","data":{"resultType":"vector","result":[{"metric":{},"value":[1,"1"]}]}}'
ANSWER = (b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: "
          + str(len(BODY)).encode() + b"\r\n\r\n" + BODY)


@contextlib.contextmanager
def dripping(start_at: int, pace: float, answer: bytes = ANSWER) -> Iterator[str]:
    """A server that sends answer[:start_at] at once, then one byte every `pace` s (up to 60 s)."""

    def serve(conn: socket.socket, stop: threading.Event) -> None:
        conn.recv(65536)
        conn.sendall(answer[:start_at])
        for index in range(start_at, len(answer)):
            if stop.wait(pace):
                return
            conn.sendall(answer[index:index + 1])

    with _serving(serve) as url:
        yield url


@contextlib.contextmanager
def _serving(serve: Callable[[socket.socket, threading.Event], None]) -> Iterator[str]:
    """A listener on 127.0.0.1 calling `serve(connection, stop)` in a thread per connection; `stop` is set
    (and the connections closed by their threads) when the block ends."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(64)
    listener.settimeout(0.1)
    stop = threading.Event()

    def each(conn: socket.socket) -> None:
        with conn, contextlib.suppress(OSError):
            serve(conn, stop)

    def accept() -> None:
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except OSError:
                continue
            threading.Thread(target=each, args=(conn,), daemon=True).start()

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}"
    finally:
        stop.set()
        thread.join(5)
        listener.close()


PACES = [0.05, 0.2, 0.45]
"""Every pace under the per-read timeout: it never trips."""


def drips(timeout: float, answer: bytes = ANSWER) -> st.SearchStrategy[tuple[int, float]]:
    """(where the dripping starts, pace), leaving enough bytes of `answer` to last three `timeout`s."""
    def overrunning(pace: float) -> st.SearchStrategy[tuple[int, float]]:
        last = len(answer) - int(3 * timeout / pace) - 1
        return st.tuples(st.integers(min_value=0, max_value=last), st.just(pace))

    return st.sampled_from(PACES).flatmap(overrunning)


@contextlib.contextmanager
def hanging() -> Iterator[tuple[str, threading.Event]]:
    """A server that reads each request and never answers (until the block ends): yields its URL and an
    event set once a request has come, so a test acts while a query is surely in flight."""
    asked = threading.Event()

    def hold(conn: socket.socket, stop: threading.Event) -> None:
        conn.recv(65536)
        asked.set()
        stop.wait(120)

    with _serving(hold) as url:
        yield url, asked
