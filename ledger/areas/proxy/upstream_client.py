"""The proxy's upstream client: HTTP/1.1 keep-alive connections per origin, framed by h11.

Why not httpx: its pool (httpcore) looks at every pooled connection's socket on each request
and each release, a system call per connection, and goes through anyio's stream layers; at 32
concurrent calls that was most of the proxy's own CPU per forwarded call (docs/benchmarks.md).
Here a request takes the most recently used idle connection of its origin, checking only that
one, and otherwise opens one (up to ``max_connections`` in all).
h11 does the framing both ways (content-length, chunked, read-until-close, 1xx, keep-alive
rules), as it does inside httpx, so the wire behaviour is the same.

Errors are this module's own (never an ``OSError``, which the forwarder reads as the client
going away): ``UpstreamTimeout`` (connect or read), ``UpstreamConnectError`` (the upstream
could not be reached) and ``UpstreamProtocolError`` (the connection broke or the answer was
not HTTP). Like httpx, a request is never retried: a POST may have reached the model.
"""

from __future__ import annotations

import asyncio
import ssl
import time
from collections import deque
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import cast

import certifi
import h11

# An idle connection older than this is not reused (servers commonly close at 5 s; uvicorn's
# default): past it the upstream may be closing it as we send.
KEEPALIVE_EXPIRY_S = 4.0
# Response bytes buffered from the socket before reading pauses (the client is slower).
READ_BUFFER_HIGH = 256 * 1024
# The largest status line and headers accepted from an upstream (httpcore's bound).
MAX_HEADER_BYTES = 100 * 1024


# Methods that always declare their body's length, empty or not (as httpx does).
_BODY_METHODS = frozenset({b"POST", b"PUT", b"PATCH"})


class UpstreamError(Exception):
    """The upstream leg failed (the message is safe to log: it names no credentials)."""


class UpstreamTimeout(UpstreamError):
    pass


class UpstreamConnectError(UpstreamError):
    pass


class UpstreamProtocolError(UpstreamError):
    pass


@dataclass(frozen=True)
class Origin:
    scheme: str
    host: str
    port: int


class _Wire(asyncio.Protocol):
    """One socket's bytes as awaitable chunks, with read flow control."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self._chunks: deque[bytes] = deque()
        self._buffered = 0
        self._paused = False
        self._closed = False
        self._error: BaseException | None = None
        self._waiter: asyncio.Future[None] | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports implement asyncio.Transport without subclassing it.
        self.transport = cast(asyncio.Transport, transport)

    def data_received(self, data: bytes) -> None:
        self._chunks.append(data)
        self._buffered += len(data)
        if self._buffered > READ_BUFFER_HIGH and not self._paused and self.transport:
            self._paused = True
            self.transport.pause_reading()
        self._wake()

    def eof_received(self) -> bool:
        self._closed = True
        self._wake()
        return False  # close the transport

    def connection_lost(self, exc: Exception | None) -> None:
        self._closed = True
        self._error = exc
        self._wake()

    def _wake(self) -> None:
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_result(None)

    async def read(self) -> bytes:
        """The next bytes, ``b""`` at a clean end; a reset connection raises."""
        while not self._chunks:
            if self._closed:
                if self._error is not None:
                    raise UpstreamProtocolError(f"connection lost: {type(self._error).__name__}")
                return b""
            self._waiter = asyncio.get_running_loop().create_future()
            try:
                await self._waiter
            finally:
                self._waiter = None
        data = self._chunks.popleft()
        self._buffered -= len(data)
        if self._paused and self._buffered <= READ_BUFFER_HIGH // 2 and self.transport:
            self._paused = False
            self.transport.resume_reading()
        return data

    def quiet(self) -> bool:
        """Open, and nothing arrived since the last answer (an idle connection may be reused)."""
        return (
            not self._closed
            and not self._chunks
            and self.transport is not None
            and not self.transport.is_closing()
        )


class _Connection:
    def __init__(self, origin: Origin, wire: _Wire) -> None:
        self.origin = origin
        self.wire = wire
        self.h11 = h11.Connection(our_role=h11.CLIENT, max_incomplete_event_size=MAX_HEADER_BYTES)
        self.idle_since = 0.0

    def write(self, data: bytes) -> None:
        assert self.wire.transport is not None
        self.wire.transport.write(data)

    async def next_event(self, read_timeout: float) -> object:
        """The next h11 event of the answer, reading as needed (each read within the timeout)."""
        while True:
            try:
                event: object = self.h11.next_event()
            except h11.RemoteProtocolError as exc:
                raise UpstreamProtocolError(f"invalid answer: {exc}") from None
            if event is not h11.NEED_DATA:
                return event
            try:
                async with asyncio.timeout(read_timeout):
                    data = await self.wire.read()
            except TimeoutError:
                raise UpstreamTimeout(f"no data from the upstream in {read_timeout} s") from None
            self.h11.receive_data(data)

    def reusable(self, now: float) -> bool:
        return (
            self.h11.our_state is h11.IDLE
            and self.h11.their_state is h11.IDLE
            and now - self.idle_since < KEEPALIVE_EXPIRY_S
            and self.wire.quiet()
        )

    def close(self) -> None:
        if self.wire.transport is not None:
            self.wire.transport.close()


class UpstreamResponse:
    """An answer whose body is still to be read; ``aclose`` (always) ends the exchange."""

    def __init__(
        self,
        client: UpstreamClient,
        connection: _Connection,
        status_code: int,
        headers: list[tuple[bytes, bytes]],
        read_timeout: float,
    ) -> None:
        self._client = client
        self._connection: _Connection | None = connection
        self.status_code = status_code
        # As the upstream sent them (names in their own case).
        self.headers = headers
        self._read_timeout = read_timeout
        self._complete = False

    def header(self, name: bytes) -> bytes | None:
        """The first value of header ``name`` (lower case)."""
        for key, value in self.headers:
            if key.lower() == name:
                return value
        return None

    async def aiter_raw(self) -> AsyncIterator[bytes]:
        """The body as it arrives (transfer coding removed, content coding kept)."""
        connection = self._connection
        assert connection is not None, "the body was read or closed already"
        while True:
            event = await connection.next_event(self._read_timeout)
            if isinstance(event, h11.Data):
                yield bytes(event.data)
            elif isinstance(event, h11.EndOfMessage):
                self._complete = True
                return
            else:  # anything else mid-body is a broken answer
                raise UpstreamProtocolError(f"unexpected {type(event).__name__} in a body")

    async def aclose(self) -> None:
        connection, self._connection = self._connection, None
        if connection is not None:
            self._client._release(connection, reuse=self._complete)


class UpstreamClient:
    def __init__(
        self, *, connect_timeout_s: float, read_timeout_s: float, max_connections: int
    ) -> None:
        self._connect_timeout = connect_timeout_s
        self._read_timeout = read_timeout_s
        self._max_connections = max_connections
        self._open_count = 0  # connections open or being opened, idle ones included
        self._idle: dict[Origin, list[_Connection]] = {}
        # Requests waiting for a connection to come free, first come first served.
        self._waiters: deque[asyncio.Future[None]] = deque()
        self._ssl: ssl.SSLContext | None = None

    async def send(
        self,
        method: bytes,
        origin: Origin,
        target: bytes,
        headers: list[tuple[bytes, bytes]],
        body: bytes,
    ) -> UpstreamResponse:
        """Send the request whole and wait for the answer's status and headers."""
        connection = await self._acquire(origin)
        try:
            framing = (
                [(b"content-length", str(len(body)).encode())]
                if body or method in _BODY_METHODS
                else []
            )
            try:
                data = connection.h11.send(
                    h11.Request(method=method, target=target, headers=[*headers, *framing])
                )
                if body:
                    data = (data or b"") + (connection.h11.send(h11.Data(data=body)) or b"")
                data = (data or b"") + (connection.h11.send(h11.EndOfMessage()) or b"")
            except h11.LocalProtocolError as exc:
                raise UpstreamProtocolError(f"the request cannot be sent: {exc}") from None
            connection.write(data)
            while True:
                event = await connection.next_event(self._read_timeout)
                if isinstance(event, h11.Response):
                    return UpstreamResponse(
                        self,
                        connection,
                        event.status_code,
                        list(event.headers.raw_items()),
                        self._read_timeout,
                    )
                if not isinstance(event, h11.InformationalResponse):
                    raise UpstreamProtocolError(
                        "the upstream closed the connection without answering"
                        if isinstance(event, h11.ConnectionClosed)
                        else f"unexpected {type(event).__name__} before the answer"
                    )
        except BaseException:
            self._release(connection, reuse=False)
            raise

    async def _acquire(self, origin: Origin) -> _Connection:
        """An idle connection of ``origin``, else a new one while fewer than the limit are
        open, else the first to come free (an idle one of another origin is closed for it)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self._read_timeout
        while True:
            idle = self._idle.get(origin)
            now = time.monotonic()
            while idle:
                connection = idle.pop()  # the most recent: the least likely to have expired
                if connection.reusable(now):
                    return connection
                self._discard(connection)
            if self._open_count < self._max_connections:
                self._open_count += 1
                try:
                    return await self._connect(origin)
                except BaseException:
                    self._open_count -= 1
                    self._wake_a_waiter()
                    raise
            if self._evict_one_idle():
                continue
            waiter = loop.create_future()
            self._waiters.append(waiter)
            try:
                async with asyncio.timeout_at(deadline):
                    await waiter
            except TimeoutError:
                raise UpstreamTimeout("no upstream connection became free in time") from None
            finally:
                if waiter in self._waiters:
                    self._waiters.remove(waiter)

    async def _connect(self, origin: Origin) -> _Connection:
        tls: ssl.SSLContext | None = None
        if origin.scheme == "https":
            if self._ssl is None:
                # The CA bundle httpx used (certifi), so the same upstreams verify.
                self._ssl = ssl.create_default_context(cafile=certifi.where())
            tls = self._ssl
        loop = asyncio.get_running_loop()
        try:
            async with asyncio.timeout(self._connect_timeout):
                _, wire = await loop.create_connection(
                    _Wire,
                    origin.host,
                    origin.port,
                    ssl=tls,
                    server_hostname=origin.host if tls is not None else None,
                )
        except TimeoutError:
            raise UpstreamTimeout(
                f"no connection to the upstream in {self._connect_timeout} s"
            ) from None
        except (OSError, ssl.SSLError) as exc:
            raise UpstreamConnectError(f"cannot connect: {type(exc).__name__}: {exc}") from None
        return _Connection(origin, wire)

    def _release(self, connection: _Connection, *, reuse: bool) -> None:
        h = connection.h11
        if reuse and h.our_state is h11.DONE and h.their_state is h11.DONE:
            h.start_next_cycle()
            connection.idle_since = time.monotonic()
            self._idle.setdefault(connection.origin, []).append(connection)
            self._wake_a_waiter()
            return
        self._discard(connection)

    def _discard(self, connection: _Connection) -> None:
        connection.close()
        self._open_count -= 1
        self._wake_a_waiter()

    def _wake_a_waiter(self) -> None:
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)
                return

    def _evict_one_idle(self) -> bool:
        """The pool is full: an idle connection (of any origin) makes room for a new one."""
        for idle in self._idle.values():
            if idle:
                self._discard(idle.pop(0))
                return True
        return False

    async def aclose(self) -> None:
        for idle in self._idle.values():
            while idle:
                self._discard(idle.pop())
