"""The one HTTP server of both processes: aiohttp's low-level server on its own event loop in one thread.

Why aiohttp: a maintained HTTP/1.1 parser (llhttp) and keep-alive handling, an event loop so a slow or idle
client costs a socket and a few KiB, never a thread; blocking work (encoding a registry, an NVML sweep, the
status API) runs in a small bounded ThreadPoolExecutor. What aiohttp lacks is a deadline on the request
head: its keep-alive timer restarts after each answer, so a client trickling one header byte at a time
holds a connection for as long as that timer allows. `_Protocol` adds one: armed when a connection opens
and when the first bytes of a next request arrive, disarmed when a complete request head is parsed; on
expiry the connection is closed. TLS handshakes have their own deadline (asyncio's ssl_handshake_timeout).

The socket is bound and listening in the constructor, so a busy port fails before anything starts. Only GET
and HEAD reach a route unless it answers every method itself (`any_method`); others get 405 with
`Allow: GET, HEAD`. A request body up to `max_discarded_body` is read and dropped so keep-alive stays in
step; a larger or chunked one is not read and the connection closes after the answer. With a web config,
every answer carries its headers, and every path but the probes (`public` routes) asks for basic auth,
checked in a pool of its own behind a limit on failures per client (guard.py).
Client disconnects, malformed requests and failed handshakes are logged at DEBUG, never as tracebacks.
The server's own refusals (400 for a malformed request, 401, 429) are one plain-text line, or what the route
renders them as (`Route.refusals`: the JSON API answers them as JSON): a malformed request has no parsed path,
so the first bytes of each request head are kept (`HEAD_KEPT`) to tell which route it was meant for, and
which query parameter a request line too long began with.
"""

from __future__ import annotations

import asyncio
import logging
import socket
import threading
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from typing import Any
from urllib.parse import unquote_plus

from aiohttp import web_protocol, web_server
from aiohttp.abc import AbstractAccessLogger
from aiohttp.http_exceptions import LineTooLong

# The submodules, not aiohttp.web: that also loads the application framework (router, runner, static files),
# 1.3 MiB more of resident memory in a process that needs none of it.
from aiohttp.web_request import BaseRequest
from aiohttp.web_response import Response, StreamResponse

from plumbing.web.auth import BasicAuth, credentials
from plumbing.web.guard import AuthLimits, FailureLimiter
from plumbing.web.tls import ReloadingTls
from plumbing.web.webconfig import WebConfig, WebConfigFile

log = logging.getLogger(__name__)
_access = logging.getLogger(__name__ + ".access")

PLAIN = "text/plain; charset=utf-8"
ALLOWED_METHODS = ("GET", "HEAD")
ALLOW = ", ".join(ALLOWED_METHODS)
HEAD_KEPT = 1024
"""Bytes of each request head kept until it is parsed: enough for a route and a first query parameter."""
MAX_LINE_BYTES = 8190
"""The longest request line or header line read (aiohttp's default, stated here for the messages)."""


class ListenError(Exception):
    """The address cannot be served (port in use, no such address, no permission): one line."""

    def __init__(self, shown: str, exc: OSError) -> None:
        self.reason = exc.strerror or str(exc)
        """What went wrong, e.g. "Address already in use"."""
        super().__init__(f"cannot listen on {shown}: {self.reason}")


@dataclass(frozen=True)
class Request:
    method: str
    path: str
    """Without the query string, as sent (not percent-decoded)."""
    query: str
    headers: Mapping[str, str]
    """Case-insensitive."""


@dataclass(frozen=True)
class Answer:
    status: int
    body: bytes
    content_type: str = PLAIN
    headers: Mapping[str, str] = field(default_factory=dict)


Handler = Callable[[Request], Answer]


@dataclass(frozen=True)
class Refusal:
    """An answer the server gives of its own, before a route's handler runs: a malformed request (400),
    missing or wrong credentials (401), too many attempts (429)."""

    status: int
    message: str
    """One line, no newline: `unauthorized`, `the request line is longer than 8190 bytes`."""
    parameter: str | None = None
    """The query parameter the problem lies in, when one is known."""
    headers: Mapping[str, str] = field(default_factory=dict)
    """`WWW-Authenticate`, `Retry-After`: added to the answer whoever renders it."""


RefusalRenderer = Callable[[str, Refusal], Answer]
"""(path as sent, refusal) -> the answer (status and body); the server adds the refusal's headers."""


@dataclass(frozen=True)
class Route:
    handler: Handler
    blocking: bool = True
    """Run in the worker pool; False for cheap answers that must not queue behind scrapes (probes)."""
    any_method: bool = False
    """The handler answers every method itself (the JSON API's own 405)."""
    prefix: bool = False
    """Matches every path under this one."""
    public: bool = False
    """Exempt from basic auth: the kubelet's probes carry no credentials."""
    refusals: RefusalRenderer | None = None
    """Renders the server's own refusals on this route's paths (the JSON API's are JSON); None: plain text."""


@dataclass(frozen=True)
class ServerSettings:
    """Limits of one server. Seconds."""

    idle_timeout: float = 30.0
    """A keep-alive connection with no request in flight is closed after this."""
    header_timeout: float = 10.0
    """From connection open (or a next request's first byte) to a complete request head."""
    body_timeout: float = 30.0
    """To read a small request body that is dropped anyway."""
    handshake_timeout: float = 10.0
    """TLS handshake."""
    backlog: int = socket.SOMAXCONN
    """Connections the kernel completes before the event loop accepts them: the system's maximum, as Go's
    servers take (Linux caps it at net.core.somaxconn, 4096 by default), so a burst of clients connecting at
    once is queued rather than left to retry their SYN (with 128, 14 of 200 waited over 0.9 s)."""
    workers: int = 4
    """Threads for blocking handlers; never one per client."""
    max_discarded_body: int = 64 * 1024
    name: str = "http"
    auth: AuthLimits = field(default_factory=AuthLimits)
    """Failed basic-auth attempts per client and the bcrypt checks' own pool (guard.py)."""


class _DebugAccessLog(AbstractAccessLogger):
    def log(self, request: BaseRequest, response: StreamResponse, time: float) -> None:
        self.logger.debug("%s %s %s %d %.3fs", request.remote, request.method, request.path_qs,
                          response.status, time)

    @property
    def enabled(self) -> bool:
        return self.logger.isEnabledFor(logging.DEBUG)


Malformed = Callable[[bytes, int, "BaseException | None"], Response]
"""(first bytes of the request head, the length of its first line so far, the parser's error) -> the 400."""


class _Protocol(web_protocol.RequestHandler):
    """aiohttp's connection protocol plus the request-head deadline (see the module docstring), and the first
    bytes of each request head, for the answer to a malformed one."""

    def __init__(self, manager: web_server.Server, *, header_timeout: float, malformed: Malformed,
                 **kwargs: Any) -> None:
        super().__init__(manager, **kwargs)
        self._header_timeout = header_timeout
        self._head_deadline: asyncio.TimerHandle | None = None
        self._malformed = malformed
        self._head = bytearray()
        self._line_length = 0
        self._line_ended = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        super().connection_made(transport)
        self._arm()

    def data_received(self, data: bytes) -> None:
        if self._head_deadline is None and not self._request_in_progress and not self._messages:
            self._head, self._line_length, self._line_ended = bytearray(), 0, False  # a next request begins
        if len(self._head) < HEAD_KEPT:
            self._head += data[:HEAD_KEPT - len(self._head)]
        if not self._line_ended:
            end = data.find(b"\n")
            self._line_length += len(data) if end < 0 else end
            self._line_ended = end >= 0
        super().data_received(data)
        if self._messages or self._request_in_progress:  # a complete head was parsed
            self._disarm()
        elif data and self._head_deadline is None:  # the first bytes of a next request
            self._arm()

    def connection_lost(self, exc: BaseException | None) -> None:
        self._disarm()
        super().connection_lost(exc)

    def handle_error(self, request: BaseRequest, status: int = 500, exc: BaseException | None = None,
                     message: str | None = None) -> StreamResponse:
        """A malformed request: one DEBUG line and a short answer (aiohttp logs a traceback at ERROR)."""
        if status >= 500:
            return super().handle_error(request, status, exc, message)
        log.debug("bad request from %s: %s", request.remote, str(exc or message).strip().splitlines()[0])
        if request.writer.output_size > 0:
            raise ConnectionError("the answer was sent already")
        return self._malformed(bytes(self._head), self._line_length, exc)

    def _arm(self) -> None:
        self._disarm()
        self._head_deadline = self._loop.call_later(self._header_timeout, self._expired)

    def _disarm(self) -> None:
        if self._head_deadline is not None:
            self._head_deadline.cancel()
            self._head_deadline = None

    def _expired(self) -> None:
        self._head_deadline = None
        log.debug("closing a connection: no complete request head within %gs", self._header_timeout)
        self.force_close()


class _Server(web_server.Server):
    def __init__(self, handler: Any, *, header_timeout: float, malformed: Malformed, **kwargs: Any) -> None:
        super().__init__(handler, **kwargs)
        self._header_timeout = header_timeout
        self._malformed = malformed

    def __call__(self) -> web_protocol.RequestHandler:
        return _Protocol(self, loop=self._loop, header_timeout=self._header_timeout,
                         malformed=self._malformed, **self._kwargs)

    def connections_transports(self) -> list[asyncio.Transport]:
        """Open connections: at shutdown they are aborted, because a TLS close waits for the peer's
        close_notify and a stopping loop cannot wait."""
        return [transport for transport in self._connections.values() if not transport.is_closing()]


def _abort_handshakes(loop: asyncio.AbstractEventLoop) -> None:
    """Abort the connections still in their TLS handshake: they belong to no HTTP protocol yet, so the server
    does not know them, and a closed loop would leave them to the garbage collector ("unclosed transport").
    asyncio keeps every socket transport of a selector loop in `_transports`; there is no public list."""
    transports = getattr(loop, "_transports", None)
    for transport in list(transports.values()) if transports is not None else []:
        if not transport.is_closing():
            transport.abort()


def _quiet(loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
    """The loop's exception handler: a failed handshake or a reset connection is a DEBUG line."""
    log.debug("%s: %r", context.get("message"), context.get("exception"))


def listen(address: str, port: int, backlog: int) -> socket.socket:
    """A bound, listening socket; the family (IPv4 or IPv6) comes from getaddrinfo."""
    shown = f"[{address}]:{port}" if ":" in address else f"{address}:{port}"
    try:
        family = socket.getaddrinfo(address or None, port, type=socket.SOCK_STREAM,
                                    flags=socket.AI_PASSIVE)[0][0]
        sock = socket.socket(family, socket.SOCK_STREAM)
    except OSError as exc:
        raise ListenError(shown, exc) from exc
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((address, port))
        sock.listen(backlog)
        sock.setblocking(False)
    except OSError as exc:
        sock.close()
        raise ListenError(shown, exc) from exc
    return sock


class HttpServer:
    """Routes by exact path (or prefix), served until `shutdown`."""

    def __init__(self, address: str, port: int, routes: Mapping[str, Route],
                 settings: ServerSettings = ServerSettings(), web_config: WebConfig | None = None,
                 not_found: bytes = b"not found\n", auth: BasicAuth | None = None) -> None:
        self.settings = settings
        self._routes = dict(routes)
        self._prefixes = [(path, route) for path, route in routes.items() if route.prefix]
        self._not_found = not_found
        self._web = WebConfigFile(web_config) if web_config is not None else None
        self.tls = ReloadingTls(web_config.tls) if web_config is not None and web_config.tls else None
        self._auth = auth if auth is not None else BasicAuth()
        self._sock = listen(address, port, settings.backlog)
        self._pool = ThreadPoolExecutor(settings.workers, thread_name_prefix=f"{settings.name}-worker")
        self._verify_pool = ThreadPoolExecutor(settings.auth.verify_threads,
                                               thread_name_prefix=f"{settings.name}-auth")
        self._failures = FailureLimiter(settings.auth)
        self._verifying = 0  # checks running or queued; read and written on the event loop only
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._started = threading.Event()
        self._stopped: asyncio.Event | None = None

    @property
    def port(self) -> int:
        return int(self._sock.getsockname()[1])

    @property
    def address(self) -> str:
        return str(self._sock.getsockname()[0])

    @property
    def scheme(self) -> str:
        return "https" if self.tls is not None else "http"

    def start(self) -> None:
        """Serve in one background thread (the event loop); returns once the loop accepts."""
        self._thread = threading.Thread(target=self._run, name=self.settings.name, daemon=True)
        self._thread.start()
        self._started.wait(10)

    def _run(self) -> None:
        loop = asyncio.new_event_loop()
        loop.set_exception_handler(_quiet)
        self._loop = loop
        try:
            loop.run_until_complete(self._serve())
        finally:
            loop.run_until_complete(loop.shutdown_asyncgens())
            loop.close()

    async def _serve(self) -> None:
        s = self.settings
        self._stopped = asyncio.Event()
        protocol = _Server(self._handle, header_timeout=s.header_timeout, malformed=self._malformed,
                           keepalive_timeout=s.idle_timeout, lingering_time=0, logger=log, access_log=_access,
                           access_log_class=_DebugAccessLog, max_line_size=MAX_LINE_BYTES,
                           max_field_size=MAX_LINE_BYTES)
        ssl = self.tls.context if self.tls is not None else None
        server = await asyncio.get_running_loop().create_server(
            protocol, sock=self._sock, ssl=ssl, backlog=s.backlog,
            ssl_handshake_timeout=s.handshake_timeout if ssl is not None else None)
        self._started.set()
        try:
            await self._stopped.wait()
        finally:
            server.close()
            transports = protocol.connections_transports()
            await protocol.shutdown(1.0)
            for transport in transports:
                transport.abort()
            _abort_handshakes(asyncio.get_running_loop())
            for _ in range(3):  # let the aborted transports (and their TLS layers) call connection_lost
                await asyncio.sleep(0)

    def shutdown(self) -> None:
        """Stop serving and close the socket; safe whether or not serving started."""
        loop, stopped = self._loop, self._stopped
        if loop is not None and stopped is not None and self._thread is not None:
            loop.call_soon_threadsafe(stopped.set)
            self._thread.join(10)
        self._thread = None
        self._pool.shutdown(wait=False, cancel_futures=True)
        self._verify_pool.shutdown(wait=False, cancel_futures=True)
        self._sock.close()

    def _route(self, path: str) -> Route | None:
        route = self._routes.get(path)
        if route is not None:
            return route
        for prefix, candidate in self._prefixes:
            if path.startswith(prefix):
                return candidate
        return None

    async def _handle(self, request: BaseRequest) -> StreamResponse:
        config = self._web.current() if self._web is not None else None
        extra = dict(config.headers) if config is not None else {}
        keep_alive = await self._drop_body(request)
        path, _, query = request.raw_path.partition("?")
        route = self._route(path)
        needs_auth = config is not None and config.users and not (route is not None and route.public)
        refused = await self._authorized(request, config.users) if needs_auth and config is not None else None
        if refused is not None:
            return _response(_refusal_answer(route, path, refused), extra, keep_alive)
        if route is None:
            answer = Answer(404, self._not_found)
        elif request.method not in ALLOWED_METHODS and not route.any_method:
            line = f"method {request.method} not allowed on {path}; use {' or '.join(ALLOWED_METHODS)}\n"
            answer = Answer(405, line.encode())
        else:
            view = Request(request.method, path, query, request.headers)
            try:
                if route.blocking:
                    answer = await asyncio.get_running_loop().run_in_executor(self._pool, route.handler, view)
                else:
                    answer = route.handler(view)
            except Exception:  # a handler bug must not take the server down
                log.exception("HTTP handler for %s failed", path)
                answer = Answer(500, b"internal error; see the log\n")
        return _response(answer, extra, keep_alive)

    async def _drop_body(self, request: BaseRequest) -> bool:
        """Read and drop a small body; False (close after the answer) for one not worth reading."""
        if request.headers.get("Transfer-Encoding") is not None:
            return False
        size = request.content_length or 0
        if size > self.settings.max_discarded_body:
            return False
        if size:
            try:
                await asyncio.wait_for(request.content.readexactly(size), self.settings.body_timeout)
            except (TimeoutError, asyncio.IncompleteReadError, ConnectionError):
                return False
        return True

    def _malformed(self, head: bytes, line_length: int, exc: BaseException | None) -> Response:
        """The 400 of a request aiohttp could not parse, rendered by the route its first line names."""
        path, query = _target(head)
        if isinstance(exc, LineTooLong) and line_length > MAX_LINE_BYTES:
            name = unquote_plus(query.split("&", 1)[0].split("=", 1)[0])[:40] if query else ""
            refusal = Refusal(400, f"the request line is longer than {MAX_LINE_BYTES} bytes",
                              name or None)
        elif isinstance(exc, LineTooLong):
            refusal = Refusal(400, f"a request header is longer than {MAX_LINE_BYTES} bytes")
        else:
            refusal = Refusal(400, "bad request: malformed request")
        config = self._web.current() if self._web is not None else None
        extra = dict(config.headers) if config is not None else {}
        return _response(_refusal_answer(self._route(path) if path else None, path, refusal), extra, False)

    async def _authorized(self, request: BaseRequest, users: Mapping[str, bytes]) -> Refusal | None:
        """None when the request may pass; else the refusal: 401, or 429 where a check would cost a bcrypt
        hash the client is not allowed now (guard.py)."""
        given = credentials(request.headers.get("Authorization"))
        if given is None:
            return _UNAUTHORIZED
        if self._auth.cached(users, *given):
            return None
        client = request.remote or ""
        wait = self._failures.retry_after(client)
        if wait is None and self._verifying >= self.settings.auth.max_pending:
            wait = 1
        if wait is not None:
            await asyncio.sleep(self.settings.auth.refusal_delay_seconds)
            return Refusal(429, "too many failed or pending authentication attempts; retry later",
                           headers={"Retry-After": str(wait)})
        blocks = self._failures.failed(client)  # counted as it starts: concurrent checks keep to the limit
        self._verifying += 1
        try:
            loop = asyncio.get_running_loop()
            ok = await loop.run_in_executor(self._verify_pool, self._auth.verify, users, *given)
        finally:
            self._verifying -= 1
        if ok:
            self._failures.forget(client)
            return None
        if blocks:
            log.warning("%d failed basic-auth attempts from %s within %gs: its next attempts are answered "
                        "429 until the oldest leaves that window", self.settings.auth.failures, client,
                        self.settings.auth.window_seconds)
        return _UNAUTHORIZED


_UNAUTHORIZED = Refusal(401, "unauthorized",
                        headers={"WWW-Authenticate": 'Basic realm="metrics", charset="UTF-8"'})


def _refusal_answer(route: Route | None, path: str, refusal: Refusal) -> Answer:
    """The route's rendering of a refusal (one plain-text line without one), with the refusal's headers."""
    if route is not None and route.refusals is not None:
        answer = route.refusals(path, refusal)
    else:
        answer = Answer(refusal.status, f"{refusal.message}\n".encode())
    return replace(answer, headers={**answer.headers, **refusal.headers})


def _target(head: bytes) -> tuple[str, str]:
    """Path and query string (as far as kept) of a request head's first line; ("", "") without one."""
    parts = head.split(b"\n", 1)[0].decode("latin-1").rstrip("\r").split(" ")
    path, _, query = parts[1].partition("?") if len(parts) > 1 else ("", "", "")
    return path, query


def _response(answer: Answer, extra: Mapping[str, str], keep_alive: bool) -> Response:
    headers = {**extra, **answer.headers, "Content-Type": answer.content_type}
    if answer.status == 405:
        headers["Allow"] = ALLOW
    response = Response(status=answer.status, body=answer.body, headers=headers)
    if not keep_alive:
        response.force_close()
    return response
